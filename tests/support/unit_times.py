"""Where `make test`'s time goes, by unit of work (the root conftest.py's units).

Each process that runs tests (a pytest-xdist worker, or pytest alone) measures the CPU each
test phase used: its own and that of the child processes it waited for (kernels, TensorFlow
children, the classroom's hub), so a unit that waits on a child is not mistaken for a cheap one
on a two-core machine where CPU, not wall clock, is what the workers share.  The measure
travels on the test's report (``cpu_seconds``).  The controlling pytest process adds up each
unit's wall clock and CPU and at the end writes one line per unit to build/test_units.tsv
(seconds, unit, tests, CPU seconds), slowest first.  ``scripts/stage_times.py report`` prints the
ten slowest after the stages, so each run of `make test` says which units to look at first.

A child's CPU counts only once it has been waited for; the fork server's children (which it
waits for, not us) and Chromium's renderers and GPU process (which nothing we wait for reaps:
unwaited_cpu.py, read when the browser closes, with the last test of tests/lite/ and of
tests/browser/) are added.
"""
from __future__ import annotations

import resource
from collections import defaultdict
from pathlib import Path
from typing import Callable

import pytest

LOG = Path(__file__).resolve().parents[2] / "build" / "test_units.tsv"


def cpu_seconds_so_far() -> float:
    """User and system CPU of this process and of the children it has waited for, with the
    fork server's children and Chromium's renderers (which it never waits for)."""
    from tests.support import unwaited_cpu
    from tests.support.child_python import forked_cpu_seconds
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
            + forked_cpu_seconds() + unwaited_cpu.seconds())


class UnitTimes:
    def __init__(self, unit_of: Callable[[str], str], log: Path = LOG):
        self._unit_of = unit_of
        self._log = log
        self._seconds = defaultdict(float)
        self._cpu = defaultdict(float)
        self._tests = defaultdict(set)
        self._phase_started = 0.0

    # In the process that runs the test: CPU from the start of each phase to its report.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self._phase_started = cpu_seconds_so_far()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item):
        self._phase_started = cpu_seconds_so_far()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item):
        self._phase_started = cpu_seconds_so_far()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        outcome.get_result().cpu_seconds = cpu_seconds_so_far() - self._phase_started

    # In the controlling process: every report, from whichever worker ran it.
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        unit = self._unit_of(report.nodeid)
        self._seconds[unit] += report.duration
        self._cpu[unit] += getattr(report, "cpu_seconds", 0.0)
        self._tests[unit].add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput") or not self._seconds:
            return   # a pytest-xdist worker: the controller hears every report
        self._log.parent.mkdir(exist_ok=True)
        slowest = sorted(self._seconds.items(), key=lambda item: -item[1])
        self._log.write_text("".join(
            f"{seconds:.1f}\t{unit}\t{len(self._tests[unit])}\t{self._cpu[unit]:.1f}\n"
            for unit, seconds in slowest), encoding="utf-8")
