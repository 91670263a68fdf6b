"""tests/support/foreground_cpu.py: the JupyterLite test's processes in a CPU cgroup of their
own, weighing more than the rest of the test run, and back where they were afterwards."""
import os
import subprocess

from tests.support import foreground_cpu


def cpu_group_of(pid) -> str:
    proc_cgroup = f"/proc/{pid}/cgroup"
    v1 = foreground_cpu.memory_limit.own_cgroup("cpu", proc_cgroup)
    return v1 if v1 is not None else foreground_cpu.memory_limit.own_cgroup("", proc_cgroup)


def test_what_starts_inside_is_weighted_and_the_group_is_gone_afterwards():
    before = cpu_group_of(os.getpid())
    name = f"ipu-lab-test-foreground-{os.getpid()}"
    with foreground_cpu.foreground(name) as placed:
        if os.geteuid() != 0:
            assert placed.group is None and placed.said == "none (not root)"
            return
        assert placed.group, placed.said        # root on this project's machines: it works
        weight_file, weight = placed.said.split()
        with open(os.path.join(placed.group, weight_file)) as f:
            assert int(f.read()) == int(weight) == foreground_cpu.SHARE * (
                1024 if weight_file == "cpu.shares" else 100)
        child = subprocess.Popen(["sleep", "30"])
        try:
            assert cpu_group_of(child.pid) == cpu_group_of(os.getpid())
            assert cpu_group_of(child.pid).endswith("/" + name)
        finally:
            child.kill()
            child.wait()
    assert cpu_group_of(os.getpid()) == before
    assert not os.path.isdir(placed.group), "the group was left behind"


def test_without_root_nothing_changes_and_it_says_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    before = cpu_group_of(os.getpid())
    with foreground_cpu.foreground("never-made") as placed:
        assert placed == foreground_cpu.Placement(None, "none (not root)")
        assert cpu_group_of(os.getpid()) == before


def test_a_group_it_cannot_make_changes_nothing_and_says_why(monkeypatch, tmp_path):
    unwritable = "/proc/self/no-such-cgroup"
    monkeypatch.setattr(foreground_cpu, "_plan",
                        lambda name: (str(tmp_path), unwritable, "cpu.shares", 10240))
    before = cpu_group_of(os.getpid())
    with foreground_cpu.foreground("never-made") as placed:
        assert placed.group is None and placed.said.startswith("none ("), placed
        assert cpu_group_of(os.getpid()) == before
