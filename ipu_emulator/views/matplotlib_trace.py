"""The execution trace as a matplotlib figure: host lane on top, one lane per IPU below.

Matplotlib is imported only when plotting, so the rest of the views load without it.
"""
from __future__ import annotations

import functools
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ipu_emulator.sim.timeline import UNIT_CLOCK, Timeline
from ipu_emulator.views.strips import (MEMORY_COLOUR, MemoryStrip, check_followed, followed,
                                       memory_strip)
from ipu_emulator.views.style import (OTHER_COLOUR, PHASE_ALPHA, PHASE_COLOURS,
                                      PIPELINE_ACTION_KINDS, STYLE_ORDER, colour_of,
                                      drawn_phases,
                                      format_seconds, keys_present, kind_of, labels_actions,
                                      legend_name, phase_legend_name, phase_short, style_key,
                                      pick_time_unit, resolve_time_unit, time_formatter)
from ipu_emulator.views.time_axis import FoldedTime, idle_stretches

_MAX_LABELLED_PHASES = 40
_MAX_SHADED_RUNS = 200

# Rare, short kinds are drawn above the frequent compute bars so they are not painted over.
_KIND_LAYER = {"stream_copy": 4, "sync": 4, "exchange": 4, "host": 3}
_DRAWN_AT_TRUE_WIDTH = frozenset({"stream_copy", "sync", "exchange"})
# Every text of a trace is drawn at the size of its tick labels (matplotlib's "medium"):
# smaller text (6-7 px on a screen) is not read.
TEXT_SIZE = "medium"
_LEGEND_COLUMNS = 4  # a comparison's legend, under its traces


