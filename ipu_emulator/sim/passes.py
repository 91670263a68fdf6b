"""One pass of a pipeline, cut out of a longer timeline: the focus of most pipeline lessons.

An engine run of a pipelined program holds ``repeat_count`` passes of ``gradient
accumulation count`` micro-batches each, after the host's launch.  The lesson of a schedule
is in one pass: ``one_pass(timeline, k)`` keeps the IPU lanes' events of pass ``k`` (with its
weight update), its phases and its counters, moves them to start at zero, and works out the
metrics of that pass alone, so passes of different configurations compare side by side.

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> run = simulate_pipeline(unit_stages(4), "gpipe", 8, repeat_count=3, unit_cost=True)
    >>> first = one_pass(run)
    >>> run.metrics.makespan, first.metrics.makespan, round(first.metrics.bubble_fraction, 4)
    (66.0, 22.0, 0.2727)
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional

from ipu_emulator.sim.timeline import CounterSample, Event, Timeline, timeline_metrics


def one_pass(timeline: Timeline, index: int = 0, title: Optional[str] = None) -> Timeline:
    """Pass ``index`` of a pipelined ``timeline`` (events whose ``iteration`` is the pass),
    from its first IPU event to its last, shifted to start at 0.  Raises ValueError when the
    timeline has no such pass."""
    ipu_events = [e for e in timeline.events if e.ipu is not None and e.iteration == index]
    if not timeline.phases or not ipu_events:
        passes = sorted({e.iteration for e in timeline.events
                         if e.ipu is not None and e.iteration is not None})
        raise ValueError(f"one_pass({index}): " + (
            f"this timeline has passes {passes[0]} to {passes[-1]}." if timeline.phases and passes
            else "this timeline is not a pipeline (it has no passes)."))
    start = min(e.start for e in ipu_events)
    end = max(e.end for e in ipu_events)
    events = [replace(e, start=e.start - start, end=e.end - start) for e in ipu_events]
    phases = [(name, max(a, start) - start, min(b, end) - start)
              for name, a, b in timeline.phases if a < end and b > start]
    m = timeline.metrics
    metrics = timeline_metrics(
        events, sorted(m.utilisation), engine_runs=1,
        iterations=len({e.micro_batch for e in events if e.micro_batch is not None}),
        makespan=end - start, peak_memory_bytes=m.peak_memory_bytes,
        sram_bytes_per_chip=None, out_of_memory=m.out_of_memory,
        peak_in_flight=m.peak_in_flight, clock=m.clock,
        effective_batch_size=m.effective_batch_size,
        out_of_memory_messages=m.out_of_memory_messages)
    return Timeline(events=events, lanes=timeline.ipu_lanes, metrics=metrics,
                    title=title if title is not None else f"{timeline.title}, pass {index}",
                    clock=timeline.clock, engine_run_spans=[(0.0, end - start)],
                    counters=_counters_within(timeline.counters, start, end),
                    flows=[replace(f, from_time=f.from_time - start, to_time=f.to_time - start)
                           for f in timeline.flows if start <= f.from_time <= end],
                    phases=phases)


def _counters_within(counters: List[CounterSample], start: float, end: float
                     ) -> List[CounterSample]:
    """The samples between ``start`` and ``end``, shifted, each counter opening with the
    value it held at ``start``."""
    held: Dict[tuple, CounterSample] = {}
    inside = []
    for sample in sorted(counters, key=lambda s: s.time):
        key = (sample.lane, sample.name)
        if sample.time <= start:
            held[key] = sample
        elif sample.time <= end:
            inside.append(replace(sample, time=sample.time - start))
    return [replace(s, time=0.0) for s in held.values()] + inside


__all__ = ["one_pass"]
