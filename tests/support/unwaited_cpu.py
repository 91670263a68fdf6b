"""CPU of the processes the tests start that nothing in the test process's tree waits for.

`make test`'s unit times (unit_times.py) count each test's own CPU and that of the children it
waited for (the operating system adds a child's CPU to its parent's when the parent waits for
it, and so on up).  Chromium's zygotes fork its renderers and its GPU process, and that CPU
never comes up the tree: neither the zygotes nor their children are reaped by a process we wait
for.  On the JupyterLite tests alone (2026-11-30, every process's CPU read from /proc twice a
second) the renderers used 50.5 s and the GPU process 2.6 s, against 10.2 s for all that the
test process waited for (itself, Playwright's driver, the browser's main process, the sites'
servers); on the JupyterLab tests 39.8 s of renderer against 34 s.  So the browser fixtures
read the CPU of everything under Chromium's zygotes from /proc just before they close the
browser (``add_zygotes_of``), and ``seconds()`` is added to what the units count.
"""
from __future__ import annotations

import os
import time

_TICKS = os.sysconf("SC_CLK_TCK")
_ADDED = [0.0]


def _stat_fields(pid) -> list:
    """The fields of /proc/<pid>/stat after the command's name (state, parent pid, ...);
    OSError when the process is gone."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _processes() -> dict:
    """pid -> (parent pid, CPU seconds with its reaped children's, command line)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = _stat_fields(name)
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:   # ended meanwhile
            continue
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))   # utime stime cutime cstime
        found[int(name)] = (int(fields[1]), ticks / _TICKS, command)
    return found


def zygote_cpu_seconds(ancestor: int) -> float:
    """The CPU so far of Chromium's zygotes under ``ancestor`` and of every process they forked
    (renderers, the GPU process), with what they reaped."""
    processes = _processes()
    children = {}
    for pid, (parent, _, _) in processes.items():
        children.setdefault(parent, []).append(pid)

    def under(pid):
        for child in children.get(pid, ()):
            yield child
            yield from under(child)

    zygotes = [pid for pid in under(ancestor) if "--type=zygote" in processes[pid][2]]
    counted = set(zygotes) | {pid for zygote in zygotes for pid in under(zygote)}
    return sum(processes[pid][1] for pid in counted)


def browser_with_profile(profile) -> int:
    """The pid of the Chromium whose user profile is ``profile`` (its browser process, which
    the zygotes hang under), or 0 when none runs."""
    flag = f"--user-data-dir={profile}"
    return next((pid for pid, (_, _, command) in _processes().items()
                 if flag in command.split() and "--type=" not in command), 0)


def wait_until_ended(pid: int, timeout: float = 10.0) -> None:
    """Wait until process ``pid`` has ended (gone, or a zombie: its children are no longer
    under it), so that a later ``add_zygotes_of`` of an ancestor does not count them again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if _stat_fields(pid)[0] == "Z":
                return
        except OSError:
            return
        time.sleep(0.05)


def add_zygotes_of(ancestor: int) -> None:
    """Count the CPU of Chromium's zygotes under ``ancestor`` (call it just before the browser
    closes)."""
    if os.path.isdir("/proc"):
        _ADDED[0] += zygote_cpu_seconds(ancestor)


def seconds() -> float:
    """What ``add_zygotes_of`` counted in this process so far."""
    return _ADDED[0]
