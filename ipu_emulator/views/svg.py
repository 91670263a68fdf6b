"""The execution trace as inline SVG: the widgets' fast view of a simulated timeline.

Matplotlib takes 100-300 ms to draw a pipeline with its micro-batch labels, too slow for a
control that should feel instant; writing the same picture as SVG text takes a few
milliseconds.  The picture follows ``views.plot_timeline``: one lane per IPU (host on top),
``KIND_COLOURS``, shaded pipeline phases, micro-batch numbers in the boxes, an axis that
names its clock.  Hovering over a box shows what it is (inline SVG keeps ``<title>``
tooltips working in JupyterLab).

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> timeline = simulate_pipeline(unit_stages(4), "grouped", gradient_accumulation_count=8,
    ...                              unit_cost=True)
    >>> svg = timeline_svg([timeline])
    >>> svg.startswith("<svg") and "IPU3" in svg
    True

Pure Python (no matplotlib, no TensorFlow); neighbouring events narrower than a pixel are
merged into one box (coloured by the kind that fills most of it), so even a 64-stage, 1024-micro-batch run stays a small document.
"""
from __future__ import annotations

import math
from html import escape
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Union

from ipu_emulator.sim.timeline import COMPUTE_KINDS, UNIT_CLOCK, Event, Timeline
from ipu_emulator.views.strips import (MEMORY_COLOUR, MemoryStrip, check_followed, followed,
                                       memory_strip)
from ipu_emulator.views.style import (OTHER_COLOUR, PHASE_ALPHA, PHASE_COLOURS,
                                      PIPELINE_ACTION_KINDS, STYLE_ORDER, colour_of,
                                      drawn_phases, legend_name, phase_legend_name, phase_short,
                                      pick_time_unit, style_key, time_formatter,
                                      time_unit_scale)
from ipu_emulator.views.time_axis import FoldedTime, idle_stretches, nice_ticks

LEFT = 86          # room for the lane names and the strips' peaks
RIGHT = 16
LANE_HEIGHT = 24   # up to _FULL_HEIGHT_LANES lanes; more lanes share that height
LANE_GAP = 4
_FULL_HEIGHT_LANES = 16
_MIN_LANE_HEIGHT = 6
_MIN_LABELLED_HEIGHT = 14  # micro-batch numbers and lane names need this much
TITLE_HEIGHT = 22
PHASE_ROW = 16     # phase names sit just above the lanes
AXIS_HEIGHT = 34   # tick labels and the clock's name
LEGEND_HEIGHT = 24
_FONT = "font-family:sans-serif"
_MAX_SHADED_RUNS = 200
# Every text is at least the size of the tick labels (the picture's 11 px): smaller text
# (the 9-10 px of earlier versions) is not read.
TEXT_PX = 11
_LABEL_CHAR_PX = 0.65 * TEXT_PX  # rough width of one digit (as views.legibility estimates it)
_CHAR_PX = 0.62 * TEXT_PX        # and of another character
STRIP_HEIGHT = 12  # the in-flight strip under each IPU lane of a pipeline
FADED = 0.25       # opacity of the micro-batches not followed


