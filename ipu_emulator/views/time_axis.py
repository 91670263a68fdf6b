"""A time axis that folds long idle stretches, shared by the matplotlib and SVG traces.

A pipeline that runs for half a millisecond after a one-millisecond engine-run launch would
spend two thirds of the picture on a grey host bar.  Each stretch in which no IPU does
anything and that is longer than ``FOLD_MIN_SHARE`` of the run is drawn as a narrow band
instead (``FOLD_WIDTH_SHARE`` of the axis) with its duration written on it; the rest keeps
its true scale.  Only a few such stretches are folded: when there are many, the idle time
is the lesson (a per-step loop waiting on the host) and stays drawn to scale.

    >>> axis = FoldedTime.build([(0.0, 1.0)], start=0.0, end=1.5)
    >>> axis.folds
    ((0.0, 1.0),)
    >>> round(axis.x(1.0), 3), round(axis.x(1.5), 3)   # the fold takes 6 % of the axis
    (0.032, 0.532)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from ipu_emulator.sim.timeline import Timeline

FOLD_MIN_SHARE = 0.2     # fold idle stretches longer than this share of the visible time
FOLD_WIDTH_SHARE = 0.06  # each fold is drawn this share of the axis wide
MAX_FOLDS = 3            # more idle stretches than this: the idle time is the lesson


def idle_stretches(timelines: Sequence[Timeline], start: float, end: float
                   ) -> List[Tuple[float, float]]:
    """Stretches of ``[start, end]`` in which no IPU lane of any timeline has an event."""
    busy = sorted((e.start, e.end) for t in timelines for e in t.events
                  if e.ipu is not None and e.end > start and e.start < end)
    stretches, at = [], start
    for begin, finish in busy:
        if begin > at:
            stretches.append((at, begin))
        at = max(at, finish)
    if end > at:
        stretches.append((at, end))
    return stretches


@dataclass(frozen=True)
class FoldedTime:
    """Maps a time in ``[start, end]`` to a display coordinate in ``[0, width]`` (in the
    time's own units: the unfolded scale is the true one), with ``folds`` drawn narrow."""

    start: float
    end: float
    folds: Tuple[Tuple[float, float], ...] = ()
    fold_width: float = 0.0

    @classmethod
    def build(cls, stretches: Sequence[Tuple[float, float]], start: float, end: float,
              fold: bool = True) -> "FoldedTime":
        """Fold the ``stretches`` worth folding (see the module doc); ``fold=False`` keeps
        every stretch to scale."""
        span = max(end - start, 1e-300)
        long_ones = tuple((a, b) for a, b in stretches if (b - a) > FOLD_MIN_SHARE * span)
        if not fold or not long_ones or len(long_ones) > MAX_FOLDS:
            return cls(start, end)
        kept = span - sum(b - a for a, b in long_ones)
        # Each fold takes FOLD_WIDTH_SHARE of the final width w: w = kept + n * share * w.
        width = kept / (1 - len(long_ones) * FOLD_WIDTH_SHARE)
        return cls(start, end, long_ones, FOLD_WIDTH_SHARE * width)

    @property
    def width(self) -> float:
        return self.x(self.end)

    def x(self, time: float) -> float:
        time = min(max(time, self.start), self.end)
        x = time - self.start
        for a, b in self.folds:
            if time >= b:
                x += self.fold_width - (b - a)
            elif time > a:
                x += (time - a) / (b - a) * self.fold_width - (time - a)
        return x

    def segments(self) -> List[Tuple[float, float]]:
        """The unfolded stretches of time, in order."""
        segments, at = [], self.start
        for a, b in self.folds:
            if a > at:
                segments.append((at, a))
            at = b
        if self.end > at:
            segments.append((at, self.end))
        return segments

    def ticks(self, scale: float, target: int = 8) -> List[float]:
        """Round tick times (in seconds or steps, not scaled) for each unfolded segment,
        about ``target`` over the whole axis; none inside a fold."""
        ticks: List[float] = []
        width = max(self.width, 1e-300)
        for a, b in self.segments():
            share = (self.x(b) - self.x(a)) / width
            if share < 0.02:
                continue  # a sliver between folds: no room for ticks
            count = max(2, round(target * share))
            for value in nice_ticks(a * scale, b * scale, count):
                time = value / scale
                if any(low < time < high for low, high in self.folds):
                    continue  # rounded past the segment's end, into a fold
                if not ticks or self.x(time) - self.x(ticks[-1]) > 0.04 * width:
                    ticks.append(time)
        return ticks


def nice_ticks(low: float, high: float, target: int = 8) -> List[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [low, high].

    >>> nice_ticks(0, 10)
    [0, 2, 4, 6, 8, 10]
    """
    span = high - low
    raw = span / target
    if raw <= 0:  # an empty span, or one too small to divide
        return [low]
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    digits = max(0, 1 - math.floor(math.log10(step)))  # enough to print the step exactly
    ticks = []
    k = math.ceil(low / step - 1e-9)
    while k * step <= high + step * 1e-9:
        ticks.append(round(k * step, digits))
        k += 1
    return ticks


__all__ = ["FoldedTime", "idle_stretches", "nice_ticks", "FOLD_MIN_SHARE",
           "FOLD_WIDTH_SHARE", "MAX_FOLDS"]
