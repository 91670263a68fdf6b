"""Small helpers for the pipelining notebooks (09 and 11), so that their teaching cells show
the pipeline API and the lesson, not the plumbing.

* ``rescheduled(run, schedule=..., repeat_count=...)``: a recorded pipelined engine run as if
  the program had asked for other pipeline settings (same stages, same measured costs);
* ``first_backward_end(timeline)``: when a micro-batch's backward pass ends on a stage (the
  tutorial's "follow the first mini-batch");
* ``ipu_span(timeline)``: from the first IPU event to the last (a run without the host's
  launch of the engine run);
* ``main_phase_busy(timeline)``: the share of the main phases each IPU spends computing (the
  figure Graphcore's trace of the tutorial's step 3 gives: IPU1 about 0.6);
* ``plot_losses(losses, per_update)``: the loss of every micro-batch from the outfeed, and its
  mean per weight update.

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> grouped = simulate_pipeline(unit_stages(4), "grouped", 16, unit_cost=True)
    >>> first_backward_end(grouped), ipu_span(grouped)
    (11.0, 38.0)
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from ipu_emulator.record import EngineRun
from ipu_emulator.sim.timeline import COMPUTE_KINDS, Timeline
from ipu_emulator.views.zoom import ipu_window

SETTINGS = ("schedule", "repeat_count", "gradient_accumulation_count")


def rescheduled(run: EngineRun, **settings) -> EngineRun:
    """``run`` (a recorded pipelined engine run) with other pipeline ``settings``: any of
    ``schedule``, ``repeat_count`` and ``gradient_accumulation_count``.  The stages and their
    measured costs stay; the run's micro-batches follow the new counts.  The schedule only
    reorders the work, so simulating the result answers "what would this program have cost
    with ...?" without training again.

    >>> from ipu_emulator.record import ComputeCost, PipelineSettings
    >>> run = EngineRun("train", 64, ComputeCost(), pipeline=PipelineSettings("grouped", 16, 4, (0, 1)))
    >>> other = rescheduled(run, schedule="sequential", repeat_count=1)
    >>> other.pipeline.schedule, other.pipeline.repeat_count, other.iterations
    ('sequential', 1, 16)
    """
    if run.pipeline is None:
        raise ValueError("rescheduled: this engine run is not a pipeline (run.pipeline is None)")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"rescheduled: unknown setting(s) {', '.join(unknown)}; "
                        f"choose from {', '.join(SETTINGS)}")
    pipeline = replace(run.pipeline, **settings)
    iterations = pipeline.gradient_accumulation_count * pipeline.repeat_count
    return replace(run, pipeline=pipeline, iterations=iterations)


def first_backward_end(timeline: Timeline, micro_batch: int = 0, stage: int = 0) -> float:
    """When the backward pass of ``micro_batch`` ends on ``stage`` (in the first pass): in
    unit-cost mode, the time step the tutorial's diagrams count to."""
    ends = [e.end for e in timeline.events
            if e.kind == "backward" and e.micro_batch == micro_batch and e.stage == stage
            and e.iteration in (None, 0)]
    if not ends:
        raise ValueError(f"no backward pass of micro-batch {micro_batch} on stage {stage}")
    return max(ends)


def ipu_span(timeline: Timeline) -> float:
    """From the first IPU event to the last: the run without the host's launch (0 without
    IPU events)."""
    if not any(e.ipu is not None for e in timeline.events):
        return 0.0
    start, end = ipu_window(timeline)
    return end - start


def main_phase_busy(timeline: Timeline) -> dict:
    """For each IPU, the share of the main phases (all passes together) it spends computing
    (forward, backward, recomputation); the rest it waits, exchanges or syncs.  In the main
    phase every IPU has work, so a share well under 1 means the IPU waits for a slower one.

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> main_phase_busy(simulate_pipeline(unit_stages(2), "grouped", 16, unit_cost=True))
    {0: 0.9375, 1: 1.0}
    """
    mains = [(start, end) for name, start, end in timeline.phases if name == "main"]
    if not mains:
        raise ValueError("main_phase_busy: the timeline has no main phase (not a pipeline?)")
    length = sum(end - start for start, end in mains)
    busy: dict = {}
    for event in timeline.events:
        if event.ipu is None:
            continue
        busy.setdefault(event.ipu, 0.0)
        if event.kind not in COMPUTE_KINDS:
            continue
        busy[event.ipu] += sum(max(0.0, min(end, event.end) - max(start, event.start))
                               for start, end in mains)
    return {ipu: busy[ipu] / length for ipu in sorted(busy)}


def plot_losses(losses: Sequence[float], per_update: int, ax=None,
                title: Optional[str] = None):
    """The loss of every micro-batch (as the outfeed returned them) and, over it, their mean
    per weight update (every ``per_update`` micro-batches); returns the axes."""
    import matplotlib.pyplot as plt  # only when plotting

    values = [float(v) for v in losses]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 2.8))
    ax.plot(range(len(values)), values, lw=0.6, alpha=0.5, label="micro-batch")
    means = [sum(values[k:k + per_update]) / len(values[k:k + per_update])
             for k in range(0, len(values), per_update)]
    ax.plot([k * per_update + per_update / 2 for k in range(len(means))], means, "o-", ms=3,
            label="mean per weight update")
    ax.set_xlabel("micro-batch")
    ax.set_ylabel("loss (from the outfeed)")
    if title:
        ax.set_title(title)
    ax.legend()
    return ax


__all__ = ["rescheduled", "first_backward_end", "ipu_span", "main_phase_busy",
           "plot_losses"]
