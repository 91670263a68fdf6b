"""Views of a simulated timeline: an execution-trace plot, a text summary, Chrome-trace JSON.

Pure Python + matplotlib (imported only when plotting); no TensorFlow.  Every time shown
names its clock, so simulated IPU time is never mistaken for host wall time::

    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.timeline import simulate_engine_runs
    >>> run = EngineRun("train", 10, ComputeCost(forward_flops=1e9, backward_flops=2e9),
    ...                 infeed_bytes_per_iteration=4096)
    >>> timeline = simulate_engine_runs([run] * 3, title="looped")
    >>> print(summary_table(timeline).splitlines()[0])
    Simulated IPU timeline: looped
    >>> trace = to_chrome_trace(timeline)        # json.dump it and open in ui.perfetto.dev
    >>> ax = plot_timeline(timeline)              # doctest: +SKIP
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Dict, List, Optional, Sequence, Tuple

from .timeline import UNIT_CLOCK, Timeline, check_no_overlaps, format_bytes

# Okabe-Ito palette (distinguishable with the common colour-vision deficiencies).
KIND_COLOURS: Dict[str, str] = {
    "forward": "#0072B2",  # blue
    "backward": "#D55E00",  # vermillion
    "weight_update": "#009E73",  # bluish green
    "recompute": "#CC79A7",  # reddish purple
    "exchange": "#E69F00",  # orange
    "sync": "#000000",  # black
    "stream_copy": "#56B4E9",  # sky blue
    "host": "#999999",  # grey
}
OTHER_COLOUR = "#F0E442"  # yellow, for kinds a later simulator may add

# Pipeline phases are shaded behind the lanes, light enough not to hide the bubbles.
PHASE_COLOURS: Dict[str, str] = {
    "ramp-up": "#56B4E9",
    "main": "#009E73",
    "ramp-down": "#E69F00",
    "weight update": "#CC79A7",
}
_MAX_LABELLED_PHASES = 40

_UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6}
_MAX_SHADED_RUNS = 200
_CHROME_PID = 1


# Rare, short kinds are drawn above the frequent compute bars so they are not painted over.
_KIND_LAYER = {"stream_copy": 4, "sync": 4, "exchange": 4, "host": 3}


def _pick_unit(seconds: float) -> str:
    if seconds >= 1.0:
        return "s"
    if seconds >= 1e-3:
        return "ms"
    return "µs"


def _resolve_unit(time_unit: str, seconds: float) -> Tuple[str, float]:
    unit = _pick_unit(seconds) if time_unit == "auto" else time_unit
    if unit not in _UNIT_SCALE:
        raise ValueError(f"time_unit must be 'auto' or one of {', '.join(_UNIT_SCALE)}; got {unit!r}")
    return ("µs" if unit == "us" else unit), _UNIT_SCALE[unit]


def format_seconds(seconds: float) -> str:
    """``format_seconds(0.0123) == '12.3 ms'`` (three significant figures)."""
    unit, scale = _resolve_unit("auto", seconds)
    return f"{seconds * scale:.3g} {unit}"


# --- matplotlib execution trace -----------------------------------------------------------


def plot_timeline(timeline: Timeline, ax=None, title: Optional[str] = None, time_unit: str = "auto"):
    """Draw ``timeline`` as an execution trace: host lane on top, one lane per IPU below.

    Colours follow ``KIND_COLOURS``; alternate engine runs are shaded when there are at most
    200 of them.  Returns the matplotlib Axes.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.timeline import simulate_engine_runs
    >>> tl = simulate_engine_runs([EngineRun("p", 1, ComputeCost(forward_flops=1e9))] * 4)
    >>> [t.get_text() for t in plot_timeline(tl).get_yticklabels()][::-1]  # top to bottom
    ['host', 'IPU0']
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 * len(timeline.lanes) + 1.2))
    if timeline.clock == UNIT_CLOCK:  # unit-cost pipelines count time steps, not seconds
        unit, scale = "", 1.0
    else:
        unit, scale = _resolve_unit(time_unit, timeline.metrics.makespan)
    lanes = timeline.lanes
    row_of = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}  # first lane on top

    bars: Dict[Tuple[str, str], List[Tuple[float, float]]] = {}
    for e in timeline.events:
        bars.setdefault((e.lane, e.kind), []).append((e.start * scale, (e.end - e.start) * scale))
    labelled = _labels_actions(timeline)
    for (lane, kind), xranges in bars.items():
        colour = KIND_COLOURS.get(kind, OTHER_COLOUR)
        # An edge in the bar's own colour keeps events narrower than a pixel visible when a
        # whole epoch is drawn; at zoomed-in scales it is imperceptible.  A small pipeline
        # gets white edges instead, so back-to-back actions stay distinguishable.
        edge = "white" if labelled and kind in PIPELINE_ACTION_KINDS else colour
        ax.broken_barh(xranges, (row_of[lane] - 0.4, 0.8), facecolors=colour,
                       edgecolors=edge, linewidth=0.6, zorder=_KIND_LAYER.get(kind, 2))
    if labelled:  # micro-batch numbers in the boxes, as in Graphcore's pipeline diagrams
        for e in timeline.events:
            if e.kind in PIPELINE_ACTION_KINDS and e.micro_batch is not None and e.end > e.start:
                # "w": the weight-gradient half of a split backward (zero-bubble's 1W3).
                label = f"w{e.micro_batch}" if "W" in e.name else str(e.micro_batch)
                ax.text((e.start + e.end) / 2 * scale, row_of[e.lane], label,
                        ha="center", va="center", fontsize="x-small", color="white", zorder=5)

    spans = timeline.engine_run_spans
    if 1 < len(spans) <= _MAX_SHADED_RUNS:
        shaded = [(s * scale, (e - s) * scale) for s, e in spans[1::2]]
        ax.broken_barh(shaded, (-0.5, len(lanes)), facecolors="#000000", alpha=0.06,
                       linewidth=0, zorder=0)

    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(list(reversed(lanes)))
    ax.set_ylim(-0.5, len(lanes) - 0.5)
    ax.set_xlim(0, max(timeline.metrics.makespan * scale, 1e-12))
    _shade_phases(ax, timeline, scale)
    ax.set_xlabel(f"{timeline.clock} ({unit})" if unit else timeline.clock)
    ax.set_title(title if title is not None else timeline.title,
                 pad=14 if getattr(timeline, "phases", None) else None)
    handles = [Patch(facecolor=KIND_COLOURS.get(k, OTHER_COLOUR), label=k.replace("_", " "))
               for k in timeline.kinds_present()]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small",
                  frameon=False)
    return ax


