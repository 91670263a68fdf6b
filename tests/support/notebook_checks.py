"""A pytest plugin for the notebook run (nbval): every figure a notebook draws is checked
for legibility, and each notebook's kernel is held to the classroom memory limits.  The
repository's root ``conftest.py`` loads it; learners running the notebooks never do.

The notebooks' kernels run ``notebook_startup.py`` beside this file (as ``PYTHONSTARTUP``), which
checks each figure with ``ipu_emulator.views.legibility.figure_problems`` and logs one JSON
line per figure; a cell's test fails when the figures of that cell had problems.  It also
logs the kernel's peak memory after each cell: a cell's test fails when the kernel's private
memory has gone over its limit (``TENSORFLOW_KERNEL_LIMIT`` once TensorFlow is imported, else
``PLAIN_KERNEL_LIMIT``; notebook 02 has its own, in ``KERNEL_LIMITS``: what
notebooks/README.md tells instructors to plan per learner).
Each notebook's running time, peak memory (RSS) and private peak (its anonymous memory: what
one more learner's kernel adds to a server, the shared libraries being loaded once for all;
the limits' measure) are printed at the end of the run and written to
``build/notebook_resources.json``.  Under pytest-xdist each cell runs on a worker, whose
reports carry the notebook's usage so far (``user_properties``) to the controller, which prints
the table.
"""
import json
import os
import tempfile
from pathlib import Path

import pytest

LOG_VARIABLE = "IPU_LEGIBILITY_LOG"
RESOURCE_VARIABLE = "IPU_RESOURCE_LOG"
STARTUP = Path(__file__).resolve().with_name("notebook_startup.py")
RESOURCES_PROPERTY = "notebook_resources"
GB = 1e9
# The limits hold each kernel's private peak: the memory no other process shares, which is what
# each more learner adds to a server.  The resident set (RSS) also counts the pages of
# TensorFlow's shared libraries a kernel has mapped, about 0.4 GB shared by every kernel on a
# machine, and that count depends on the page cache: the same notebook (05) peaked at 0.73,
# 0.77 and 0.84 GB resident in three checkouts, at 0.33-0.34 GB private each time.  So RSS is
# reported, not held to a limit.
TENSORFLOW_KERNEL_LIMIT = 0.45 * GB
PLAIN_KERNEL_LIMIT = 0.15 * GB
# Notebook 02 trains the tutorials' convolutional network the longest: on every step
# TensorFlow's CPU convolution gradients allocate scratch buffers of about 28 MB, and glibc
# keeps the freed memory (private peaks 0.47-0.51 GB measured); notebooks/README.md says so.
KERNEL_LIMITS = {"02_loops_and_data_pipelines.ipynb": 0.6 * GB}
_LOG_OFFSET = pytest.StashKey[int]()
_RESOURCE_OFFSET = pytest.StashKey[int]()
# notebook name -> {"seconds", "peak_bytes", "private_peak_bytes", "tensorflow"}: in a
# worker (or a run without workers), what its kernel used so far ...
_RESOURCES = {}
# ... and in the process that prints the summary, the latest of that the reports carried.
_REPORTED = {}


def run_folder(config, name: str) -> Path:
    """A new folder for this run's files, in pytest's temporary folders (which pytest prunes)
    when its tmp_path plugin is on.  Call it from a ``pytest_configure`` marked ``trylast``:
    before that plugin has configured its factory there is none."""
    factory = getattr(config, "_tmp_path_factory", None)
    return factory.mktemp(name) if factory else Path(tempfile.mkdtemp(name))


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has configured its factory
def pytest_configure(config):
    # Set before any kernel starts (nbval starts one per notebook, in the first cell's setup);
    # kernels inherit the environment.
    folder = run_folder(config, "legibility")
    os.environ["PYTHONSTARTUP"] = str(STARTUP)
    os.environ[LOG_VARIABLE] = str(folder / "figures.jsonl")
    os.environ[RESOURCE_VARIABLE] = str(folder / "resources.jsonl")


def _offset(variable: str) -> int:
    path = Path(os.environ[variable])
    return path.stat().st_size if path.exists() else 0


def _records_since(variable: str, offset: int):
    path = Path(os.environ[variable])
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as lines:
        lines.seek(offset)
        return [json.loads(line) for line in lines if line.strip()]


