"""Memory views: how much each IPU holds, over a pass and across variants of one pipeline.

Notebook 12 changes one memory option at a time (recomputation, offloading, the accumulators'
type) and compares the variants.  These functions draw and tabulate that comparison so the
lesson's cells stay short:

* ``memory_over_time(timeline, lane)``: the lane's memory counter as (seconds, bytes) steps;
* ``plot_memory_over_pass(timelines)``: each IPU's memory over one pass, one line per variant;
* ``plot_peak_memory(sizes, timelines)``: IPU peak memory against the micro-batch size, with
  the chip's memory as a dashed line (what fits and what does not);
* ``variants_table(timelines)`` and ``plot_variants(timelines)``: one pass's simulated time and
  each IPU's peak memory, per variant, as text and as bars;

Times are simulated IPU time, memory in MB (10^6 bytes; MiB for the chip-sized what-if).

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> from ipu_emulator.sim.cost_model import stage_costs
    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline
    >>> stages = stage_costs(builtin_model("tutorial-mlp"), ["dense32"], batch_size=32)
    >>> print(variants_table({
    ...     "reference": simulate_pipeline(stages, "grouped", 16, batch_size=32),
    ...     "recomputation": simulate_pipeline(stages, "grouped", 16, batch_size=32,
    ...                                        recompute=True)}))
    variant        one pass  IPU0 peak  IPU1 peak
    reference        617 µs   2.410 MB   0.033 MB
    recomputation    721 µs   2.296 MB   0.033 MB

Plain Python: matplotlib is imported inside the plotting functions only.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ipu_emulator.sim.passes import one_pass
from ipu_emulator.sim.timeline import Timeline
from ipu_emulator.views.style import format_seconds

MB = 1e6
MIB = 2 ** 20


def memory_over_time(timeline: Timeline, lane: str) -> Tuple[List[float], List[float]]:
    """The ``memory`` counter of ``lane`` (e.g. ``"IPU0"``): times in seconds and bytes, each
    value holding until the next time."""
    samples = [c for c in timeline.counters if c.lane == lane and c.name == "memory"]
    return [c.time for c in samples], [c.value for c in samples]


def plot_memory_over_pass(timelines: Mapping[str, Timeline], lanes: Optional[Sequence[str]] = None,
                          title: str = "memory, one pass (synthetic data)"):
    """One panel per IPU lane (default: the first timeline's), one step line per labelled
    timeline: the IPU's memory in MB over the first pass, in simulated IPU time from the
    pass's start.  Returns the figure."""
    import matplotlib.pyplot as plt

    passes = {label: one_pass(t) for label, t in timelines.items()}
    lanes = list(lanes or next(iter(passes.values())).ipu_lanes)
    fig, axes = plt.subplots(1, len(lanes), figsize=(5.5 * len(lanes), 3), squeeze=False)
    for ax, lane in zip(axes[0], lanes):
        for label, timeline in passes.items():
            times, values = memory_over_time(timeline, lane)
            ax.step([t * 1e3 for t in times], [v / MB for v in values], where="post",
                    label=label)
        ax.set_title(f"{lane} {title}")
        ax.set_xlabel("simulated IPU time from the pass's start (ms)")
        ax.set_ylabel("MB")
        ax.set_ylim(bottom=0)
    axes[0][0].legend(loc="lower left")  # one legend: the panels share their lines' names
    fig.tight_layout()
    return fig


def plot_peak_memory(sizes: Sequence[int], timelines: Mapping[str, Sequence[Timeline]],
                     ipu: int = 0, limit_bytes: Optional[float] = None, limit_label: str = "",
                     title: str = ""):
    """IPU ``ipu``'s peak memory (MiB) against the micro-batch size, one line per label
    (``timelines[label][i]`` was simulated with ``sizes[i]``), log2 size axis, and
    ``limit_bytes`` (the chip's memory) as a dashed line.  Returns the axes."""
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(7, 3.5))
    for label, runs in timelines.items():
        ax.plot(list(sizes), [t.metrics.peak_memory_bytes[ipu] / MIB for t in runs], "o-",
                label=label)
    if limit_bytes is not None:
        ax.axhline(limit_bytes / MIB, color="k", linestyle="--", label=limit_label or "limit")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batch size")
    ax.set_ylabel(f"IPU {ipu} peak memory (MiB)")
    ax.set_title(title)
    ax.legend()
    return ax


def _pass_times(timelines: Mapping[str, Timeline]) -> Dict[str, float]:
    return {label: one_pass(t).metrics.makespan for label, t in timelines.items()}


def variants_table(timelines: Mapping[str, Timeline]) -> str:
    """One line per variant: the simulated time of its first pass (weight update included,
    the engine run's launch left out) and each IPU's peak memory in MB."""
    pass_time = _pass_times(timelines)
    ipus = sorted(next(iter(timelines.values())).metrics.peak_memory_bytes)
    width = max(len("variant"), *(len(label) for label in timelines))
    lines = [f"{'variant':{width}s}  {'one pass':>8s}" + "".join(f"  {f'IPU{i} peak':>9s}"
                                                              for i in ipus)]
    for label, timeline in timelines.items():
        peak = timeline.metrics.peak_memory_bytes
        lines.append(f"{label:{width}s}  {format_seconds(pass_time[label]):>8s}"
                     + "".join(f"  {peak[i] / MB:6.3f} MB" for i in ipus))
    return "\n".join(lines)


def plot_variants(timelines: Mapping[str, Timeline]):
    """Two bar charts sharing the variants' names: one pass's simulated time (µs) on the left,
    each IPU's peak memory (MB) on the right.  Returns the figure."""
    import matplotlib.pyplot as plt

    names = list(timelines)
    pass_time = _pass_times(timelines)
    ipus = sorted(next(iter(timelines.values())).metrics.peak_memory_bytes)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.45 * len(names) + 1.2), sharey=True)
    positions = range(len(names))
    left.barh(positions, [pass_time[n] * 1e6 for n in names], color="grey")
    left.set_xlabel("one pass, simulated IPU time (µs)")
    height = 0.8 / len(ipus)
    for k, ipu in enumerate(ipus):
        offset = (k - (len(ipus) - 1) / 2) * height
        right.barh([p + offset for p in positions],
                   [timelines[n].metrics.peak_memory_bytes[ipu] / MB for n in names],
                   height=height, label=f"IPU{ipu}")
    right.set_xlabel("peak memory (MB)")
    right.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    left.set_yticks(list(positions), names)
    left.invert_yaxis()
    fig.tight_layout()
    return fig


__all__ = ["memory_over_time", "plot_memory_over_pass", "plot_peak_memory", "variants_table",
           "plot_variants"]
