"""The execution trace as a matplotlib figure: host lane on top, one lane per IPU below.

Matplotlib is imported only when plotting, so the rest of the views load without it.
"""
from __future__ import annotations

import functools
from typing import Dict, List, Optional, Sequence, Tuple

from ipu_emulator.sim.timeline import UNIT_CLOCK, Timeline
from ipu_emulator.views.style import (KIND_COLOURS, OTHER_COLOUR, PHASE_COLOURS,
                                      PIPELINE_ACTION_KINDS, pick_time_unit, resolve_time_unit,
                                      format_seconds, labels_actions, time_unit_scale)

_MAX_LABELLED_PHASES = 40
_MAX_SHADED_RUNS = 200

# Rare, short kinds are drawn above the frequent compute bars so they are not painted over.
_KIND_LAYER = {"stream_copy": 4, "sync": 4, "exchange": 4, "host": 3}


def plot_timeline(timeline: Timeline, ax=None, title: Optional[str] = None, time_unit: str = "auto"):
    """Draw ``timeline`` as an execution trace: host lane on top, one lane per IPU below.

    Colours follow ``KIND_COLOURS``; alternate engine runs are shaded when there are at most
    200 of them.  Returns the matplotlib Axes.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.sim.timeline import simulate_engine_runs
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
        unit, scale = resolve_time_unit(time_unit, timeline.metrics.makespan)
    lanes = timeline.lanes
    row_of = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}  # first lane on top

    bars: Dict[Tuple[str, str], List[Tuple[float, float]]] = {}
    for e in timeline.events:
        bars.setdefault((e.lane, e.kind), []).append((e.start * scale, (e.end - e.start) * scale))
    labelled = labels_actions(timeline)
    for (lane, kind), xranges in bars.items():
        colour = KIND_COLOURS.get(kind, OTHER_COLOUR)
        # An edge in the bar's own colour keeps events narrower than a pixel visible when a
        # whole epoch is drawn; at zoomed-in scales it is imperceptible.  A small pipeline
        # gets white edges instead, so back-to-back actions stay distinguishable.
        edge = "white" if labelled and kind in PIPELINE_ACTION_KINDS else colour
        ax.broken_barh(xranges, (row_of[lane] - 0.4, 0.8), facecolors=colour,
                       edgecolors=edge, linewidth=0.6, zorder=_KIND_LAYER.get(kind, 2))
    if labelled:  # micro-batch numbers in the boxes, as in Graphcore's pipeline diagrams
        fitting_label = _fitting_label_class()
        for e in timeline.events:
            if e.kind in PIPELINE_ACTION_KINDS and e.micro_batch is not None and e.end > e.start:
                # "w": the weight-gradient half of a split backward (zero-bubble's 1W3).
                label = f"w{e.micro_batch}" if "W" in e.name else str(e.micro_batch)
                ax.add_artist(fitting_label(e.start * scale, e.end * scale, row_of[e.lane],
                                            label))

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


@functools.cache
def _fitting_label_class():
    """A micro-batch number that is drawn only when it fits its box at the scale it is drawn
    at (a zoomed-in view shows numbers a whole-run view would overprint), clipped to the axes.
    Made on first use: matplotlib is imported only when plotting."""
    from matplotlib.text import Text

    class FittingLabel(Text):
        def __init__(self, start, end, row, label):
            super().__init__((start + end) / 2, row, label, ha="center", va="center",
                             fontsize="x-small", color="white", zorder=5, clip_on=True)
            self._span = (start, end)

        def draw(self, renderer):
            low, high = self.axes.get_xlim()
            if self._span[1] <= low or self._span[0] >= high:
                return  # out of view
            (left, _), (right, _) = self.axes.transData.transform(
                [(self._span[0], 0), (self._span[1], 0)])
            if right - left >= self.get_window_extent(renderer).width + 2:
                super().draw(renderer)

    return FittingLabel


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


def makespan_text(timeline: Timeline) -> str:
    """The makespan with its clock: ``'1.84 ms (simulated IPU time)'``, or, on the unit-cost
    clock, ``'38 time steps'`` (no seconds: a step is a unit of work, not a duration)."""
    if timeline.clock == UNIT_CLOCK:
        return f"{timeline.metrics.makespan:g} time steps"
    return f"{format_seconds(timeline.metrics.makespan)} ({timeline.clock})"


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
    unit = pick_time_unit(longest) if sharex else "auto"
    for ax, timeline, name in zip(axes[:, 0], timelines, titles):
        m = timeline.metrics
        runs = f"{m.engine_runs} engine run{'s' if m.engine_runs != 1 else ''}"
        heading = f"{name + ': ' if name else ''}makespan {makespan_text(timeline)}, {runs}"
        plot_timeline(timeline, ax=ax, title=heading, time_unit=unit)
    if sharex:
        for ax in axes[:-1, 0]:
            ax.set_xlabel("")
        axes[-1, 0].set_xlim(0, max(longest * time_unit_scale(unit), 1e-12))
    fig.tight_layout()
    return fig
