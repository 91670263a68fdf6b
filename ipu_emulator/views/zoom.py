"""Where to zoom a trace: the stretch of time some steps of a timeline take on the IPUs.

``ipu_window(timeline, ...)`` gives ``(start, end)`` for ``plot_timeline(..., window=...)``:
the IPU events of one engine run, or of some loop iterations, padded by a share of their
width, so a notebook's zoom cell names what it shows instead of computing its limits.

    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.sim.timeline import simulate_engine_runs
    >>> looped = simulate_engine_runs([EngineRun("loop", 10, ComputeCost(forward_flops=1e9),
    ...                                          infeed_bytes_per_iteration=4096)])
    >>> start, end = ipu_window(looped, iterations=range(5))
    >>> start > looped.engine_run_spans[0][0], end < looped.metrics.makespan   # after the launch
    (True, True)
"""
from __future__ import annotations

from typing import Iterable, Optional, Tuple, Union

from ipu_emulator.sim.timeline import Timeline


def ipu_window(timeline: Timeline, engine_run: Optional[int] = None,
               iterations: Union[int, Iterable[int], None] = None,
               margin: float = 0.0) -> Tuple[float, float]:
    """``(start, end)``, in the timeline's clock, of the IPU events of ``engine_run`` (counted
    from 0) and/or of the loop ``iterations`` given (one or several, counted over the whole
    timeline), widened on each side by ``margin`` times their width.  With neither, all the
    IPU events.  Raises ``ValueError`` if nothing matches."""
    if isinstance(iterations, int):
        iterations = (iterations,)
    wanted = set(iterations) if iterations is not None else None
    events = [e for e in timeline.events
              if e.ipu is not None
              and (engine_run is None or e.engine_run == engine_run)
              and (wanted is None or e.iteration in wanted)]
    if not events:
        raise ValueError(f"ipu_window: no IPU events in engine run {engine_run} and "
                         f"iterations {sorted(wanted) if wanted is not None else 'any'}")
    start, end = min(e.start for e in events), max(e.end for e in events)
    pad = margin * (end - start)
    return start - pad, end + pad


__all__ = ["ipu_window"]
