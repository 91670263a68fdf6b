"""The text summary of a timeline: its metrics, each time labelled with its clock."""
from __future__ import annotations

from ipu_emulator.sim.bubbles import bubble_breakdown
from ipu_emulator.sim.timeline import CLOCK as SIMULATED_CLOCK
from ipu_emulator.sim.timeline import Timeline, format_bytes
from ipu_emulator.views.style import time_formatter

HOST_CLOCK = "simulated host time"


def summary_table(timeline: Timeline) -> str:
    """A plain-text table of the timeline's metrics, each time labelled with its clock: the
    host's launch of engine runs is *simulated host time*, the rest simulated IPU time.  The
    share of IPU time not spent computing is the *bubble fraction* of a pipelined (or sharded)
    timeline, and plainly the *IPU idle fraction* of any other (one IPU, or replicas).

    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.sim.timeline import simulate_engine_runs
    >>> text = summary_table(simulate_engine_runs([EngineRun("p", 1, ComputeCost(forward_flops=1e9))]))
    >>> "makespan (simulated IPU time)" in text, "host overhead (simulated host time)" in text
    (True, True)
    """
    m = timeline.metrics
    clock = timeline.clock
    format_seconds = time_formatter(clock)
    rows = [
        (f"makespan ({clock})", format_seconds(m.makespan)),
        ("engine runs", str(m.engine_runs)),
        ("loop iterations", str(m.iterations)),
        # The launch is the host's work, priced by the same cost model.
        (f"host overhead ({HOST_CLOCK if clock == SIMULATED_CLOCK else clock})",
         f"{format_seconds(m.host_overhead_time)} ({100 * m.host_overhead_fraction:.1f} % of makespan)"),
        (f"stream copies, busiest IPU ({clock})", format_seconds(m.stream_copy_time)),
        # "Bubble" is pipeline vocabulary; without pipeline phases (one IPU, or replicas
        # side by side) it is simply idle time.
        ("bubble fraction" if getattr(timeline, "phases", None) else "IPU idle fraction",
         f"{100 * m.bubble_fraction:.1f} %"),
    ]
    if getattr(timeline, "phases", None):
        rows.append(("  of which", ", ".join(
            f"{cause} {100 * share:.1f} %" for cause, share in bubble_breakdown(timeline).items()
            if share >= 0.0005) or "nothing"))
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