def _shade_phases(ax, timeline: Timeline, scale: float) -> None:
    """Shade each pipeline phase behind the lanes and name it above them."""
    phases = getattr(timeline, "phases", None) or []
    top = len(timeline.lanes) - 0.5
    span = max(timeline.metrics.makespan * scale, 1e-12)
    for name, start, end in phases:
        ax.axvspan(start * scale, end * scale, color=PHASE_COLOURS.get(name, OTHER_COLOUR),
                   alpha=0.12, linewidth=0, zorder=0)
        wide_enough = (end - start) * scale > 0.04 * span
        if len(phases) <= _MAX_LABELLED_PHASES and wide_enough:
            ax.text((start + end) / 2 * scale, top, name, ha="center", va="bottom",
                    fontsize="x-small", color="#333333", clip_on=False)


PIPELINE_ACTION_KINDS = frozenset({"forward", "backward", "recompute"})
_MAX_LABELLED_ACTIONS = 300


def _labels_actions(timeline: Timeline) -> bool:
    """Label pipeline actions with their micro-batch when there are few enough to read."""
    if not getattr(timeline, "phases", None):
        return False
    count = sum(1 for e in timeline.events if e.kind in PIPELINE_ACTION_KINDS)
    return 0 < count <= _MAX_LABELLED_ACTIONS


def plot_comparison(timelines: Sequence[Timeline], titles: Optional[Sequence[str]] = None,
                    sharex: bool = True):
    """One trace per timeline, stacked on a shared time axis; returns the Figure.

    Each subplot's title gives the makespan and the number of engine runs, so per-step and
    looped execution can be compared at a glance.
    """
    import matplotlib.pyplot as plt

    if not timelines:
        raise ValueError("plot_comparison needs at least one timeline.")
    titles = list(titles) if titles is not None else [t.title for t in timelines]
    if len(titles) != len(timelines):
        raise ValueError(f"Got {len(titles)} titles for {len(timelines)} timelines.")
    heights = [len(t.lanes) + 1.5 for t in timelines]
    fig, axes = plt.subplots(len(timelines), 1, sharex=sharex, squeeze=False,
                             figsize=(10, 0.5 * sum(heights) + 0.5),
                             gridspec_kw={"height_ratios": heights})
    longest = max(t.metrics.makespan for t in timelines)
    unit = _pick_unit(longest) if sharex else "auto"
    for ax, timeline, name in zip(axes[:, 0], timelines, titles):
        m = timeline.metrics
        heading = (f"{name + ': ' if name else ''}makespan {format_seconds(m.makespan)} "
                   f"({timeline.clock}), {m.engine_runs} engine run{'s' if m.engine_runs != 1 else ''}")
        plot_timeline(timeline, ax=ax, title=heading, time_unit=unit)
    if sharex:
        for ax in axes[:-1, 0]:
            ax.set_xlabel("")
        axes[-1, 0].set_xlim(0, max(longest * _UNIT_SCALE[unit], 1e-12))
    fig.tight_layout()
    return fig


# --- text summary -------------------------------------------------------------------------


