"""pytest's settings for the whole repository (tests/, the notebooks, the docstring examples).

`make test` runs everything in one pytest invocation on two pytest-xdist workers
(``-n 2 --dist loadgroup --no-loadscope-reorder``).  This file decides what runs together:

- every test file is one unit of work, so a module's fixtures are built once and a notebook's
  cells run in order on one worker (nbval keeps one kernel per notebook);
- the browser tests (tests/browser/, tests/lite/) are one unit: Playwright's sync API allows
  one instance per thread, and they share one JupyterLab;
- the TF2 tests are one unit: one child process runs them all (tests/support/tf2_isolation.py);
- the longest units are handed out first, so neither worker is left with a long tail.

The notebook checks (legibility, kernel memory) live in ``tests/support/notebook_checks.py``.
"""
from pathlib import Path

import pytest

pytest_plugins = ["tests.support.notebook_checks", "tests.support.lite_report"]

ROOT = Path(__file__).parent
BROWSER_FOLDERS = (ROOT / "tests" / "browser", ROOT / "tests" / "lite")
# The scripts in the tutorials' layouts are run by tests as child processes; collected as
# docstring-example modules they would train at import time.
collect_ignore_glob = ["tests/layouts/*"]

# Units of work, longest first: the browser tests (the JupyterLite site and JupyterLab), then
# the notebooks that train longest, then the files that start child processes.  Anything not
# named keeps its collection order after these.
FIRST = ["tests/browser", "tests/lite",
         "notebooks/02_", "notebooks/09_", "notebooks/03_", "notebooks/07_", "notebooks/06_",
         "notebooks/01_", "notebooks/05_", "notebooks/08_", "notebooks/04_",
         "tests/cli", "tests/emulator", "tests/scripts"]


def _unit(item) -> str:
    path = Path(item.path)
    if any(folder in path.parents for folder in BROWSER_FOLDERS):
        return "browser"
    if item.get_closest_marker("tf2") is not None:
        return "tf2"
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _rank(unit: str) -> int:
    if unit in ("browser", "tf2"):
        return 0
    return next((i for i, prefix in enumerate(FIRST) if unit.startswith(prefix)), len(FIRST))


# Before pytest-xdist's own hook, which appends each item's group to its node id; after
# tests/emulator's, which swaps the TF2 tests for proxies (conftests registered later go first).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    units = {item: _unit(item) for item in items}
    items.sort(key=lambda item: _rank(units[item]))   # stable: keeps the order inside a unit
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if not any(mark.name == "xdist_group" for mark in item.iter_markers()):
                item.add_marker(pytest.mark.xdist_group(units[item]))