def fail_report(report, heading: str, problems) -> None:
    text = heading + "\n" + "\n".join(f"  - {p}" for p in problems)
    if report.passed:
        report.outcome = "failed"
        report.longrepr = text
    else:
        report.sections.append((heading, text))


def _is_notebook_cell(item) -> bool:
    return str(item.path).endswith(".ipynb")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Fail a cell's test when figures checked while it ran had problems, or when its kernel
    went over its memory limit.  The kernel writes the logs before it replies to the cell's
    execution, so the lines are there by the time nbval's call phase ends."""
    outcome = yield
    report = outcome.get_result()
    if not _is_notebook_cell(item):
        return
    if report.when == "setup":
        item.stash[_LOG_OFFSET] = _offset(LOG_VARIABLE)
        item.stash[_RESOURCE_OFFSET] = _offset(RESOURCE_VARIABLE)
        return
    if report.when != "call":
        return
    figures = _records_since(LOG_VARIABLE, item.stash.get(_LOG_OFFSET, 0))
    problems = [f"{record['figure']} (cell starting {record['cell']!r}): {problem}"
                for record in figures for problem in record["problems"]]
    if problems:
        fail_report(report, "Figures that are hard to read:", problems)

    notebook = Path(item.path).name
    usage = _RESOURCES.setdefault(notebook, {"seconds": 0.0, "peak_bytes": 0,
                                             "private_peak_bytes": 0, "tensorflow": False})
    usage["seconds"] += report.duration
    for record in _records_since(RESOURCE_VARIABLE, item.stash.get(_RESOURCE_OFFSET, 0)):
        for key in ("peak_bytes", "private_peak_bytes"):
            usage[key] = max(usage[key], record[key])
        usage["tensorflow"] = usage["tensorflow"] or record["tensorflow"]
        # TensorFlow's x86 CPU kernels, as TensorFlow says it runs them (else as the kernel's
        # environment chose them), checked against the notebook's assigned path by
        # tests/support/kernel_paths.py
        enabled = record.get("onednn_enabled")
        if enabled is None:
            enabled = record.get("onednn_setting") != "0"
        usage["kernels"] = "oneDNN" if enabled else "Eigen"
        usage["intraop_threads_setting"] = record.get("intraop_threads_setting")
    limit = (KERNEL_LIMITS.get(notebook, TENSORFLOW_KERNEL_LIMIT) if usage["tensorflow"]
             else PLAIN_KERNEL_LIMIT)
    if usage["private_peak_bytes"] > limit:
        kind = "a TensorFlow kernel" if usage["tensorflow"] else "a kernel without TensorFlow"
        fail_report(report, "Kernel memory over the classroom limit:",
              [f"{notebook}'s kernel peaked at {usage['private_peak_bytes'] / GB:.2f} GB of "
               f"private memory so far ({usage['peak_bytes'] / GB:.2f} GB resident); {kind} "
               f"may use {limit / GB:.2f} GB (notebooks/README.md)"])
    report.user_properties.append((RESOURCES_PROPERTY, (notebook, dict(usage))))


def pytest_runtest_logreport(report):
    for name, value in report.user_properties:
        if name == RESOURCES_PROPERTY:
            notebook, usage = value
            _REPORTED[notebook] = usage


def pytest_terminal_summary(terminalreporter, config):
    if not _REPORTED or hasattr(config, "workerinput"):
        return
    resources_json = config.rootpath / "build" / "notebook_resources.json"
    resources_json.parent.mkdir(exist_ok=True)
    resources_json.write_text(json.dumps(_REPORTED, indent=1) + "\n", encoding="utf-8")
    terminalreporter.section("notebook kernels: time, peak memory (RSS), private peak")
    for notebook, usage in sorted(_REPORTED.items()):
        terminalreporter.write_line(
            f"{notebook:<48} {usage['seconds']:6.1f} s  {usage['peak_bytes'] / GB:5.2f} GB"
            f"  {usage['private_peak_bytes'] / GB:5.2f} GB"
            + (f"  (TensorFlow, {usage.get('kernels', '?')}'s kernels)" if usage["tensorflow"]
               else ""))
    terminalreporter.write_line(f"(written to {resources_json.relative_to(config.rootpath)})")
