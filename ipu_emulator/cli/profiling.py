"""Profiling reports, asked for the way Poplar is asked: ``POPLAR_ENGINE_OPTIONS``.

On an IPU system ``POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true",
"autoReport.directory":"./report"}'`` makes Poplar write compile and execution reports that
the PopVision Graph Analyser opens.  The emulator honours the same switch by writing what it
has instead: the simulated execution trace of the engine runs (Chrome-trace JSON, which
https://ui.perfetto.dev opens) and a text summary, into ``autoReport.directory`` (the
current directory when it is not set).

* ``autoReport.all`` or ``autoReport.outputExecutionProfile`` set to ``"true"`` turns it on.
* ``autoReport.executionProfileProgramRunCount`` limits how many engine runs are traced
  (Poplar's default is 2: the first runs of the program).

Pure Python: no TensorFlow import.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Mapping, Optional

TRACE_FILE = "ipu_emulator_trace.json"
SUMMARY_FILE = "ipu_emulator_summary.txt"
DEFAULT_RUN_COUNT = 2  # Poplar's autoReport.executionProfileProgramRunCount default


@dataclass(frozen=True)
class ReportRequest:
    directory: str
    run_count: int = DEFAULT_RUN_COUNT


def _true(value) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def requested(environ: Optional[Mapping[str, str]] = None) -> Optional[ReportRequest]:
    """The report ``POPLAR_ENGINE_OPTIONS`` asks for, or None.

    >>> requested({"POPLAR_ENGINE_OPTIONS": '{"autoReport.all":"true",'
    ...            '"autoReport.directory":"./r"}'})
    ReportRequest(directory='./r', run_count=2)
    >>> requested({}) is None
    True
    """
    environ = os.environ if environ is None else environ
    text = environ.get("POPLAR_ENGINE_OPTIONS", "").strip()
    if not text:
        return None
    try:
        options = json.loads(text)
    except ValueError as error:
        raise ValueError("POPLAR_ENGINE_OPTIONS is not valid JSON: %s" % error) from None
    if not isinstance(options, dict):
        raise ValueError("POPLAR_ENGINE_OPTIONS must be a JSON object of option names to "
                         "values.")
    if not (_true(options.get("autoReport.all", "false"))
            or _true(options.get("autoReport.outputExecutionProfile", "false"))):
        return None
    directory = str(options.get("autoReport.directory") or ".")
    count = options.get("autoReport.executionProfileProgramRunCount", DEFAULT_RUN_COUNT)
    try:
        count = max(1, int(count))
    except (TypeError, ValueError):
        count = DEFAULT_RUN_COUNT
    return ReportRequest(directory=directory, run_count=count)


def write_report(runs, request: ReportRequest, target: str = "ipu2") -> Optional[str]:
    """Simulate the first ``request.run_count`` of ``runs`` (a ``record.ProgramRecord``) and
    write the trace and summary; returns the directory, or None when nothing ran."""
    from ipu_emulator import views
    from ipu_emulator.record import ProgramRecord

    traced = ProgramRecord(runs=list(runs.runs)[:request.run_count])
    if not traced.runs:
        return None
    timeline = traced.simulate(target=target, title="simulated %s: first %d engine run(s)"
                               % (target, len(traced.runs)))
    os.makedirs(request.directory, exist_ok=True)
    views.save_chrome_trace(timeline, os.path.join(request.directory, TRACE_FILE))
    with open(os.path.join(request.directory, SUMMARY_FILE), "w", encoding="utf-8") as handle:
        handle.write(timeline.title + "\n")
        handle.write("(%d engine runs recorded in total; host wall time %.3f s)\n\n" % (
            len(runs.runs), runs.host_seconds))
        handle.write(views.summary_table(timeline) + "\n")
    return request.directory


def report_if_requested(runs_source, target: str = "ipu2", quiet: bool = False) -> None:
    """Write the autoReport files when ``POPLAR_ENGINE_OPTIONS`` asks for them.

    ``runs_source`` is a callable returning the ``record.ProgramRecord`` to report, so a
    caller at interpreter exit reads the runs only then.  Problems with the options are
    reported on stderr, as a warning: a profiling request never stops the program.
    """
    import sys
    try:
        request = requested()
    except ValueError as error:
        print("ipu_emulator: %s" % error, file=sys.stderr)
        return
    if request is None:
        return
    written = write_report(runs_source(), request, target=target)
    if written and not quiet:
        print("ipu_emulator: simulated execution trace and summary written to %s" % written,
              file=sys.stderr)


__all__ = ["requested", "write_report", "report_if_requested", "ReportRequest", "TRACE_FILE", "SUMMARY_FILE"]