def timeline_svg(timelines: Sequence[Timeline], width: int = 960,
                 start: Optional[float] = None, end: Optional[float] = None,
                 titles: Optional[Sequence[str]] = None, fold_idle: bool = True,
                 memory: Union[bool, str] = "auto",
                 follow_micro_batch: Optional[int] = None, min_box_px: float = 0.0) -> str:
    """Stack ``timelines`` on one shared time axis and return an ``<svg>`` element.

    ``start``/``end`` bound the visible window (in the timelines' clock; default: from 0 to
    the longest makespan).  ``titles`` replace the timelines' own titles.  ``fold_idle``,
    ``memory`` and ``follow_micro_batch`` are as in ``views.plot_timeline``: long stretches
    with every IPU idle drawn narrow, an in-flight strip under each IPU lane, one
    micro-batch outlined and the others faded.  ``min_box_px`` widens the picture (up to
    ``MAX_WIDTH``; the widgets scroll it) until every IPU lane that computes has a compute
    box at least that wide: 64 micro-batches at real costs would otherwise be hairlines.
    """
    if not timelines:
        raise ValueError("timeline_svg needs at least one timeline")
    for timeline in timelines:
        check_followed(timeline, follow_micro_batch)
    unit_cost = timelines[0].clock == UNIT_CLOCK
    start = 0.0 if start is None else start
    end = max(t.metrics.makespan for t in timelines) if end is None else end
    end = max(end, start + 1e-12)
    unit = "" if unit_cost else pick_time_unit(end - start)
    scale = 1.0 if unit_cost else time_unit_scale(unit)
    folded = FoldedTime.build(idle_stretches(timelines, start, end), start, end, fold_idle)
    if min_box_px > 0:
        width = max(width, _width_for_boxes(timelines, folded, min_box_px))
    axis = _Axis(folded, LEFT, width - RIGHT)

    parts: List[str] = []
    y = 0.0
    drawn: Set[str] = set()
    strip_names: List[str] = []
    phases: List[str] = []
    for index, timeline in enumerate(timelines):
        shaded = drawn_phases(timeline)
        phases += [name for name in dict.fromkeys(
            name for name, begin, finish in shaded
            if finish > start and begin < end) if name not in phases]  # those in the window
        title = titles[index] if titles else timeline.title
        strip = memory_strip(timeline, memory)
        if strip is not None and strip.name not in strip_names:
            strip_names.append(strip.name)
        y = _panel(parts, timeline, title, axis, y, scale, unit, drawn, strip,
                   follow_micro_batch, shaded)
    kinds = [k for k in STYLE_ORDER if k in drawn] + sorted(drawn - set(STYLE_ORDER))
    extras = [(name, MEMORY_COLOUR, ' fill-opacity="0.45"') for name in strip_names] + (
        [("all IPUs idle (folded)", "url(#fold)", "")] if folded.folds else []) + (
        [(f"micro-batch {follow_micro_batch}", "none", ' stroke="#000" stroke-width="1.5"')]
        if follow_micro_batch is not None else []) + [
        (phase_legend_name(name), PHASE_COLOURS.get(name, OTHER_COLOUR),
         f' fill-opacity="{PHASE_ALPHA}" stroke="{PHASE_COLOURS.get(name, OTHER_COLOUR)}"')
        for name in phases]
    y = _legend(parts, kinds, y, width, extras)
    height = math.ceil(y)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" style="{_FONT};font-size:11px;background:#fff">'
            + _FOLD_PATTERN + "".join(parts) + "</svg>")


MAX_WIDTH = 6000  # pixels: wider, a trace is better read one pass at a time


def _width_for_boxes(timelines, folded: FoldedTime, min_box_px: float) -> int:
    """The picture width at which each computing IPU lane's longest compute box (as drawn,
    clipped to the window) is ``min_box_px`` wide, capped at ``MAX_WIDTH``."""
    longest: Dict[tuple, float] = {}
    for index, timeline in enumerate(timelines):
        for e in timeline.events:
            if e.ipu is not None and e.kind in COMPUTE_KINDS:
                drawn = folded.x(e.end) - folded.x(e.start)
                key = (index, e.lane)
                longest[key] = max(longest.get(key, 0.0), drawn)
    shortest = min((d for d in longest.values() if d > 0), default=0.0)
    if shortest <= 0:
        return 0
    return min(MAX_WIDTH, math.ceil(LEFT + RIGHT + min_box_px * folded.width / shortest))


# The hatching of a folded stretch of time.
_FOLD_PATTERN = ('<defs><pattern id="fold" width="6" height="6" patternUnits="userSpaceOnUse" '
                 'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/>'
                 '<line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="1.5"/>'
                 '</pattern></defs>')


class _Axis:
    """Maps a time to an x pixel, through the folded time axis."""

    def __init__(self, folded: FoldedTime, left: float, right: float):
        self.folded = folded
        self.start, self.end, self.left, self.right = folded.start, folded.end, left, right
        self.pixels_per_unit = (right - left) / max(folded.width, 1e-300)

    def x(self, time: float) -> float:
        return self.left + self.folded.x(time) * self.pixels_per_unit

    def visible(self, begin: float, finish: float) -> bool:
        return finish >= self.start and begin <= self.end


