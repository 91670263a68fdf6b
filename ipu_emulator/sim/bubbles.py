"""Where a pipeline's bubble comes from: its idle IPU time split by cause.

The bubble fraction is the share of IPU time not spent computing.  Each idle stretch of an
IPU is put down to what the IPU is waiting for, within its pass of the pipeline:

* ``ramp-up``: the pipeline filling: before the IPU's first backward of the pass (its
  first input, or in a synchronous step, a step that later stages fill with more work);
* ``ramp-down``: the pipeline draining: after the IPU's last forward of the pass, when no
  new micro-batch will come.  A wait that is both (GPipe's turn from all forwards to all
  backwards) is half of each: the forward wave draining, then the backward wave filling;
* ``imbalance``: the steady state, waiting for a slower IPU (and after its weight update,
  for the others' updates); under Sequential (sharding) this is the shards taking turns;
* ``communication``: exchanges, syncs and stream copies: IPU time moving data, not computing;
* ``host``: idle outside the pipeline's phases (the host's engine-run launch).

The parts add up to ``metrics.bubble_fraction``.  For ``S`` identical stages and ``M``
micro-batches with a backward as long as a forward, the textbook value is
``(S-1)/(M+S-1)`` (``textbook_bubble``), all of it ramp-up and ramp-down:

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> gpipe = simulate_pipeline(unit_stages(4), "gpipe", 8, unit_cost=True)
    >>> {cause: round(share, 4) for cause, share in bubble_breakdown(gpipe).items() if share}
    {'ramp-up': 0.1364, 'ramp-down': 0.1364}
    >>> textbook_bubble(4, 8) == 3 / 11 == gpipe.metrics.bubble_fraction
    True
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ipu_emulator.sim.timeline import COMPUTE_KINDS, Event, Timeline, ipu_of_lane

CAUSES = ("ramp-up", "ramp-down", "imbalance", "communication", "host")


def textbook_bubble(num_stages: int, micro_batches: int) -> float:
    """``(S-1)/(M+S-1)``: the idle share of a fill-and-drain pipeline of ``S`` equal stages
    and ``M`` micro-batches, each backward as long as its forward."""
    return (num_stages - 1) / (micro_batches + num_stages - 1)


def bubble_breakdown(timeline: Timeline) -> Dict[str, float]:
    """The bubble of ``timeline`` as shares of all IPU time, one per cause in ``CAUSES``
    (they sum to ``timeline.metrics.bubble_fraction``).  Without pipeline phases every idle
    moment counts as ``host``."""
    makespan = timeline.metrics.makespan
    lanes = {lane for lane in timeline.ipu_lanes
             if ipu_of_lane(lane) in timeline.metrics.utilisation}
    totals = dict.fromkeys(CAUSES, 0.0)
    if makespan <= 0 or not lanes:
        return totals
    if timeline.phases:
        window = (min(start for _, start, _ in timeline.phases),
                  max(end for _, _, end in timeline.phases))
    else:
        window = (0.0, 0.0)
    by_lane: Dict[str, List[Event]] = {lane: [] for lane in lanes}
    for e in timeline.events:
        if e.lane in by_lane and e.end > e.start:
            by_lane[e.lane].append(e)
            if e.kind not in COMPUTE_KINDS:
                totals["communication"] += min(e.end, makespan) - max(e.start, 0.0)
    for events in by_lane.values():
        _lane_idle(sorted(events, key=lambda e: e.start), makespan, window, totals)
    capacity = makespan * len(lanes)
    return {cause: time / capacity for cause, time in totals.items()}


class _PassProgress:
    """When one IPU ran its forwards and backwards in each pass."""

    def __init__(self, events: List[Event]):
        self.last_forward: Dict[int, float] = {}
        self.first_backward: Dict[int, float] = {}
        for e in events:
            if e.kind == "forward":
                self.last_forward[e.iteration] = max(self.last_forward.get(e.iteration, e.end),
                                                     e.end)
            elif e.kind == "backward":
                self.first_backward[e.iteration] = min(
                    self.first_backward.get(e.iteration, e.start), e.start)

    def cause(self, gap_start: float, gap_end: float, before: Event, after: Optional[Event]):
        """``[(cause, seconds)]`` for an idle stretch between two events of the IPU."""
        if after is None:  # after the IPU's last work
            return [("imbalance" if before.kind == "weight_update" else "ramp-down",
                     gap_end - gap_start)]
        if after.iteration != before.iteration:  # a new pass: waiting for it to fill
            return [("ramp-up", gap_end - gap_start)]
        p = after.iteration
        # Inference has no backward: its steady state starts after the first forward.
        filling = gap_end <= self.first_backward.get(p, before.start)
        draining = gap_start >= self.last_forward.get(p, float("inf"))
        if filling and draining:
            middle = (gap_start + gap_end) / 2
            return [("ramp-down", middle - gap_start), ("ramp-up", gap_end - middle)]
        if filling:
            return [("ramp-up", gap_end - gap_start)]
        if draining:
            return [("ramp-down", gap_end - gap_start)]
        return [("imbalance", gap_end - gap_start)]


def _lane_idle(events: List[Event], makespan: float, window: Tuple[float, float],
               totals: Dict[str, float]) -> None:
    """Add one IPU lane's idle time to ``totals``; ``window`` spans the pipeline's phases
    (idle outside it is the host's)."""
    progress = _PassProgress(events)
    at, before = 0.0, None
    for event in events + [None]:
        gap_end = makespan if event is None else max(event.start, at)
        if gap_end > at:
            # Outside the pipeline's phases the IPUs wait for the host.
            inside = (max(at, window[0]), min(gap_end, window[1]))
            host = (gap_end - at) - max(inside[1] - inside[0], 0.0)
            totals["host"] += host
            if inside[1] > inside[0]:
                if before is None:
                    totals["ramp-up"] += inside[1] - inside[0]
                else:
                    for cause, seconds in progress.cause(*inside, before, event):
                        totals[cause] += seconds
        if event is not None:
            at = max(at, min(event.end, makespan))
            before = event


__all__ = ["CAUSES", "bubble_breakdown", "textbook_bubble"]