def summary_table(timeline: Timeline) -> str:
    """A plain-text table of the timeline's metrics; every time is simulated IPU time.

    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.timeline import simulate_engine_runs
    >>> text = summary_table(simulate_engine_runs([EngineRun("p", 1, ComputeCost(forward_flops=1e9))]))
    >>> "makespan (simulated IPU time)" in text
    True
    """
    m = timeline.metrics
    clock = timeline.clock
    format_seconds = _time_formatter(clock)
    rows = [
        (f"makespan ({clock})", format_seconds(m.makespan)),
        ("engine runs", str(m.engine_runs)),
        ("loop iterations", str(m.iterations)),
        (f"host overhead ({clock})",
         f"{format_seconds(m.host_overhead_time)} ({100 * m.host_overhead_fraction:.1f} % of makespan)"),
        (f"stream copies, busiest IPU ({clock})", format_seconds(m.stream_copy_time)),
        # "Bubble" is pipeline vocabulary; with one IPU it is simply idle time.
        ("bubble fraction" if len(timeline.ipu_lanes) > 1 else "IPU idle fraction",
         f"{100 * m.bubble_fraction:.1f} %"),
    ]
    if m.samples_per_second is not None:
        rows.append((f"samples/s ({clock})", f"{m.samples_per_second:,.0f}"))
    if getattr(m, "effective_batch_size", None) is not None:
        rows.append(("effective batch size", f"{m.effective_batch_size:,}"))
    width = max(len(label) for label, _ in rows)
    lines = [f"Simulated IPU timeline: {timeline.title or '(untitled)'}"]
    lines += [f"  {label:<{width}}  {value}" for label, value in rows]

    kinds = [k for k in timeline.kinds_present() if k != "host"]
    pipelined = bool(getattr(timeline, "phases", None))
    header = (["IPU", "utilisation", "peak memory"] + (["in flight"] if pipelined else [])
              + [k.replace("_", " ") for k in kinds])
    table = [header]
    for ipu in sorted(m.utilisation):
        by_kind = m.busy_time_by_kind.get(ipu, {})
        table.append([f"IPU{ipu}", f"{100 * m.utilisation[ipu]:.2f} %",
                      format_bytes(m.peak_memory_bytes.get(ipu, 0))
                      + (" (OOM)" if m.out_of_memory.get(ipu) else "")]
                     + ([str(m.peak_in_flight.get(ipu, 0))] if pipelined else [])
                     + [format_seconds(by_kind.get(k, 0.0)) for k in kinds])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines.append(f"Per IPU (utilisation = compute time / makespan; times by kind in {clock}):")
    for row in table:
        lines.append("  " + "  ".join(cell.rjust(w) if i else cell.ljust(w)
                                      for i, (cell, w) in enumerate(zip(row, widths))))
    lines += getattr(m, "out_of_memory_messages", [])
    return "\n".join(lines)


def _time_formatter(clock: str):
    """Seconds with a unit, or a plain count of time steps on the unit-cost clock."""
    if clock == UNIT_CLOCK:
        return lambda value: f"{value:g}"
    return format_seconds


# --- Chrome Trace Event JSON (ui.perfetto.dev, chrome://tracing) --------------------------


def to_chrome_trace(timeline: Timeline) -> dict:
    """The timeline in Chrome Trace Event format; ``ts``/``dur`` are simulated microseconds.

    One process, "Simulated IPU system", with one thread (track) per lane; memory counters
    per IPU; flow arrows for inter-IPU transfers.  Raises ValueError if two events on one lane
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
        trace.append({"name": f"{c.name} {c.lane}", "ph": "C", "ts": c.time * 1e6,
                      "pid": _CHROME_PID, "args": {"bytes": c.value}})

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
        "otherData": {"clock": timeline.clock, "title": timeline.title},
    }


def save_chrome_trace(timeline: Timeline, path) -> str:
    """Write ``to_chrome_trace(timeline)`` as JSON to ``path``; returns the path as a string."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(to_chrome_trace(timeline), handle)
    return str(path)


# --- plain data ---------------------------------------------------------------------------


def to_dict(timeline: Timeline) -> dict:
    """The timeline as JSON-friendly plain data (times in simulated seconds, or in time
    steps for a unit-cost timeline: ``time_unit`` says which)."""
    metrics = asdict(timeline.metrics)
    metrics["host_overhead_fraction"] = timeline.metrics.host_overhead_fraction
    metrics["mean_utilisation"] = timeline.metrics.mean_utilisation
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


__all__ = [
    "KIND_COLOURS",
    "format_seconds",
    "plot_timeline",
    "plot_comparison",
    "summary_table",
    "to_chrome_trace",
    "save_chrome_trace",
    "to_dict",
    "pick_time_unit",
    "time_unit_scale",
]


def pick_time_unit(seconds: float) -> str:
    """The unit (``"s"``, ``"ms"``, ``"µs"``) that ``plot_timeline`` picks for this span."""
    return _resolve_unit("auto", seconds)[0]


def time_unit_scale(unit: str) -> float:
    """Seconds -> ``unit`` multiplier (``time_unit_scale("ms") == 1e3``)."""
    return _UNIT_SCALE[unit]
