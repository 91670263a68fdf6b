"""Under pytest (nbval), every figure a notebook draws is checked for legibility.

The notebooks' kernels run ``scripts/notebook_startup.py`` (as ``PYTHONSTARTUP``), which
checks each figure with ``ipu_emulator.views.legibility.figure_problems`` and logs one JSON
line per figure; a cell's test fails when the figures of that cell had problems.  Learners
running the notebooks outside pytest never load any of this.
"""
import json
import os
import tempfile
from pathlib import Path

import pytest

LOG_VARIABLE = "IPU_LEGIBILITY_LOG"
STARTUP = Path(__file__).resolve().parents[1] / "scripts" / "notebook_startup.py"
_LOG_OFFSET = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has configured its factory
def pytest_configure(config):
    # Set before any kernel starts (nbval starts one per notebook, in the first cell's setup);
    # kernels inherit the environment.
    factory = getattr(config, "_tmp_path_factory", None)
    folder = factory.mktemp("legibility") if factory else Path(tempfile.mkdtemp("legibility"))
    os.environ["PYTHONSTARTUP"] = str(STARTUP)
    os.environ[LOG_VARIABLE] = str(folder / "figures.jsonl")


def _log() -> Path:
    return Path(os.environ[LOG_VARIABLE])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Fail a cell's test when figures checked while it ran had problems.  The kernel writes
    the log before it replies to the cell's execution, so the lines are there by the time
    nbval's call phase ends."""
    outcome = yield
    report = outcome.get_result()
    log = _log()
    if report.when == "setup":
        item.stash[_LOG_OFFSET] = log.stat().st_size if log.exists() else 0
        return
    if report.when != "call" or not log.exists():
        return
    with open(log, encoding="utf-8") as lines:
        lines.seek(item.stash.get(_LOG_OFFSET, 0))
        records = [json.loads(line) for line in lines if line.strip()]
    problems = [f"{record['figure']} (cell starting {record['cell']!r}): {problem}"
                for record in records for problem in record["problems"]]
    if not problems:
        return
    text = "Figures that are hard to read:\n" + "\n".join(f"  - {p}" for p in problems)
    if report.passed:
        report.outcome = "failed"
        report.longrepr = text
    else:
        report.sections.append(("figure legibility", text))
