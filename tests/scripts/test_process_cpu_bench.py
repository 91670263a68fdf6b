"""bench/process_cpu.py reads the kernel's process accounting records and sorts a test run's
processes into families: checked on records made here (an acct_v3 file's bytes), not on a run.
About 0.01 s."""
import importlib.util

from tests.support.child_python import ROOT

spec = importlib.util.spec_from_file_location("process_cpu", ROOT / "bench" / "process_cpu.py")
process_cpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(process_cpu)

PYTEST = 100


def record(pid, ppid, command, utime_ticks, uid=0, forked_only=False, version=3):
    """One acct_v3 record; times in accounting ticks (plain comp_t below 8,192)."""
    return process_cpu.RECORD.pack(
        process_cpu.AFORK if forked_only else 0, version, 0, 0, uid, uid, pid, ppid, 0,
        float(utime_ticks), utime_ticks, 0, 0, 0, 0, 0, 0, 0, command.encode())


def test_a_comp_t_keeps_its_mantissa_and_base_8_exponent():
    assert process_cpu.comp_t(1234) == 1234
    assert process_cpu.comp_t((2 << 13) | 5) == 5 * 64


def test_records_give_each_process_its_cpu_and_records_of_other_versions_are_skipped():
    data = record(7, 1, "python", 250, forked_only=True) + record(8, 1, "sh", 1, version=2)
    [process] = process_cpu.read_records(data)
    assert (process.pid, process.ppid, process.command, process.cpu, process.forked_only) == (
        7, 1, "python", 2.5, True)


def test_each_process_goes_to_the_first_family_its_line_of_ancestors_matches():
    tree = [
        (PYTEST, 1, "python", 0, False), (101, PYTEST, "python", 0, False),      # a worker
        (102, 101, "python", 0, True), (103, 101, "python", 0, False),           # its children
        (104, 101, "chromium-headle", 0, False), (105, 104, "chromium-headle", 0, True),
        (106, 101, "make", 0, False), (107, 106, "jupyterhub", 0, False),
        (108, 107, "python", 1001, False), (109, 101, "jupyter-lab", 0, False),
        (110, 109, "python", 0, False), (111, 101, "node", 0, False),
        (112, 101, "sh", 0, False), (113, 2, "python", 0, False),                # not ours
        (114, 1, "chromium-headle", 0, True), (115, 114, "chromium-headle", 0, True),  # reparented
    ]
    data = b"".join(record(pid, ppid, command, 100, uid, forked) for pid, ppid, command, uid,
                    forked in tree)
    grouped = process_cpu.families(process_cpu.read_records(data), PYTEST)
    assert {family: sorted(p.pid for p in members) for family, members in grouped.items()} == {
        "pytest (the controller)": [100], "pytest workers": [101],
        "Python children forked": [102], "Python children started anew": [103],
        "Chromium": [104, 105, 114, 115], "the classroom hub": [107, 108],
        "JupyterLab server and its kernels": [109, 110], "node": [111],
        "other commands": [106, 112], "outside the command's tree": [113]}