def _panel(parts: List[str], timeline: Timeline, title: str, axis: _Axis, top: float,
           scale: float, unit: str, kinds_drawn_so_far: Set[str],
           strip: Optional[MemoryStrip], follow: Optional[int], phases) -> float:
    """Draw one timeline, its ``phases`` (``style.drawn_phases``) shaded, from ``top`` down
    (adding the kinds drawn to ``kinds_drawn_so_far``); return the y below it."""
    parts.append(f'<text x="{axis.left}" y="{top + 15:.1f}" font-weight="bold" '
                 f'font-size="12px">{escape(title)}</text>')
    lanes_top = top + TITLE_HEIGHT + (PHASE_ROW if phases else 0)
    height = lane_height(len(timeline.lanes))
    gap = LANE_GAP if height == LANE_HEIGHT else 1
    row_top: Dict[str, float] = {}
    strip_top: Dict[str, float] = {}
    y = lanes_top
    for lane in timeline.lanes:
        row_top[lane] = y + gap / 2
        y += height + gap
        if strip is not None and lane in strip.series:
            strip_top[lane] = y - gap / 2
            y += STRIP_HEIGHT + gap
    lanes_bottom = y
    # Engine runs, phases and folds are IPU matters: the host lane is tinted only by the
    # boxes of the host's own work.
    ipu_tops = [row_top[lane] - gap / 2 for lane in timeline.ipu_lanes if lane in row_top]
    ipus_top = min(ipu_tops) if ipu_tops else lanes_top

    _phases(parts, phases, axis, ipus_top, lanes_bottom, lanes_top)
    _engine_runs(parts, timeline, axis, ipus_top, lanes_bottom)
    # With many lanes, name every k-th so the names never overlap.
    name_every = max(1, math.ceil(_MIN_LABELLED_HEIGHT / (height + gap)))
    for index, lane in enumerate(timeline.lanes):
        if index % name_every == 0:
            parts.append(f'<text x="{axis.left - 6}" y="{row_top[lane] + height / 2 + 4:.1f}" '
                         f'text-anchor="end">{escape(lane)}</text>')
    labelled = _labels_actions(timeline) and height >= _MIN_LABELLED_HEIGHT
    for lane, events in _by_lane(timeline.events).items():
        if lane in row_top:
            kinds_drawn_so_far.update(_lane_events(parts, events, axis, row_top[lane], height,
                                                   labelled, scale, unit, follow))
    if strip is not None:
        _strips(parts, strip, strip_top, axis)
    _folds(parts, axis, ipus_top, lanes_bottom, timeline.clock)
    return _ticks(parts, axis, lanes_bottom, scale, unit, timeline.clock)


def _strips(parts, strip: MemoryStrip, strip_top: Dict[str, float], axis: _Axis) -> None:
    """Each IPU's micro-batches in flight as a filled step path, all on one scale."""
    peak = strip.scale_peak or 1.0
    for lane, top in strip_top.items():
        base = top + STRIP_HEIGHT
        points = [(axis.x(axis.start), base)]
        for time, value in strip.series[lane]:
            x = axis.x(time)
            level = base - STRIP_HEIGHT * value / peak
            points += [(x, points[-1][1]), (x, level)]
        points += [(axis.x(axis.end), points[-1][1]), (axis.x(axis.end), base)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polygon points="{path}" fill="{MEMORY_COLOUR}" fill-opacity="0.45">'
                     f'<title>{escape(lane)}: {escape(strip.label(lane))}</title></polygon>'
                     f'<text x="{axis.left - 6}" y="{base - 2:.1f}" text-anchor="end" '
                     f'fill="{MEMORY_COLOUR}">{escape(strip.short_label(lane))}'
                     f'</text>')


def _folds(parts, axis: _Axis, lanes_top: float, lanes_bottom: float, clock: str) -> None:
    """Each folded stretch: a hatched band with its length written on it."""
    text_of = time_formatter(clock)
    for a, b in axis.folded.folds:
        x0, x1 = axis.x(a), axis.x(b)
        middle = (lanes_top + lanes_bottom) / 2
        parts.append(f'<rect x="{x0:.1f}" y="{lanes_top:.1f}" width="{x1 - x0:.1f}" '
                     f'height="{lanes_bottom - lanes_top:.1f}" fill="url(#fold)" '
                     f'fill-opacity="0.85"><title>all IPUs idle for {escape(text_of(b - a))}'
                     f' (folded)</title></rect>')
        if x1 - x0 >= _text_px(text_of(b - a)) + 2:  # its length, where it fits
            parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{middle + 4:.1f}" '
                         f'text-anchor="middle" fill="#333" stroke="#fff" stroke-width="3" '
                         f'paint-order="stroke">{escape(text_of(b - a))}</text>')


def _text_px(text: str) -> float:
    """A text's width at ``TEXT_PX``, on the wide side (as ``views.legibility`` estimates)."""
    return sum(_LABEL_CHAR_PX if c.isdigit() else _CHAR_PX for c in text)


