"""A tighter time limit for the fast suite's tests and docstring examples.

pyproject.toml sets pytest-timeout's ceiling for every test (``timeout``), far above what the
slowest healthy test takes (a notebook in the browser, the TF2 child process).  The fast
suite (``tests/fast_suite.txt``: the simulator, views, record, exercises and widgets, no
TensorFlow) takes a second or two per test at most, so a bug that makes one of them search
forever fails it after ``FAST_TIMEOUT`` seconds instead.  A test's own ``timeout`` marker wins.

A fast-suite test still running after ``STALL_DUMP_S`` seconds has every thread's stack
written to build/stalled_tests.log (by faulthandler's own thread, which needs no GIL: the
stack names the test).  Twice in full runs a simulator test that takes 0.02 s alone sat
40-48 s without using any CPU, and once that failed a hang guard: the stacks say what the
worker waited on.
"""
import faulthandler
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAST_SUITE_LIST = ROOT / "tests" / "fast_suite.txt"
# Far above the fast suite's slowest test (about 1.5 s alone, a few times that on a busy
# two-core machine), far below the global ceiling.
FAST_TIMEOUT = 60
STALL_DUMP_S = 15
STALL_LOG = ROOT / "build" / "stalled_tests.log"
IN_FAST_SUITE = pytest.StashKey[bool]()


def fast_suite_paths(listing: Path = FAST_SUITE_LIST):
    """The paths of ``tests/fast_suite.txt`` (relative to the repository), in its order."""
    lines = (line.split("#", 1)[0].strip() for line in listing.read_text().splitlines())
    return [line for line in lines if line]


def pytest_collection_modifyitems(items):
    roots = [ROOT / p for p in fast_suite_paths()]
    in_fast_suite = {}   # by file: a file holds many items, and the test is the same for all
    for item in items:
        if item.path not in in_fast_suite:
            in_fast_suite[item.path] = any(item.path == root or root in item.path.parents
                                           for root in roots)
        if in_fast_suite[item.path]:
            item.stash[IN_FAST_SUITE] = True
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(FAST_TIMEOUT))


_stall_log = None   # opened at the first fast-suite test of this process, kept open


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _stall_log
    if not item.stash.get(IN_FAST_SUITE, False):
        return (yield)
    if _stall_log is None:
        STALL_LOG.parent.mkdir(exist_ok=True)
        _stall_log = STALL_LOG.open("a")
    faulthandler.dump_traceback_later(STALL_DUMP_S, file=_stall_log)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()
