"""hub/memory_limit.py on a made-up cgroup tree (both cgroup versions) and, where this machine
allows it (root on Linux with memory cgroups), on the real one: a process put in a learner's
group gets the limit, and its children are born inside it."""
import os
import subprocess
import sys


from tests.support.child_python import ROOT

sys.path.insert(0, os.path.join(ROOT, "hub"))
import memory_limit  # noqa: E402  (hub/memory_limit.py)


def fake_v1(tmp_path):
    memory = tmp_path / "memory" / "job"
    memory.mkdir(parents=True)
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    proc = tmp_path / "cgroup"
    proc.write_text("5:devices:/\n4:memory:/job\n0::/\n")
    return proc


def fake_v2(tmp_path, controllers="cpu io memory pids", cgroup="/"):
    """A cgroup v2 root with ``controllers``, and a /proc/self/cgroup placing us at ``cgroup``."""
    (tmp_path / "cgroup.controllers").write_text(controllers + "\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    proc = tmp_path / "cgroup"
    proc.write_text(f"0::{cgroup}\n")
    return proc


def test_v1_a_learners_group_inside_the_hubs_own_gets_the_limit_and_the_process(tmp_path):
    groups = memory_limit.MemoryCgroups(2**30, "ipu-lab-hub-8000", root=str(tmp_path),
                                        proc_cgroup=str(fake_v1(tmp_path)))
    assert groups.enforced and groups.version == 1 and groups.reason is None
    assert groups.base == str(tmp_path / "memory" / "job" / "ipu-lab-hub-8000")
    groups.confine(4242, "ada")
    ada = tmp_path / "memory" / "job" / "ipu-lab-hub-8000" / "ada"
    assert (ada / "memory.limit_in_bytes").read_text() == str(2**30)
    assert (ada / "cgroup.procs").read_text() == "4242"
    (ada / "memory.failcnt").write_text("3\n")
    assert groups.limit_hits("ada") == 3


def test_v2_needs_the_root_cgroup_and_a_memory_controller(tmp_path):
    proc = fake_v2(tmp_path, cgroup="/some/service")
    nested = memory_limit.MemoryCgroups(2**30, "hub", root=str(tmp_path), proc_cgroup=str(proc))
    assert not nested.enforced and "root cgroup" in nested.reason
    proc.write_text("0::/\n")
    groups = memory_limit.MemoryCgroups(2**30, "hub", root=str(tmp_path), proc_cgroup=str(proc))
    assert groups.enforced and groups.version == 2
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"
    groups.confine(7, "bob")
    assert (tmp_path / "hub" / "bob" / "memory.max").read_text() == str(2**30)
    (tmp_path / "hub" / "bob" / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\n")
    assert groups.limit_hits("bob") == 2


def test_no_memory_controller_means_no_limit_and_says_why(tmp_path):
    proc = fake_v2(tmp_path, controllers="cpu io pids")
    groups = memory_limit.MemoryCgroups(2**30, "hub", root=str(tmp_path), proc_cgroup=str(proc))
    assert not groups.enforced and groups.reason == "cgroup v2 here has no memory controller"
    nothing = memory_limit.MemoryCgroups(2**30, "hub", root=str(tmp_path / "none"),
                                         proc_cgroup=str(proc))
    assert nothing.reason == "this machine has no memory cgroup hierarchy"


def test_an_unwritable_hierarchy_means_no_limit_not_a_crash(tmp_path):
    proc = fake_v1(tmp_path)
    (tmp_path / "memory" / "job").chmod(0o500)
    try:
        if os.geteuid() == 0:     # root writes anyway: make the group's name a file instead
            (tmp_path / "memory" / "job").chmod(0o700)
            (tmp_path / "memory" / "job" / "hub").write_text("")
        groups = memory_limit.MemoryCgroups(2**30, "hub", root=str(tmp_path),
                                            proc_cgroup=str(proc))
        assert not groups.enforced and groups.reason.startswith("cannot make a memory cgroup")
    finally:
        (tmp_path / "memory" / "job").chmod(0o700)


def test_on_this_machine_a_confined_process_and_its_children_get_the_limit():
    groups = memory_limit.MemoryCgroups(256 * 2**20, f"ipu-lab-test-{os.getpid()}")
    if not groups.enforced:
        assert groups.reason     # said at the hub's start, and no limit set
        return
    # The confined process starts a child once it is in the group, as a server starts a kernel;
    # the child holds more than the limit and is killed, the parent is not.
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; sys.stdin.readline(); print(subprocess.run("
         "[sys.executable, '-c', 'held = b\"x\" * (512 * 2**20)']).returncode)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        groups.confine(parent.pid, "ada")
        out, _ = parent.communicate("go\n", timeout=60)
        assert out.strip() == "-9"             # SIGKILL from the memory cgroup's OOM killer
        assert parent.returncode == 0
        assert groups.peak_bytes("ada") <= 256 * 2**20
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait()
        assert groups.release("ada")
        groups.remove()
    left = [group for group in (groups.base, *(os.path.dirname(limits)
                                               for limits, _ in groups.shared_limits("ada")))
            if os.path.isdir(group)]
    assert not left, f"groups left behind: {left}"


def test_sizes_are_read_in_powers_of_1024():
    """Jupyter's sizes: 1G is 2**30 bytes, not 10**9 (the module's docstring examples)."""
    assert memory_limit.parse_size("1G") == 2**30
    assert memory_limit.parse_size("1.5G") == 3 * 2**29
    assert memory_limit.parse_size("512M") == 2**29 and memory_limit.parse_size("2048") == 2048


def test_v1_a_learner_gets_an_equal_cpu_share_and_a_process_limit(tmp_path):
    proc = fake_v1(tmp_path)
    proc.write_text("8:pids:/\n4:memory:/job\n1:cpu:/\n0::/\n")
    for hierarchy in ("cpu", "pids"):
        (tmp_path / hierarchy).mkdir()
        (tmp_path / hierarchy / "cgroup.procs").write_text("1\n")
    groups = memory_limit.MemoryCgroups(2**30, "hub", root=str(tmp_path), proc_cgroup=str(proc))
    groups.confine(4242, "ada")
    assert (tmp_path / "cpu" / "hub" / "ada" / "cpu.shares").read_text() == "1024"
    assert (tmp_path / "pids" / "hub" / "ada" / "pids.max").read_text() == str(
        memory_limit.PIDS_MAX)
    for hierarchy in ("memory/job", "cpu", "pids"):
        assert (tmp_path / hierarchy / "hub" / "ada" / "cgroup.procs").read_text() == "4242"


def test_v2_a_learner_gets_an_equal_cpu_weight_and_a_process_limit(tmp_path):
    proc = fake_v2(tmp_path)
    groups = memory_limit.MemoryCgroups(2**30, "hub", root=str(tmp_path), proc_cgroup=str(proc))
    groups.confine(7, "bob")
    bob = tmp_path / "hub" / "bob"
    assert (bob / "cpu.weight").read_text() == "100"
    assert (bob / "pids.max").read_text() == str(memory_limit.PIDS_MAX)