def _phases(parts, phases, axis, ipus_top, lanes_bottom, lanes_top) -> None:
    """Shade each phase behind the IPU lanes and name it above the lanes: in full where the
    name fits, else its short form ("up", "down", "WU"); the legend gives both."""
    for name, begin, finish in phases:
        if not (finish > axis.start and begin < axis.end):  # in the window, not touching it
            continue
        x0, x1 = axis.x(begin), axis.x(finish)
        colour = PHASE_COLOURS.get(name, OTHER_COLOUR)
        parts.append(f'<rect x="{x0:.1f}" y="{ipus_top:.1f}" width="{x1 - x0:.1f}" '
                     f'height="{lanes_bottom - ipus_top:.1f}" fill="{colour}" '
                     f'fill-opacity="{PHASE_ALPHA}" data-phase="{escape(name)}">'
                     f'<title>{escape(name)}</title></rect>')
        shown = next((text for text in (name, phase_short(name))
                      if x1 - x0 >= _text_px(text) + 2), None)
        if shown is not None:
            parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{lanes_top - 4:.1f}" '
                         f'text-anchor="middle" fill="#333">{escape(shown)}</text>')


def _engine_runs(parts, timeline, axis, lanes_top, lanes_bottom) -> None:
    spans = timeline.engine_run_spans
    if not 1 < len(spans) <= _MAX_SHADED_RUNS:
        return
    for begin, finish in spans[1::2]:  # every other run shaded, so runs stay apart
        if axis.visible(begin, finish):
            x0, x1 = axis.x(begin), axis.x(finish)
            parts.append(f'<rect x="{x0:.1f}" y="{lanes_top:.1f}" width="{x1 - x0:.1f}" '
                         f'height="{lanes_bottom - lanes_top:.1f}" fill="#000" '
                         f'fill-opacity="0.05"/>')


def _by_lane(events: Sequence[Event]) -> Dict[str, List[Event]]:
    lanes: Dict[str, List[Event]] = {}
    for event in events:
        lanes.setdefault(event.lane, []).append(event)
    for lane_events in lanes.values():
        lane_events.sort(key=lambda e: e.start)
    return lanes


MIXED = "mixed"       # a box finer events of several kinds share, none of them dominant
MIXED_COLOUR = "#8c6d8c"
_DOMINANT_SHARE = 2 / 3


def lane_height(lanes: int) -> float:
    """Pixels per lane: full height for up to 16 lanes, then the 16 lanes' total shared out
    (never under 6 px), so a 64-IPU trace stays on a screen."""
    if lanes <= _FULL_HEIGHT_LANES:
        return LANE_HEIGHT
    return max(_MIN_LANE_HEIGHT, _FULL_HEIGHT_LANES * (LANE_HEIGHT + LANE_GAP) / lanes - 1)


def _lane_events(parts, events, axis, row_top, height, labelled, scale, unit,
                 follow: Optional[int] = None) -> Set[str]:
    """Draw one lane's boxes; return the kinds drawn (``MIXED`` among them if any)."""
    drawn = set()
    for box in _boxes(events, axis):
        drawn.add(box.kind)
        width = max(box.x1 - box.x0, 0.8)  # events shorter than a pixel stay visible
        colour = MIXED_COLOUR if box.kind == MIXED else colour_of(box.kind)
        single = box.events[0] if len(box.events) == 1 else None
        action = labelled and single is not None and single.kind in PIPELINE_ACTION_KINDS
        focus = followed(single, follow) if single is not None else (
            False if follow is not None else None)
        stroke = (' stroke="#000" stroke-width="1.5"' if focus
                  else ' stroke="#fff" stroke-width="0.8"' if action and width > 3 else "")
        fade = f' fill-opacity="{FADED}"' if focus is False else ""
        kind = "several kinds, finer than a pixel" if box.kind == MIXED else legend_name(box.kind)
        parts.append(f'<rect x="{box.x0:.1f}" y="{row_top:.1f}" width="{width:.1f}" '
                     f'height="{height:.1f}" fill="{colour}"{stroke}{fade} '
                     f'data-kind="{escape(kind)}">'
                     f'<title>{escape(_tooltip(box.events, scale, unit))}</title></rect>')
        if action and single.micro_batch is not None and focus is not False:
            label = f"w{single.micro_batch}" if "W" in single.name else str(single.micro_batch)
            if width >= _LABEL_CHAR_PX * len(label) + 2:
                parts.append(f'<text x="{box.x0 + width / 2:.1f}" '
                             f'y="{row_top + height / 2 + 4:.1f}" text-anchor="middle" '
                             f'fill="#fff">{label}</text>')
    return drawn


@dataclass
class _Box:
    x0: float
    x1: float
    kind: str
    events: List[Event]


