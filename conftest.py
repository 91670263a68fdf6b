"""pytest's settings for the whole repository (tests/, the notebooks, the docstring examples).

`make test` runs everything in one pytest invocation on three pytest-xdist workers (``-n 3``).
This file decides what runs together, by units of work that go whole to one worker:

- each test file is a unit, so a module's fixtures are built once and a notebook's cells run
  in order in one kernel (nbval keeps one kernel per notebook);
- the browser tests (tests/browser/, tests/lite/) are one unit: Playwright's sync API allows
  one instance per thread, and they share one JupyterLab;
- the TF2 tests (tests/emulator/tf2/) are one unit: one child process runs them all
  (tests/support/tf2_isolation.py);
- each test in tests/notebooks/ is a unit of its own: each runs a whole notebook again;
- the longest units are handed out first, so neither worker is left with a long tail.

(pytest-xdist's own ``--dist loadgroup`` cannot do this under pytest 9.2, which no longer
reads the node id that loadgroup rewrites; a scheduler of our own groups by path instead.)
The notebook checks (legibility, kernel memory, each TensorFlow notebook's CPU kernel path) and
the JupyterLite numbers are plugins in ``tests/support/``.
"""
import atexit
import gc
import os

import pytest

pytest_plugins = ["tests.support.notebook_checks", "tests.support.kernel_paths",
                  "tests.support.notebook_kernels", "tests.support.lite_report"]

# The scripts in the tutorials' layouts are run by tests as child processes; collected as
# docstring-example modules they would train at import time.
collect_ignore_glob = ["tests/layouts/*"]
# The built image's tests need the image (minutes of building): `make test-image` builds it and
# runs them, naming it in IPU_LAB_IMAGE.
if not os.environ.get("IPU_LAB_IMAGE"):
    collect_ignore_glob.append("tests/image/*")

# Folders whose tests make one unit each, and the longest units, first to be handed out: the
# browser tests (JupyterLab and the JupyterLite site), the TF2 child, the classroom rehearsal on
# a JupyterHub (tests/hub/: about a minute of three learners' kernels), then the notebooks,
# longest first, the pure layers' longest files, then the folders of tests that start child
# processes.  Anything not named keeps its collection order after these.
UNIT_FOLDERS = {"tests/browser/": "browser", "tests/lite/": "browser",
                "tests/emulator/tf2/": "tf2",
                # Each hub test makes the same Unix accounts and cgroups (jupyter-learner01...):
                # two hubs at once would share them.
                "tests/hub/": "hub"}
# Folders whose every test is a unit of its own: long and independent (each runs a notebook
# in a kernel of its own: tests/notebooks/), so the workers share them.
SPLIT_FOLDERS = ("tests/notebooks/",)
# Every notebook is named (tests/scripts/test_unit_order.py): notebook 12, the longest (about
# 18 s), once came last of all, unnamed, and ran alone at the end of the run.
FIRST = ["browser", "tf2", "hub",
         "notebooks/12_", "notebooks/09_", "notebooks/03_", "notebooks/02_", "notebooks/07_",
         "notebooks/06_", "notebooks/01_", "notebooks/05_", "notebooks/11_", "notebooks/08_",
         "notebooks/04_", "notebooks/00_", "notebooks/10_",
         # The fast suite's longest (`make test-fast`: two workers and nothing else): the
         # legibility checks, 5-6 s of its 9-10 s, the widgets, and the child process that
         # imports the pure layers; handed out late, each left one worker running alone.  In
         # `make test` too they once came after the folders below and ended the run (the
         # legibility grid, 20 s, beside the fork server's tests, 9.5 s of waiting).
         "tests/views/test_legibility.py", "tests/widgets/test_widgets.py",
         "tests/test_pure_layers.py", "tests/test_preloaded_python.py",
         "tests/notebooks/", "tests/cli/", "tests/emulator/", "tests/scripts/"]


@pytest.fixture(autouse=True)
def docstring_examples_outside_solutions_mode(request, monkeypatch):
    """`make test` sets IPU_LAB_SOLUTIONS=1 so that the notebooks run with their exercises
    solved; a docstring example shows what a learner sees, so it runs without it."""
    if isinstance(request.node, pytest.DoctestItem):
        monkeypatch.delenv("IPU_LAB_SOLUTIONS", raising=False)


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its folder's unit, itself, or its file."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(SPLIT_FOLDERS):
        return nodeid
    return next((unit for folder, unit in UNIT_FOLDERS.items() if path.startswith(folder)), path)


def _rank(unit: str) -> int:
    return next((i for i, prefix in enumerate(FIRST) if unit.startswith(prefix)), len(FIRST))


# After each folder's own ordering (tests/lite before tests/browser): only the units move.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: _rank(unit_of(item.nodeid)))   # stable inside a unit


def pytest_configure(config):
    # Each pytest process (the workers, the TF2 child) leaves without a last garbage collection
    # over TensorFlow's objects: 1.3 s of CPU or more each (bench/exit_cost.py).
    atexit.register(gc.freeze)
    # Each unit's time, for the stage report's ten slowest (tests/support/unit_times.py).
    from tests.support.unit_times import UnitTimes
    config.pluginmanager.register(UnitTimes(unit_of), "unit_times")
    # glibc's malloc reuses what TensorFlow frees instead of faulting in fresh pages, in every
    # process started from here on: the workers and all they start (tests/support/malloc_reuse.py).
    from tests.support import intraop_threads, malloc_reuse
    malloc_reuse.apply()
    # TensorFlow's intra-op pool at one thread, in the same processes: three workers on two
    # cores leave a second one only spinning (tests/support/intraop_threads.py).
    intraop_threads.apply()


def pytest_collection_finish(session):
    """What collection loaded (TensorFlow, the emulator, every test module: about 300,000
    objects) lives as long as the process: frozen, the collector's full passes no longer walk
    it.  Measured on three files of checks (62 tests, alternating): full collections 1.0-1.4 s
    of CPU against 2.2 s, of about 70 s."""
    gc.freeze()


@pytest.hookimpl(optionalhook=True)   # a run without pytest-xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        """pytest-xdist's scope scheduling, with our units as the scopes, in the order the
        workers collected them (longest first, above) rather than by their number of tests."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return UnitScheduling(config, log)
