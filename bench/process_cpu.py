"""Where a test run's CPU goes, process by process, from the kernel's own accounting.

The stage report counts each unit's CPU from inside the test processes (tests/support/
unit_times.py): the test's own, what it waited for, the fork server's children and Chromium's
renderers read from /proc.  That leaves out what no test process reaps (the classroom hub's
processes, run as other users) and says nothing of how many processes of each kind a run
starts.  Linux's BSD process accounting (acct(2), as root) writes one record for every process
that ends, whoever its parent: its command name, parent, user, CPU and elapsed time, and
whether it forked without exec.  This script switches it on around one command (by default
`make test`'s pytest run in this checkout, on its three workers; the builds must be there
already), reads /proc/stat before and after for how busy the cores were, and prints the CPU of the process
families (the pytest workers, Python children forked or started anew, Chromium, the hub, the
JupyterLab server, node) and of the busiest processes.  The accounted CPU against the cores'
busy time says how much the records miss (processes still running at the end, the kernel's
own threads, other work on the machine).
Usage:  sudo .venv/bin/python bench/process_cpu.py [--top N] [-- COMMAND ...]
(`make test`'s pytest: about six minutes on two cores; without root it says so and skips).
"""
import argparse
import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.conftest import fast_suite_paths  # noqa: E402  (the list `make test-fast` reads)

# struct acct_v3 (linux/acct.h): flag, version, tty, exit code, uid, gid, pid, ppid, creation
# time, elapsed time (a float, in AHZ ticks), then user time, system time and six more counts
# in comp_t, then the command name.
RECORD = struct.Struct("<BBHIIIIIIf8H16s")
ACCT_VERSION = 3
AHZ = 100                 # accounting ticks per second
AFORK = 0x01              # forked but did not exec
FAMILIES = ["pytest (the controller)", "pytest workers", "Python children forked",
            "Python children started anew", "Chromium", "the classroom hub",
            "JupyterLab server and its kernels", "node", "other commands",
            "outside the command's tree"]


@dataclass
class Process:
    pid: int
    ppid: int
    uid: int
    command: str
    cpu: float        # user + system seconds
    elapsed: float    # seconds
    forked_only: bool


def comp_t(value: int) -> int:
    """A comp_t's value: 13 bits of mantissa, 3 of base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def read_records(data: bytes) -> List[Process]:
    """The processes of an acct_v3 file (records of other versions are skipped)."""
    processes = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        (flag, version, _tty, _exit, uid, _gid, pid, ppid, _btime, elapsed,
         utime, stime, *_counts, command) = RECORD.unpack_from(data, offset)
        if version & 0x0F != ACCT_VERSION:
            continue
        processes.append(Process(pid, ppid, uid, command.split(b"\0", 1)[0].decode(
            errors="replace"), (comp_t(utime) + comp_t(stime)) / AHZ, elapsed / AHZ,
            bool(flag & AFORK)))
    return processes


def families(processes: List[Process], root_pid: int) -> Dict[str, List[Process]]:
    """The processes that ended while accounting was on, by family (``FAMILIES``): for those
    of the tree under ``root_pid`` (the command's process: pytest) the first match along
    their line of ancestors decides.  A process whose line does not reach it was reparented
    when its parent ended first (Chromium's renderers, whose zygote the browser's close ends
    before them) or is not the command's: Chromium by its name, the rest apart."""
    by_pid = {process.pid: process for process in processes}
    grouped = defaultdict(list)
    for process in processes:
        line, pid = [process], process.ppid
        while pid in by_pid and pid != root_pid and len(line) < 64:
            line.append(by_pid[pid])
            pid = by_pid[pid].ppid
        if process.pid == root_pid or pid == root_pid:
            grouped[_family(process, line, root_pid)].append(process)
        elif any(ancestor.command.startswith("chromium") for ancestor in line):
            grouped[FAMILIES[4]].append(process)
        else:
            grouped[FAMILIES[9]].append(process)
    return grouped


def _family(process, line, root_pid) -> str:
    commands = [ancestor.command for ancestor in line]
    if process.pid == root_pid:
        return FAMILIES[0]
    if any(command.startswith("chromium") for command in commands):
        return FAMILIES[4]
    if any(ancestor.uid != process.uid or command == "jupyterhub"
           for ancestor, command in zip(line, commands)) or process.uid != 0:
        return FAMILIES[5]
    if "jupyter-lab" in commands:
        return FAMILIES[6]
    if process.command.startswith("node"):
        return FAMILIES[7]
    if len(line) == 1 and process.command.startswith("python"):
        return FAMILIES[1]
    if process.command.startswith("python"):
        return FAMILIES[2] if process.forked_only else FAMILIES[3]
    return FAMILIES[8]


class BusyCores:
    """The cores' busy seconds from /proc/stat over a span (user, nice, system, irq, softirq,
    steal; not idle or iowait)."""

    def __init__(self):
        self.started = self._busy_and_total()

    @staticmethod
    def _busy_and_total():
        with open("/proc/stat") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:9]]
        idle = ticks[3] + ticks[4]
        return sum(ticks) - idle, sum(ticks)

    def busy_seconds(self) -> float:
        busy, _ = self._busy_and_total()
        return (busy - self.started[0]) / os.sysconf("SC_CLK_TCK")