def plot_timeline(timeline: Timeline, ax=None, title: Optional[str] = None,
                  time_unit: str = "auto", fold_idle: bool = True,
                  memory: Union[bool, str] = "auto", follow_micro_batch: Optional[int] = None,
                  window: Optional[Tuple[float, float]] = None,
                  time_axis: Optional[FoldedTime] = None):
    """Draw ``timeline`` as an execution trace: host lane on top, one lane per IPU below.

    Colours follow ``KIND_COLOURS``; alternate engine runs are shaded when there are at most
    200 of them.  ``fold_idle`` draws a long stretch with every IPU idle (an engine-run
    launch before a short pipeline) as a narrow hatched band with its length written on it
    (``views.time_axis``).  ``memory`` adds a strip under each IPU lane with its memory (or,
    in unit-cost mode, its micro-batches in flight) over time; ``"auto"``: for pipelines.
    ``follow_micro_batch=k`` fades every other micro-batch's boxes, so one micro-batch can be
    followed across the IPUs.  ``window=(start, end)`` draws only that stretch of time (in
    the timeline's clock: seconds, or steps), e.g. two weight updates of a long run; use it
    rather than ``ax.set_xlim``, which cannot know where folds moved the times.  Returns
    the matplotlib Axes.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.sim.timeline import simulate_engine_runs
    >>> tl = simulate_engine_runs([EngineRun("p", 1, ComputeCost(forward_flops=1e9))] * 4)
    >>> [t.get_text() for t in plot_timeline(tl).get_yticklabels()][::-1]  # top to bottom
    ['host', 'IPU0']
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    check_followed(timeline, follow_micro_batch)
    if timeline.clock == UNIT_CLOCK:  # unit-cost pipelines count time steps, not seconds
        unit, scale = "", 1.0
    else:
        unit, scale = resolve_time_unit(time_unit, timeline.metrics.makespan)
    if time_axis is None:
        start, end = window if window is not None else (0.0, timeline.metrics.makespan)
        time_axis = FoldedTime.build(idle_stretches([timeline], start, end), start, end,
                                     fold_idle)
    # Only what the window shows (an event outside it would be drawn squashed at its edge).
    shown = [e for e in timeline.events
             if e.end >= time_axis.start and e.start <= time_axis.end]
    strip = memory_strip(timeline, memory)
    rows = _Rows(timeline.lanes, strip)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 * rows.height + 1.2))

    def x(time: float) -> float:
        return time_axis.x(time) * scale

    bars: Dict[Tuple[str, str, Optional[bool]], List[Tuple[float, float]]] = {}
    for e in shown:
        bars.setdefault((e.lane, style_key(e), followed(e, follow_micro_batch)), []).append(
            (x(e.start), x(e.end) - x(e.start)))
    labelled = labels_actions(timeline)
    for (lane, key, focus), xranges in bars.items():
        colour = colour_of(key)
        kind = kind_of(key)
        # An edge in the bar's own colour keeps compute narrower than a pixel visible when a
        # whole epoch is drawn; at zoomed-in scales it is imperceptible.  Copies, syncs and
        # exchanges get none: widened to a pixel each, a long run's thousands of them would
        # paint over its compute.  A small pipeline gets white edges, so back-to-back actions
        # stay distinguishable; the followed micro-batch gets black ones.
        edge = ("black" if focus else "white" if labelled and kind in PIPELINE_ACTION_KINDS
                else colour)
        width = 1.2 if focus else 0.6 if kind not in _DRAWN_AT_TRUE_WIDTH or labelled else 0
        ax.broken_barh(xranges, (rows.y[lane] - 0.4, 0.8), facecolors=colour,
                       edgecolors=edge, linewidth=width, gid=f"kind:{legend_name(key)}",
                       alpha=0.25 if focus is False else 1.0,
                       zorder=_KIND_LAYER.get(kind, 2) + (1 if focus else 0))
    if labelled:  # micro-batch numbers in the boxes, as in Graphcore's pipeline diagrams
        fitting_label = _fitting_label_class()
        for e in shown:
            if (e.kind in PIPELINE_ACTION_KINDS and e.micro_batch is not None and e.end > e.start
                    and followed(e, follow_micro_batch) is not False):
                # "w": the weight-gradient half of a split backward (zero-bubble's 1W3).
                label = f"w{e.micro_batch}" if "W" in e.name else str(e.micro_batch)
                ax.add_artist(fitting_label(x(e.start), x(e.end), rows.y[e.lane], label))
    if strip is not None:
        _draw_strips(ax, strip, rows, x, time_axis.end)

    # Engine runs, phases and folds are IPU matters: the host lane is tinted only by the
    # boxes of the host's own work.
    ipu_low, ipu_high = rows.ipu_span(timeline.ipu_lanes)
    spans = timeline.engine_run_spans
    if 1 < len(spans) <= _MAX_SHADED_RUNS:
        shaded = [(x(s), x(e) - x(s)) for s, e in spans[1::2]]
        ax.broken_barh(shaded, (ipu_low, ipu_high - ipu_low), facecolors="#000000",
                       alpha=0.06, linewidth=0, zorder=0)

    ax.set_yticks(rows.ticks)
    ax.set_yticklabels(rows.tick_labels)
    for label, small in zip(ax.get_yticklabels(), rows.small_ticks):
        if small:  # a strip's name: the tick labels' size, in the strip's colour
            label.set_color(MEMORY_COLOUR)
    ax.set_ylim(rows.bottom, rows.top)
    ax.set_xlim(0, max(x(time_axis.end), 1e-12))
    phases = [(name, start, end) for name, start, end in drawn_phases(timeline)
              if end > time_axis.start and start < time_axis.end]  # those in the window
    _shade_phases(ax, phases, x, rows, ipu_low, ipu_high)
    _draw_folds(ax, time_axis, x, ipu_low, ipu_high, timeline.clock)
    if time_axis.folds or time_axis.start != 0:
        ticks = time_axis.ticks(scale)
        ax.set_xticks([x(t) for t in ticks])
        ax.set_xticklabels([f"{t * scale:g}" for t in ticks])
    ax.set_xlabel(f"{timeline.clock} ({unit})" if unit else timeline.clock)
    # Left-aligned, a size down: a long title runs on over the legend, not off the figure.
    ax.set_title(title if title is not None else timeline.title, loc="left", fontsize="medium",
                 pad=18 if phases else None)
    handles = [Patch(facecolor=colour_of(key), label=legend_name(key))
               for key in keys_present(shown)]
    if follow_micro_batch is not None:
        handles.append(Patch(facecolor="white", edgecolor="black", linewidth=1.2,
                             label=f"micro-batch {follow_micro_batch}"))
    if strip is not None:
        handles.append(Patch(facecolor=MEMORY_COLOUR, alpha=0.45, label=strip.name))
    if time_axis.folds:
        handles.append(Patch(facecolor="white", edgecolor="#777777", hatch="////",
                             label="all IPUs idle (folded)"))
    for name in dict.fromkeys(name for name, _, _ in phases):
        colour = PHASE_COLOURS.get(name, OTHER_COLOUR)
        handles.append(Patch(facecolor=_faded(colour), edgecolor=colour, linewidth=0.8,
                             label=phase_legend_name(name)))
    _one_legend(ax, handles)
    return ax


def _in_legend_order(handles: Dict[str, object]) -> list:
    """The shared legend's entries: the kinds in their usual order, then the other entries
    (followed micro-batch, strip, folds), then the phases, in the order a pass has them."""
    kinds = [legend_name(key) for key in STYLE_ORDER]
    phases = [phase_legend_name(name) for name in PHASE_COLOURS]

    def rank(item):
        index, label = item
        if label in kinds:
            return (0, kinds.index(label))
        if label in phases:
            return (2, phases.index(label))
        return (1, index)

    order = sorted(enumerate(handles), key=rank)
    return [handles[label] for _, label in order]


def _fractions(ax, low: float, high: float) -> Tuple[float, float]:
    """Data y ``low``..``high`` as fractions of the axes' height (``axvspan``'s ymin, ymax)."""
    bottom, top = ax.get_ylim()
    return (low - bottom) / (top - bottom), (high - bottom) / (top - bottom)


def _faded(colour: str):
    """A phase's shading as drawn: its colour at ``PHASE_ALPHA`` over white (a legend patch
    with ``alpha`` would fade its edge too)."""
    from matplotlib.colors import to_rgb

    return tuple(1 - PHASE_ALPHA * (1 - c) for c in to_rgb(colour))


def _one_legend(ax, handles) -> None:
    """One legend per figure: traces drawn on several Axes of one figure (``plot_comparison``,
    or a notebook's own ``plt.subplots``) share one legend with every entry of each, right of
    the topmost of the rightmost traces.  The other traces keep a legend of their own, hidden
    (``ax.get_legend()`` still works on each)."""
    figure = ax.figure
    traces = getattr(figure, "_ipu_trace_legend", None)
    if traces is None:
        traces = figure._ipu_trace_legend = {"axes": [], "handles": {}}
    if ax not in traces["axes"]:
        traces["axes"].append(ax)
    for handle in handles:
        traces["handles"].setdefault(handle.get_label(), handle)
    traces["axes"] = [a for a in traces["axes"] if a in figure.axes]
    style = {"loc": "upper left", "bbox_to_anchor": (1.0, 1.0), "fontsize": TEXT_SIZE,
             "frameon": False}
    if handles:
        ax.legend(handles=handles, **style)
    if not traces["handles"]:
        return
    host = max(traces["axes"], key=lambda a: (round(a.get_position().x1, 3),
                                              a.get_position().y1))
    host.legend(handles=_in_legend_order(traces["handles"]), **style)
    for other in traces["axes"]:
        if other is not host and other.get_legend() is not None:
            other.get_legend().set_visible(False)


class _Rows:
    """Where each lane (and each IPU's memory strip, under it) sits on the y axis: the first
    lane on top, a lane 0.8 high, a strip 0.35."""

    STRIP = 0.35

    def __init__(self, lanes: Sequence[str], strip: Optional[MemoryStrip]):
        self.y: Dict[str, float] = {}
        self.strip_base: Dict[str, float] = {}
        self.ticks: List[float] = []
        self.tick_labels: List[str] = []
        self.small_ticks: List[bool] = []
        y = 0.0
        for lane in lanes:
            self.y[lane] = y
            self.ticks.append(y)
            self.tick_labels.append(lane)
            self.small_ticks.append(False)
            y -= 1.0
            if strip is not None and lane in strip.series:
                base = y + 0.55 - self.STRIP
                self.strip_base[lane] = base
                self.ticks.append(base + self.STRIP / 2)
                self.tick_labels.append(strip.label(lane).replace(" (", "\n(", 1))
                self.small_ticks.append(True)
                y -= 0.45
        self.top, self.bottom = 0.5, y + 0.5
        # Bottom to top, as matplotlib lists ticks.
        for ticks in (self.ticks, self.tick_labels, self.small_ticks):
            ticks.reverse()

    @property
    def height(self) -> float:
        return self.top - self.bottom

    def ipu_span(self, ipu_lanes: Sequence[str]) -> Tuple[float, float]:
        """The y range of the IPU lanes and their strips (the host lane, on top, left out)."""
        ys = [self.y[lane] for lane in ipu_lanes if lane in self.y]
        return self.bottom, (max(ys) + 0.5 if ys else self.top)


def _draw_strips(ax, strip: MemoryStrip, rows: _Rows, x, end: float) -> None:
    """Each IPU's counter as a filled step line, all on one scale, under its lane."""
    peak = strip.scale_peak or 1.0
    for lane, points in strip.series.items():
        if lane not in rows.strip_base:
            continue
        base = rows.strip_base[lane]
        xs = [x(t) for t, _ in points] + [x(end)]
        ys = [base + rows.STRIP * value / peak for _, value in points]
        ys.append(ys[-1])
        ax.fill_between(xs, base, ys, step="post", color=MEMORY_COLOUR, alpha=0.45,
                        linewidth=0, zorder=1)
        ax.plot([xs[0], xs[-1]], [base, base], color=MEMORY_COLOUR, linewidth=0.4, zorder=1)


def _draw_folds(ax, time_axis: FoldedTime, x, low: float, high: float, clock: str) -> None:
    """Each folded stretch: a hatched band over the IPU lanes (all idle there; the host lane
    keeps its boxes, in their colours) with its length written up it where that fits."""
    text_of = time_formatter(clock)
    fitting_label = _fitting_label_class()
    for a, b in time_axis.folds:
        ax.axvspan(x(a), x(b), *_fractions(ax, low, high), facecolor="white",
                   edgecolor="#777777", hatch="////", linewidth=0, alpha=0.6, zorder=6)
        ax.add_artist(fitting_label(x(a), x(b), (low + high) / 2, f"{text_of(b - a)} idle",
                                    alternatives=(text_of(b - a),), height=(low, high),
                                    rotation=90, color="#333333", zorder=7,
                                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1}))


@functools.cache
def _fitting_label_class():
    """A label drawn only when it fits the time span it names at the scale it is drawn at: a
    micro-batch number in its box (a zoomed-in view shows numbers a whole-run view would
    overprint; clipped to the axes), or a phase's name above it (``style`` changes the
    defaults).  Made on first use: matplotlib is imported only when plotting."""
    from matplotlib.text import Text

    class FittingLabel(Text):
        """``alternatives``: shorter texts to try in turn when ``label`` does not fit (a
        phase's short name); ``height=(low, high)``: the data-y range the text must also fit
        in (a rotated note)."""

        def __init__(self, start, end, row, label, alternatives=(), height=None, **style):
            style = {"ha": "center", "va": "center", "fontsize": TEXT_SIZE, "color": "white",
                     "zorder": 5, "clip_on": True, **style}
            super().__init__((start + end) / 2, row, label, **style)
            self._span = (start, end)
            self._texts = (label, *alternatives)
            self._height = height
            self.shown: Optional[str] = None  # the text the last draw showed, if any

        def draw(self, renderer):
            self.shown = None
            low, high = self.axes.get_xlim()
            if self._span[1] <= low or self._span[0] >= high:
                return  # out of view
            (left, bottom), (right, top) = self.axes.transData.transform(
                [(self._span[0], self._height[0] if self._height else 0),
                 (self._span[1], self._height[1] if self._height else 0)])
            for text in self._texts:
                self.set_text(text)
                width, height = self._size(renderer)
                if right - left >= width + 2 and (
                        self._height is None or top - bottom >= height + 2):
                    super().draw(renderer)
                    self.shown = text
                    return
            self.set_text(self._texts[0])

        def _size(self, renderer) -> Tuple[float, float]:
            """The drawn text's width and height in pixels.  A trace has hundreds of labels
            and few distinct texts (micro-batch numbers, phase names), and measuring one is a
            text layout: the size is kept per text, font, rotation, resolution and renderer
            (what it depends on; as matplotlib keys its own text metrics).  Drawing and
            checking a pipeline's trace takes 0.84 of the CPU it took measuring every label
            (bench/drawing.py, on a quiet machine)."""
            # The renderer that measures: a vector format's own inside matplotlib's mixed-mode
            # renderer (SVG and PDF measure the same text 0.003 px apart).
            measurer = type(renderer.get_text_width_height_descent.__self__)
            key = (self.get_text(), self.get_fontproperties(), self.get_rotation(),
                   self.get_usetex(), self.figure.dpi, measurer)
            size = _LABEL_SIZES.get(key)
            if size is None:
                extent = self.get_window_extent(renderer)
                size = (extent.width, extent.height)
                if "\n" in key[0] or self.get_wrap():   # its size depends on more than the key
                    return size
                if len(_LABEL_SIZES) >= _LABEL_SIZES_KEPT:
                    _LABEL_SIZES.clear()
                # A copy of the font in the key: the label's own may change after.
                _LABEL_SIZES[(key[0], key[1].copy(), *key[2:])] = size
            return size

    return FittingLabel


# FittingLabel's measured sizes; cleared when full (a long session draws many idle notes).
_LABEL_SIZES: Dict[tuple, Tuple[float, float]] = {}
_LABEL_SIZES_KEPT = 2048


def _shade_phases(ax, phases, x, rows: "_Rows", low: float, high: float) -> None:
    """Shade each pipeline phase behind the IPU lanes and name it above the lanes: in full
    where the name fits, else its short form ("up", "down", "WU"); the legend gives both."""
    for name, start, end in phases:
        ax.axvspan(x(start), x(end), *_fractions(ax, low, high),
                   color=PHASE_COLOURS.get(name, OTHER_COLOUR), alpha=PHASE_ALPHA, linewidth=0,
                   zorder=0, gid=f"phase:{name}")
        if len(phases) <= _MAX_LABELLED_PHASES:
            # Each name is kept within its own phase, so neighbours never overprint.
            ax.add_artist(_fitting_label_class()(x(start), x(end), rows.top, name,
                                                 alternatives=(phase_short(name),),
                                                 va="bottom", color="#333333", clip_on=False))


def makespan_text(timeline: Timeline) -> str:
    """The makespan with its clock: ``'1.84 ms (simulated IPU time)'``, or, on the unit-cost
    clock, ``'38 time steps'`` (no seconds: a step is a unit of work, not a duration)."""
    if timeline.clock == UNIT_CLOCK:
        return f"{timeline.metrics.makespan:g} time steps"
    return f"{format_seconds(timeline.metrics.makespan)} ({timeline.clock})"


def plot_comparison(timelines: Sequence[Timeline], titles: Optional[Sequence[str]] = None,
                    sharex: bool = True, fold_idle: bool = True,
                    memory: Union[bool, str] = "auto", follow_micro_batch: Optional[int] = None,
                    window: Optional[Tuple[float, float]] = None):
    """One trace per timeline, stacked on a shared time axis; returns the Figure.

    Each subplot's title gives the makespan and, for a pipeline, its bubble (else the number
    of engine runs), so configurations can be compared at a glance.  ``fold_idle``,
    ``memory``, ``follow_micro_batch`` and ``window`` are as in ``plot_timeline``; on a
    shared axis only stretches idle in every timeline are folded.
    """
    import matplotlib.pyplot as plt

    if not timelines:
        raise ValueError("plot_comparison needs at least one timeline.")
    titles = list(titles) if titles is not None else [t.title for t in timelines]
    if len(titles) != len(timelines):
        raise ValueError(f"Got {len(titles)} titles for {len(timelines)} timelines.")
    heights = [_Rows(t.lanes, memory_strip(t, memory)).height + 1.5 for t in timelines]
    # Constrained layout keeps room for the traces' one legend under them (an Axes' legend
    # taller than its Axes would push the traces below it apart).
    fig, axes = plt.subplots(len(timelines), 1, sharex=sharex, squeeze=False,
                             figsize=(10, 0.5 * sum(heights) + 0.5), layout="constrained",
                             gridspec_kw={"height_ratios": heights})
    longest = max(t.metrics.makespan for t in timelines)
    unit = pick_time_unit(longest) if sharex else "auto"
    start, end = window if window is not None else (0.0, longest)
    shared_axis = (FoldedTime.build(idle_stretches(timelines, start, end), start, end,
                                    fold_idle) if sharex else None)
    for ax, timeline, name in zip(axes[:, 0], timelines, titles):
        plot_timeline(timeline, ax=ax, title=f"{name + ': ' if name else ''}"
                      f"{comparison_heading(timeline)}", time_unit=unit, fold_idle=fold_idle,
                      memory=memory, follow_micro_batch=follow_micro_batch, window=window,
                      time_axis=shared_axis)
    if sharex:
        for ax in axes[:-1, 0]:
            ax.set_xlabel("")
    shared = getattr(fig, "_ipu_trace_legend", {}).get("handles")
    if shared:  # the one legend of the comparison, under the traces: they keep the width
        for ax in axes[:, 0]:
            if ax.get_legend() is not None:
                ax.get_legend().set_visible(False)
        fig.legend(handles=_in_legend_order(shared), loc="outside lower center",
                   ncol=min(len(shared), _LEGEND_COLUMNS), fontsize=TEXT_SIZE, frameon=False)
    return fig


def comparison_heading(timeline: Timeline) -> str:
    """``'makespan 38 time steps, bubble 15.8 %'`` for a pipeline, else the makespan and the
    number of engine runs."""
    m = timeline.metrics
    if timeline.phases:
        return f"makespan {makespan_text(timeline)}, bubble {100 * m.bubble_fraction:.1f} %"
    return (f"makespan {makespan_text(timeline)}, "
            f"{m.engine_runs} engine run{'s' if m.engine_runs != 1 else ''}")
