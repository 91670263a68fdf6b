"""Timelines as files: Chrome Trace Event JSON (https://ui.perfetto.dev, chrome://tracing) and
plain JSON-friendly data."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import List

from ipu_emulator.sim.bubbles import bubble_breakdown
from ipu_emulator.sim.timeline import UNIT_CLOCK, Timeline, check_no_overlaps

_CHROME_PID = 1


def to_chrome_trace(timeline: Timeline) -> dict:
    """The timeline in Chrome Trace Event format; ``ts``/``dur`` are simulated microseconds.

    One process, "Simulated IPU system", with one thread (track) per lane; memory and
    micro-batches-in-flight counters per IPU; flow arrows for inter-IPU transfers; the
    bubble split by cause in ``otherData`` (Perfetto's "Info and stats").  Every event's
    args carry its micro-batch: Perfetto's search (``micro_batch``) follows one.  Raises ValueError if two events on one lane
    overlap (a simulator must never produce that).
    """
    check_no_overlaps(timeline.events)
    # tids start at 1: some importers treat 0 as the idle/swapper thread.
    tid_of = {lane: i for i, lane in enumerate(timeline.lanes, start=1)}
    trace: List[dict] = [
        {"ph": "M", "name": "process_name", "pid": _CHROME_PID,
         "args": {"name": "Simulated IPU system"}},
        {"ph": "M", "name": "process_sort_index", "pid": _CHROME_PID, "args": {"sort_index": 0}},
    ]
    for lane, tid in tid_of.items():
        trace.append({"ph": "M", "name": "thread_name", "pid": _CHROME_PID, "tid": tid,
                      "args": {"name": lane}})
        trace.append({"ph": "M", "name": "thread_sort_index", "pid": _CHROME_PID, "tid": tid,
                      "args": {"sort_index": tid}})

    for e in timeline.events:
        # ts and end are each scaled from seconds, so back-to-back events stay exactly
        # back-to-back in microseconds.
        ts = e.start * 1e6
        args = {"kind": e.kind, "ipu": e.ipu, "stage": e.stage, "micro_batch": e.micro_batch,
                "iteration": e.iteration, "engine_run": e.engine_run}
        args.update(e.args)
        trace.append({"name": e.name, "cat": e.kind, "ph": "X", "ts": ts, "dur": e.end * 1e6 - ts,
                      "pid": _CHROME_PID, "tid": tid_of[e.lane], "args": args})

    for c in timeline.counters:
        unit = "bytes" if c.name == "memory" else "count"
        trace.append({"name": f"{c.name} {c.lane}", "ph": "C", "ts": c.time * 1e6,
                      "pid": _CHROME_PID, "args": {unit: c.value}})

    phases = getattr(timeline, "phases", None) or []
    if phases:  # a track of its own above nothing else, so Perfetto shows the phases
        phase_tid = len(tid_of) + 1
        trace.append({"ph": "M", "name": "thread_name", "pid": _CHROME_PID, "tid": phase_tid,
                      "args": {"name": "pipeline phase"}})
        trace.append({"ph": "M", "name": "thread_sort_index", "pid": _CHROME_PID,
                      "tid": phase_tid, "args": {"sort_index": 0}})
        for name, start, end in phases:
            trace.append({"name": name, "cat": "phase", "ph": "X", "ts": start * 1e6,
                          "dur": end * 1e6 - start * 1e6, "pid": _CHROME_PID, "tid": phase_tid,
                          "args": {}})

    for flow_id, f in enumerate(timeline.flows, start=1):
        common = {"name": f.name, "cat": "transfer", "id": flow_id, "pid": _CHROME_PID}
        trace.append({**common, "ph": "s", "ts": f.from_time * 1e6, "tid": tid_of[f.from_lane]})
        trace.append({**common, "ph": "f", "bp": "e", "ts": f.to_time * 1e6,
                      "tid": tid_of[f.to_lane]})

    return {
        "traceEvents": trace,
        "displayTimeUnit": "ms",
        "otherData": {"clock": timeline.clock, "title": timeline.title,
                      **({"bubble " + cause: f"{100 * share:.1f} %"
                          for cause, share in bubble_breakdown(timeline).items()}
                         if phases else {})},
    }


def save_chrome_trace(timeline: Timeline, path) -> str:
    """Write ``to_chrome_trace(timeline)`` as JSON to ``path``; returns the path as a string."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(to_chrome_trace(timeline), handle)
    return str(path)


def to_dict(timeline: Timeline) -> dict:
    """The timeline as JSON-friendly plain data (times in simulated seconds, or in time
    steps for a unit-cost timeline: ``time_unit`` says which)."""
    metrics = asdict(timeline.metrics)
    metrics["host_overhead_fraction"] = timeline.metrics.host_overhead_fraction
    metrics["mean_utilisation"] = timeline.metrics.mean_utilisation
    metrics["bubble_breakdown"] = bubble_breakdown(timeline)
    return {
        "title": timeline.title,
        "clock": timeline.clock,
        "time_unit": "step" if timeline.clock == UNIT_CLOCK else "s",
        "lanes": list(timeline.lanes),
        "events": [
            {"lane": e.lane, "ipu": e.ipu, "stage": e.stage, "kind": e.kind, "name": e.name,
             "micro_batch": e.micro_batch, "engine_run": e.engine_run, "iteration": e.iteration,
             "start": e.start, "end": e.end, **({"args": dict(e.args)} if e.args else {})}
            for e in timeline.events
        ],
        "engine_runs": [{"start": s, "end": e} for s, e in timeline.engine_run_spans],
        "phases": [{"name": name, "start": start, "end": end}
                   for name, start, end in getattr(timeline, "phases", None) or []],
        "metrics": metrics,
    }