def accounting(path: str) -> None:
    """acct(2): start writing records to ``path``, or stop (``path`` empty)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(path.encode() if path else None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"acct({path!r}): {os.strerror(error)} (root, and a kernel with "
                             "BSD process accounting, are needed)")


def run_accounted(command: List[str], environment: dict):
    """Run ``command`` with process accounting on; (pid, wall s, busy core-s, processes)."""
    with tempfile.NamedTemporaryFile(prefix="pacct-") as records:
        accounting(records.name)
        try:
            cores, started = BusyCores(), time.monotonic()
            child = subprocess.Popen(command, cwd=ROOT, env=environment)
            child.wait()
            wall, busy = time.monotonic() - started, cores.busy_seconds()
        finally:
            accounting("")
        if child.returncode != 0:
            print(f"(the command exited with {child.returncode})")
        return child.pid, wall, busy, read_records(Path(records.name).read_bytes())


def make_test_pytest() -> List[str]:
    """`make test`'s pytest command, as the Makefile runs it in this checkout."""
    modules = [path for path in fast_suite_paths() if not path.startswith("tests/")]
    return [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-n", "3",
            "-p", "no:cacheprovider", "--nbval-lax", "--doctest-modules", *modules, "tests",
            "notebooks"]


def report(root_pid, wall, busy, processes, top):
    grouped = families(processes, root_pid)
    accounted = sum(process.cpu for members in grouped.values() for process in members)
    print(f"wall {wall:.1f} s; cores busy {busy:.1f} core-s ({busy / wall:.2f} cores); "
          f"{accounted:.1f} s of CPU accounted to the processes that ended meanwhile")
    print(f"{'CPU s':>8} {'share':>6} {'processes':>9}  family")
    for family in FAMILIES:
        members = grouped.get(family, [])
        cpu = sum(process.cpu for process in members)
        if members:
            print(f"{cpu:8.1f} {100 * cpu / max(accounted, 1e-9):5.1f}% {len(members):9d}  "
                  f"{family}")
    print(f"\nthe {top} busiest processes (CPU s, elapsed s, command, family):")
    ranked = sorted(((process, family) for family, members in grouped.items()
                     for process in members), key=lambda pair: -pair[0].cpu)
    for process, family in ranked[:top]:
        print(f"{process.cpu:8.1f} {process.elapsed:8.1f}  {process.command:16} {family}")
    commands = Counter(process.command for process, _ in ranked)
    print("\nprocesses by command:", ", ".join(f"{name} {count}"
                                                for name, count in commands.most_common(8)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("command", nargs="*", help="the command to account (after --)")
    options = parser.parse_args()
    if os.geteuid() != 0:
        print("process_cpu.py: skipped, process accounting needs root (`make bench` goes on)")
        return 0
    environment = dict(os.environ, IPU_EMULATOR_DATA="sample", IPU_LAB_SOLUTIONS="1",
                       MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="",
                       IPU_LAB_LITE_SITE=str(ROOT / "build" / "lite"))
    report(*run_accounted(options.command or make_test_pytest(), environment), options.top)


if __name__ == "__main__":
    sys.exit(main())
