"""The JupyterLite test's browser in front of the rest of the test run, for the CPU.

The site's first trace is held to a bare JupyterLite's kernel-ready time, measured just before
it in the same browser (tests/lite/).  Each is a Pyodide starting on the CPU, so under
`make test` each also takes whatever the pytest workers beside it leave: measured a quarter of
a minute apart, under loads that differ, the ratio moved from 1.12-1.20 (the machine quiet) to
1.18-1.45 (2026-11-29), close to its limit of 1.5.  On a learner's machine the browser is the
application in front.  So, where the machine allows it, the test's process and everything it
starts meanwhile (the sites' servers, Playwright's driver and Chromium with all its renderers)
run in a CPU cgroup weighing ``SHARE`` times a default one: cgroup v1's ``cpu.shares`` or
cgroup v2's ``cpu.weight``.  A cgroup, not ``nice``: Chromium sets its renderers' nice values
itself (0 for the page in front, 5 for the others), but every process it starts stays in its
cgroup.  Both measurements get the same weight.  Where the machine does not allow it (not root,
no cpu controller, cgroup v2 outside its root group), nothing changes and ``foreground`` says
why.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from typing import Optional

from tests.support.child_python import ROOT as REPO

# hub/memory_limit.py finds the hub's cgroups the same way (the hub loads it from hub/).
sys.path.insert(0, str(REPO / "hub"))
import memory_limit  # noqa: E402  pylint: disable=wrong-import-position

SHARE = 10
ROOT = "/sys/fs/cgroup"


def _write(path: str, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _plan(name: str):
    """(home, group, weight file, weight) for a group ``name`` beside this process, or the
    reason there is none."""
    if os.geteuid() != 0:
        return "not root"
    v1, own_v1 = os.path.join(ROOT, "cpu"), memory_limit.own_cgroup("cpu")
    if own_v1 is not None and os.path.isfile(os.path.join(v1, "cpu.shares")):
        home = os.path.join(v1, own_v1.lstrip("/"))
        return home, os.path.join(home, name), "cpu.shares", 1024 * SHARE
    unified, own_v2 = memory_limit.unified_hierarchy(ROOT), memory_limit.own_cgroup("")
    if unified is None or own_v2 is None:
        return "no cpu cgroup hierarchy"
    with open(os.path.join(unified, "cgroup.controllers")) as f:
        if "cpu" not in f.read().split():
            return "cgroup v2 here has no cpu controller"
    if own_v2 != "/":
        # v2 hands a controller to child groups only from a group that holds no process.
        return "under cgroup v2 the tests must run in the root cgroup"
    _write(os.path.join(unified, "cgroup.subtree_control"), "+cpu")
    return unified, os.path.join(unified, name), "cpu.weight", 100 * SHARE


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where ``foreground`` put the processes: ``group``, the cgroup's folder (None when
    nothing changed), and ``said``: its weight, or why nothing changed."""

    group: Optional[str]
    said: str


@contextlib.contextmanager
def foreground(name: str):
    """While inside, this process and every process it starts are in CPU cgroup ``name``,
    weighing ``SHARE`` times a default group; yields the ``Placement``."""
    placed, home = _enter(name)
    try:
        yield placed
    finally:
        if placed.group is not None:
            _write(os.path.join(home, "cgroup.procs"), os.getpid())
            _remove_when_empty(placed.group)


def _enter(name: str):
    """(``Placement``, the group this process leaves) once this process is in group ``name``;
    a ``Placement`` without a group when the machine does not allow it."""
    group = None
    try:
        plan = _plan(name)
        if isinstance(plan, str):
            return Placement(None, f"none ({plan})"), None
        home, group, weight_file, weight = plan
        os.makedirs(group, exist_ok=True)
        _write(os.path.join(group, weight_file), weight)
        _write(os.path.join(group, "cgroup.procs"), os.getpid())
        return Placement(group, f"{weight_file} {weight}"), home
    except OSError as error:
        if group is not None:
            _remove_when_empty(group, wait_s=0)
        return Placement(None, f"none ({error})"), None


def _remove_when_empty(group: str, wait_s: float = 10.0) -> None:
    """Remove the group once the processes started in it have ended (Chromium's last ones may
    take a moment); one still busy after ``wait_s`` is left, empty groups cost nothing."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.rmdir(group)
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
