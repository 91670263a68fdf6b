"""What the strip under each IPU lane shows, and which micro-batch a trace follows: shared
by the matplotlib and SVG traces.

A pipeline's strip answers "how much does this IPU hold, and when": the micro-batches whose
activations it keeps (forward done, last backward not yet) over time, the quantity that
grows an IPU's memory beyond its weights, accumulators and optimizer state.  Its label gives
the peak count and, with real costs, the IPU's peak memory.

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> grouped = simulate_pipeline(unit_stages(4), "grouped", 8, unit_cost=True)
    >>> memory_strip(grouped).label("IPU0")
    'in flight (peak 7)'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

from ipu_emulator.sim.pipeline_simulator import IN_FLIGHT_COUNTER
from ipu_emulator.sim.timeline import UNIT_CLOCK, Event, Timeline, format_bytes, ipu_lane

MEMORY_COLOUR = "#6a51a3"  # purple: no event kind uses it
_MAX_STRIPPED_LANES = 8    # more IPU lanes than this: the strips would crowd the lanes


MEMORY_COUNTER = "memory"


@dataclass
class MemoryStrip:
    """A counter per IPU lane as step series ``[(time, value)]``: micro-batches in flight
    (with each lane's peak memory in bytes for the label; none in unit-cost mode, where
    stages have no bytes), or with ``name == MEMORY_COUNTER`` the memory itself in bytes."""

    series: Dict[str, List[Tuple[float, float]]]
    peak_memory: Dict[str, float]
    name: str = IN_FLIGHT_COUNTER

    def peak(self, lane: str) -> float:
        return max((value for _, value in self.series.get(lane, [])), default=0.0)

    @property
    def scale_peak(self) -> float:
        """The largest count on any lane: every strip is drawn on this one scale."""
        return max((self.peak(lane) for lane in self.series), default=0.0)

    def short_label(self, lane: str) -> str:
        """The peak in a few characters (``'7 in flight'``, ``'2.4 MB'``), for a margin."""
        if self.name == MEMORY_COUNTER:
            return format_bytes(self.peak(lane))
        return f"{self.peak(lane):g} in flight"

    def label(self, lane: str) -> str:
        if self.name == MEMORY_COUNTER:
            return f"memory (peak {format_bytes(self.peak(lane))})"
        memory = self.peak_memory.get(lane)
        return (f"in flight (peak {self.peak(lane):g}"
                + (f", {format_bytes(memory)})" if memory else ")"))


def memory_strip(timeline: Timeline, wanted: Union[bool, str] = "auto") -> Optional[MemoryStrip]:
    """The strip to draw under each IPU lane, or None.  ``"auto"``: pipelines (timelines
    with phases) with at most 8 IPU lanes whose in-flight count changes; ``"bytes"``: the
    memory counter itself (weights, accumulators and optimizer state all along, activations
    on top), drawn from zero."""
    if wanted not in (True, False, "auto", "bytes"):
        raise ValueError(f"memory must be True, False, 'auto' or 'bytes', got {wanted!r}.")
    if wanted is False or (wanted == "auto" and (
            not timeline.phases or len(timeline.ipu_lanes) > _MAX_STRIPPED_LANES)):
        return None
    name = MEMORY_COUNTER if wanted == "bytes" else IN_FLIGHT_COUNTER
    series: Dict[str, List[Tuple[float, float]]] = {}
    for sample in timeline.counters:
        if sample.name == name:
            series.setdefault(sample.lane, []).append((sample.time, sample.value))
    if not any(len({value for _, value in points}) > 1 for points in series.values()):
        return None  # nothing changes: a flat strip would say nothing
    for points in series.values():
        points.sort()
    peak_memory = {} if timeline.clock == UNIT_CLOCK else {
        ipu_lane(ipu): nbytes for ipu, nbytes in timeline.metrics.peak_memory_bytes.items()}
    return MemoryStrip(series, peak_memory, name)


def followed(event: Event, micro_batch: Optional[int]) -> Optional[bool]:
    """None when no micro-batch is followed or ``event`` carries none; else whether it is
    the followed micro-batch's."""
    if micro_batch is None or event.micro_batch is None:
        return None
    return event.micro_batch == micro_batch


def check_followed(timeline: Timeline, micro_batch: Optional[int]) -> None:
    """A micro-batch to follow must be one the timeline has."""
    if micro_batch is None:
        return
    present = {e.micro_batch for e in timeline.events if e.micro_batch is not None}
    if micro_batch not in present:
        largest = max(present) if present else None
        raise ValueError(f"follow_micro_batch={micro_batch!r}: this trace has "
                         + (f"micro-batches 0 to {largest}." if present
                            else "no micro-batches to follow."))


__all__ = ["MemoryStrip", "memory_strip", "followed", "check_followed", "MEMORY_COLOUR",
           "MEMORY_COUNTER"]