def _boxes(events: List[Event], axis: _Axis) -> List[_Box]:
    """The boxes a lane needs: events narrower than a pixel are pooled per pixel (coloured by
    the kind filling two thirds of it, else ``MIXED``), and touching pools of one colour
    join, so a lane never holds more boxes than it has pixels."""
    pools: List[List[Event]] = []
    for event in events:
        if not axis.visible(event.start, event.end):
            continue
        if pools and axis.x(event.end) - axis.x(pools[-1][0].start) < 1.0:
            pools[-1].append(event)
        else:
            pools.append([event])
    boxes: List[_Box] = []
    for pool in pools:
        box = _Box(axis.x(pool[0].start), axis.x(max(e.end for e in pool)), _pool_kind(pool),
                   pool)
        last = boxes[-1] if boxes else None
        if (last is not None and len(pool) > 1 and len(last.events) > 1
                and last.kind == box.kind and box.x0 - last.x1 < 1.0):
            last.x1, last.events = box.x1, last.events + pool
        else:
            boxes.append(box)
    return boxes


def _pool_kind(pool: List[Event]) -> str:
    """The style key (``style.style_key``) a pool is drawn in."""
    if len(pool) == 1:
        return style_key(pool[0])
    time_by_kind: Dict[str, float] = {}
    for event in pool:
        key = style_key(event)
        time_by_kind[key] = time_by_kind.get(key, 0.0) + event.end - event.start
    kind = max(time_by_kind, key=time_by_kind.get)
    total = sum(time_by_kind.values())
    return kind if total <= 0 or time_by_kind[kind] >= _DOMINANT_SHARE * total else MIXED


def _tooltip(group: List[Event], scale: float, unit: str) -> str:
    first = group[0]
    end = max(e.end for e in group)
    span = (f"{first.start * scale:.4g}-{end * scale:.4g} {unit}".rstrip()
            if unit else f"{first.start:g}-{end:g}")
    if len(group) > 1:
        kinds = sorted({e.kind.replace("_", " ") for e in group})
        return f"{len(group)} events ({', '.join(kinds)}), {span}"
    details = [first.name]
    if first.stage is not None:
        details.append(f"stage {first.stage}")
    if first.micro_batch is not None:
        details.append(f"micro-batch {first.micro_batch}")
    return f"{', '.join(details)}: {span}"


def _labels_actions(timeline: Timeline) -> bool:
    """Micro-batch numbers are drawn only for pipelines (they have phases)."""
    return bool(timeline.phases)


def _ticks(parts, axis: _Axis, y: float, scale: float, unit: str, clock: str) -> float:
    parts.append(f'<line x1="{axis.left}" y1="{y:.1f}" x2="{axis.right}" y2="{y:.1f}" '
                 f'stroke="#333"/>')
    values = ([t * scale for t in axis.folded.ticks(scale)] if axis.folded.folds
              else nice_ticks(axis.start * scale, axis.end * scale))
    for value in values:
        x = axis.x(value / scale)
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" '
                     f'stroke="#333"/><text x="{x:.1f}" y="{y + 15:.1f}" '
                     f'text-anchor="middle" class="tick">{value:g}</text>')
    name = f"{clock} ({unit})" if unit else clock
    parts.append(f'<text x="{(axis.left + axis.right) / 2:.1f}" y="{y + 29:.1f}" '
                 f'text-anchor="middle">{escape(name)}</text>')
    return y + AXIS_HEIGHT


def _legend(parts, kinds: Sequence[str], y: float, width: float,
            extras: Sequence[tuple] = ()) -> float:
    """One legend for the whole picture: a swatch per kind drawn, then ``extras`` (name,
    fill, further attributes of its swatch); wraps to a new row rather than run off the right
    edge."""
    entries = [("several kinds, finer than a pixel" if kind == MIXED else legend_name(kind),
                MIXED_COLOUR if kind == MIXED else colour_of(kind), "")
               for kind in kinds] + list(extras)
    x = LEFT
    parts.append('<g class="legend">')
    for name, fill, attributes in entries:
        entry_width = 16 + 7 * len(name) + 14
        if x > LEFT and x + entry_width > width:
            x, y = LEFT, y + LEGEND_HEIGHT - 6
        parts.append(f'<rect x="{x}" y="{y + 6:.1f}" width="12" height="12" '
                     f'fill="{fill}"{attributes} data-legend="{escape(name)}"/>'
                     f'<text x="{x + 16}" y="{y + 16:.1f}">{escape(name)}</text>')
        x += entry_width
    parts.append("</g>")
    return y + LEGEND_HEIGHT


__all__ = ["timeline_svg"]
