"""Can a learner read the trace?  Checks for what a drawn figure or SVG actually shows.

``figure_problems(fig)`` (matplotlib) and ``svg_problems(svg_text)`` (the widgets' SVG) return
human-readable problems, empty when the picture is legible:

* no two drawn text labels overlap (1 px tolerance), wherever they are in the figure;
* every label drawn in a box (a micro-batch number) lies inside that box with a pixel to spare;
* every IPU lane with compute (forward, backward, weight update, recompute) shows at least one
  compute box ``MIN_COMPUTE_PX`` wide: a lane whose compute is all hairlines teaches nothing;
* every pipeline phase shaded in a trace is named somewhere in the picture: above its
  shading, in full or short ("up", "down", "WU"), or in the legend;
* no text is smaller than the axis tick labels (6-7 px micro-batch numbers and notes are
  not read);
* each legend entry of a kind has the colour its boxes are drawn in (seen in the drawn
  picture: a box under a translucent hatching is not the colour of its swatch);
* a figure has at most one legend: traces compared one above the other share one.

    >>> svg_problems('<svg xmlns="http://www.w3.org/2000/svg" style="font-size:11px">'
    ...              '<text x="10" y="20">IPU0</text><text x="14" y="21">IPU1</text></svg>')
    ["'IPU0' overlaps 'IPU1' at x=10, y=11"]

Positions in the messages are pixels from the picture's top-left corner.

Plain Python: matplotlib is imported inside ``figure_problems`` only.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ipu_emulator.views.style import KIND_COLOURS, phase_short

COMPUTE_KINDS = ("forward", "backward", "weight_update", "recompute")
MIN_COMPUTE_PX = 3.0
TOLERANCE_PX = 1.0  # anti-aliasing and rounding: texts may touch by a pixel
ROOM_PX = 1.0       # a box label keeps this much of its box free on each side
_LANE_NAME = re.compile(r"^(IPU\d+|host)$")
SIZE_TOLERANCE = 0.05   # points (matplotlib) or pixels (SVG)
COLOUR_TOLERANCE = 0.06  # per channel, on 0..1: a swatch and its boxes look the same
KIND_GID = "kind:"       # gid of a trace's boxes of one kind: "kind:<legend entry>"
PHASE_GID = "phase:"     # gid of a phase's shading: "phase:<phase name>"


class _Box(NamedTuple):
    """A rectangle in pixels from the picture's top-left corner (as in SVG and in an image
    viewer: matplotlib's display coordinates are flipped to match)."""
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    def contains(self, x: float, y: float) -> bool:
        return self.x0 <= x <= self.x1 and self.y0 <= y <= self.y1


class _Label(NamedTuple):
    text: str
    where: str   # the axes or panel it belongs to, for the message
    box: _Box    # its extent in pixels
    anchor: Tuple[float, float]


def _overlaps(labels: Sequence[_Label]) -> List[str]:
    """Every pair of labels whose boxes overlap by more than the tolerance (sweep over x:
    a trace can carry hundreds of micro-batch numbers)."""
    problems = []
    ordered = sorted(labels, key=lambda label: label.box.x0)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b.box.x0 >= a.box.x1 - TOLERANCE_PX:
                break
            overlap_x = min(a.box.x1, b.box.x1) - b.box.x0
            overlap_y = min(a.box.y1, b.box.y1) - max(a.box.y0, b.box.y0)
            if overlap_x > TOLERANCE_PX and overlap_y > TOLERANCE_PX:
                where = " / ".join(dict.fromkeys(w for w in (a.where, b.where) if w))
                problems.append(f"{a.text!r} overlaps {b.text!r}{_in(where)} "
                                f"at x={a.box.x0:.0f}, y={a.box.y0:.0f}")
    return problems


def _misfits(labels: Iterable[_Label], boxes: Sequence[_Box], room: float = ROOM_PX) -> List[str]:
    """Labels anchored in a box must fit in the tightest box around their anchor, ``room``
    to spare on each side (what ``FittingLabel`` promises)."""
    rows: Dict[Tuple[float, float], List[_Box]] = {}  # boxes of a lane share their top and bottom
    for box in boxes:
        rows.setdefault((box.y0, box.y1), []).append(box)
    problems = []
    for label in labels:
        x, y = label.anchor
        around = [box for (top, bottom), row in rows.items() if top <= y <= bottom
                  for box in row if box.contains(x, y)]
        if not around:
            continue  # not a box label (a title, a lane name, a phase name)
        box = min(around, key=lambda b: b.width)
        if label.box.x0 < box.x0 + room or label.box.x1 > box.x1 - room:
            problems.append(f"label {label.text!r}{_in(label.where)} at x={label.box.x0:.0f} is "
                            f"{label.box.width:.1f} px wide, its box {box.width:.1f} px")
    return problems


def _thin_lanes(widths: Dict[str, List[float]], where: str) -> List[str]:
    """Lanes whose compute boxes are all narrower than ``MIN_COMPUTE_PX``."""
    return [f"lane {lane}{_in(where)}: compute drawn only as boxes up to {max(w):.1f} px wide "
            f"(fewer than {MIN_COMPUTE_PX:g} px)"
            for lane, w in widths.items() if w and max(w) < MIN_COMPUTE_PX]


def _in(where: str) -> str:
    return f" in {where}" if where else ""


def _unnamed_phases(phases: Iterable[str], texts: Sequence[str], where: str) -> List[str]:
    """Phases whose name (whole words) or short form (a whole text) no text shows."""
    problems = []
    for name in dict.fromkeys(phases):
        whole = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
        short = phase_short(name)
        if not any(whole.search(text) or text.strip() == short for text in texts):
            problems.append(f"phase {name!r}{_in(where)} is shaded but named nowhere (neither "
                            f"above its lanes, in full or as {short!r}, nor in the legend)")
    return problems


def _smaller_than_ticks(sizes: Sequence[Tuple[str, str, float]], tick_size: Optional[float],
                        unit: str) -> List[str]:
    """``sizes``: (text, where, size); every text smaller than the tick labels."""
    if tick_size is None:
        return []
    return [f"text {text!r}{_in(where)} is {size:.3g} {unit}, smaller than the tick labels "
            f"({tick_size:.3g} {unit})"
            for text, where, size in sizes if size < tick_size - SIZE_TOLERANCE]


def _hex(rgb) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb)


def _same_colour(a, b) -> bool:
    return max(abs(x - y) for x, y in zip(a, b)) <= COLOUR_TOLERANCE


def _miscoloured(entries: Sequence[Tuple[str, tuple, object]], boxes: Dict[object, List[tuple]],
                 where: str = "") -> List[str]:
    """``entries``: (legend text, swatch colour as shown, key of its boxes); ``boxes``: key ->
    the colours those boxes show.  A kind none of whose boxes shows its swatch's colour
    (faded boxes of a followed micro-batch's neighbours may differ, as long as some box
    matches)."""
    problems = []
    for text, swatch, key in entries:
        shown = boxes.get(key)
        if shown and not any(_same_colour(swatch, colour) for colour in shown):
            drawn = ", ".join(dict.fromkeys(_hex(c) for c in shown))
            problems.append(f"legend entry {text!r}{_in(where)} is {_hex(swatch)}, its boxes "
                            f"are drawn {drawn}")
    return problems


def _legends(count: int, where: str) -> List[str]:
    return ([f"{count} legends in one {where}: one legend per figure (traces compared one "
             "above the other share one)"] if count > 1 else [])


# -- matplotlib --------------------------------------------------------------------------


def figure_problems(fig) -> List[str]:
    """Draw ``fig`` (Agg) and return what makes it hard to read (see the module docstring).

    Texts a view chose not to draw (``FittingLabel``s too wide for their box, tick labels out
    of view) do not count: the draw records which texts were really drawn.
    """
    from matplotlib.axes import Axes

    renderer, drawn = _draw_recording_texts(fig)
    labels = [(_text_label(text, renderer, fig), text) for text in drawn]
    labels = [(label, text) for label, text in labels if label is not None]
    problems = _overlaps([label for label, _ in labels])
    drawn_ids = {id(text) for text in drawn}
    tick_ids = _tick_label_ids(fig)
    ticks = [text for text in drawn if id(text) in tick_ids]
    problems += _smaller_than_ticks(
        [(text.get_text(), _axes_name(text.axes), text.get_fontsize()) for text in drawn],
        max((text.get_fontsize() for text in ticks), default=None), "pt")
    legends = [legend for legend in [ax.get_legend() for ax in fig.axes] + list(fig.legends)
               if legend is not None and legend.get_visible()]
    problems += _legends(len(legends), "figure")
    pixels = _pixels(fig)
    boxes = _kind_colours(fig, pixels)
    for legend in legends:
        problems += _miscoloured(_swatches(legend, renderer, fig, pixels, boxes), boxes)
    texts = [text.get_text() for text in drawn]
    for ax in fig.axes:
        if not isinstance(ax, Axes) or not ax.get_visible():
            continue
        opaque = [box for box, _ in _bar_boxes(ax, fig)]
        own = {id(text) for text in ax.texts}  # labels placed in the axes, not its ticks
        problems += _misfits([label for label, text in labels if id(text) in own], opaque)
        problems += _unnamed_phases(_phases_in_view(ax, fig), texts, _axes_name(ax))
        lanes = _lane_rows(ax, fig, drawn_ids)
        if lanes:
            problems += _thin_lanes(_compute_widths(ax, fig, lanes), _axes_name(ax))
            if not _boxes_in_view(ax, fig):
                problems.append(f"trace{_in(_axes_name(ax))} shows no event: its time axis "
                                "is out of the events' range")
    return problems


def _tick_label_ids(fig) -> set:
    ids = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.majorTicks + axis.minorTicks:
                ids.update((id(tick.label1), id(tick.label2)))
    return ids


class _Pixels(NamedTuple):
    """The drawn picture: RGBA bytes, rows from the top."""
    data: bytes
    width: int
    height: int

    def rgb(self, x: int, y: int) -> Tuple[int, int, int]:
        at = 4 * (y * self.width + x)
        return self.data[at], self.data[at + 1], self.data[at + 2]


def _pixels(fig) -> _Pixels:
    buffer = fig.canvas.buffer_rgba()
    height, width = buffer.shape[:2]
    return _Pixels(bytes(buffer), width, height)


_SAMPLES = 12  # sample points per side of a box: enough to outvote a number or an edge


def _shown_colour(pixels: _Pixels, box: _Box, inset: float = 2.0) -> Optional[tuple]:
    """The colour most of a box's inside shows (a micro-batch number or an edge covers
    less; sampled on a grid), or None for a box too small to tell."""
    import math
    from collections import Counter

    x0, x1 = max(math.ceil(box.x0 + inset), 0), min(math.floor(box.x1 - inset), pixels.width)
    y0, y1 = max(math.ceil(box.y0 + inset), 0), min(math.floor(box.y1 - inset), pixels.height)
    if x1 - x0 < 1 or y1 - y0 < 1:
        return None
    xs = range(x0, x1, max(1, (x1 - x0) // _SAMPLES))
    ys = range(y0, y1, max(1, (y1 - y0) // _SAMPLES))
    counts = Counter(pixels.rgb(x, y) for x in xs for y in ys)
    return tuple(c / 255 for c in counts.most_common(1)[0][0])


def _swatches(legend, renderer, figure, pixels, boxes) -> List[Tuple[str, tuple, object]]:
    """(entry text, the colour its patch shows, the key of its boxes in ``boxes``) for a
    legend's patch entries: boxes tagged with its text, else boxes given its patch's colour."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    entries = []
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        if isinstance(handle, Patch) and text.get_text():
            colour = _shown_colour(pixels, _flipped(handle.get_window_extent(renderer), figure),
                                   inset=1.0)
            key = text.get_text() if text.get_text() in boxes else _declared(
                to_rgba(handle.get_facecolor()))
            if colour is not None:
                entries.append((text.get_text(), colour, key))
    return entries


def _declared(rgba) -> tuple:
    return ("colour",) + tuple(round(float(c), 3) for c in rgba)


def _kind_colours(figure, pixels) -> Dict[object, List[tuple]]:
    """The colours boxes show in the drawn picture, by kind: boxes whose collection has gid
    ``"kind:<text>"`` (the traces') or the label ``<text>`` under that text; untagged boxes
    under the colour they were given (``_declared``)."""
    shown: Dict[object, List[tuple]] = {}
    for ax in figure.axes:
        for collection in ax.collections:
            gid, label = collection.get_gid() or "", collection.get_label() or ""
            name = gid[len(KIND_GID):] if gid.startswith(KIND_GID) else label
            tagged = bool(name) and not name.startswith("_")
            colours = collection.get_facecolor()
            if not tagged and len(colours) == 0:
                continue
            for index, box in _rectangles(collection, figure):
                colour = _shown_colour(pixels, box)
                if colour is not None:
                    key = name if tagged else _declared(colours[index % len(colours)])
                    shown.setdefault(key, []).append(colour)
    return shown


def _phases_in_view(ax, figure) -> List[str]:
    """The phases shaded (patches with gid ``"phase:<name>"``) at least a pixel wide in view."""
    names = []
    for patch in ax.patches:
        gid = patch.get_gid() or ""
        if gid.startswith(PHASE_GID) and patch.get_visible():
            box = patch.get_window_extent()
            if min(box.x1, ax.bbox.x1) - max(box.x0, ax.bbox.x0) >= 1.0:
                names.append(gid[len(PHASE_GID):])
    return names


def _draw_recording_texts(fig):
    """Draw the figure and return (renderer, the Text artists drawn, in order).

    ``Text.draw`` is wrapped for the duration of the draw: views skip texts in their own
    ``draw`` (``FittingLabel`` returns early when its number would not fit), so a text
    counts as drawn only if ``Text.draw`` itself ran for it.  Tick labels are made during
    the draw, so wrapping instances beforehand would miss them.  (Figures are drawn on one
    thread; the class is restored however the draw ends.)
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    drawn: List = []
    original = Text.draw

    def recording_draw(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return original(self, renderer)

    Text.draw = recording_draw
    try:
        canvas.draw()
    finally:
        Text.draw = original
    unique = list(dict.fromkeys(drawn))  # a text drawn twice (tight layout) counts once
    return canvas.get_renderer(), unique


def _flipped(bbox, figure) -> _Box:
    """A matplotlib display-space Bbox (y up from the bottom) as a top-down _Box."""
    height = figure.bbox.height
    return _Box(bbox.x0, height - bbox.y1, bbox.x1, height - bbox.y0)


def _text_label(text, renderer, figure) -> Optional[_Label]:
    box = _flipped(text.get_window_extent(renderer), figure)
    for clip in _clips(text):  # only the part inside its clip box and path shows
        clip = _flipped(clip, figure)
        box = _Box(max(box.x0, clip.x0), max(box.y0, clip.y0),
                   min(box.x1, clip.x1), min(box.y1, clip.y1))
        if box.x1 - box.x0 <= 0 or box.y1 - box.y0 <= 0:
            return None
    x, y = text.get_transform().transform(text.get_position())
    return _Label(text.get_text(), _axes_name(text.axes), box, (x, figure.bbox.height - y))


def _clips(text) -> list:
    """The display-space extents a text is clipped to (texts in an Axes, such as micro-batch
    numbers, clip to its patch; titles and tick labels have clip_on but nothing to clip to)."""
    if not text.get_clip_on():
        return []
    clips = [text.get_clip_box()] if text.get_clip_box() is not None else []
    if text.get_clip_path() is not None:
        clips.append(text.get_clip_path().get_fully_transformed_path().get_extents())
    return clips


def _axes_name(ax) -> str:
    """Axes are named by their title (centred, left or right), as a reader would."""
    titles = [ax.get_title(loc) for loc in ("center", "left", "right")] if ax is not None else []
    title = next((t for t in titles if t), "")
    return f"axes {title[:50]!r}" if title else ""


def _bar_boxes(ax, figure, min_alpha: float = 0.5):
    """Every rectangle of the axes' collections (``broken_barh`` bars) at least ``min_alpha``
    opaque, in pixels, with its RGB colour: [(_Box, (r, g, b))].  Translucent shading (engine
    runs, memory strips) and other shapes (``fill_between`` areas) are no boxes."""
    boxes = []
    for collection in ax.collections:
        colours = collection.get_facecolor()
        if len(colours) == 0:
            continue
        for index, box in _rectangles(collection, figure):
            r, g, b, a = colours[index % len(colours)]  # the alpha includes the collection's
            if a >= min_alpha:
                boxes.append((box, (r, g, b)))
    return boxes


def _rectangles(collection, figure) -> List[Tuple[int, _Box]]:
    """(index, extent in pixels) of each rectangle among a collection's paths.  Worked out
    once per drawn figure (several checks ask; a long run has thousands of bars)."""
    paths = collection.get_paths()
    key = (id(figure), figure.bbox.width, figure.bbox.height, id(paths), len(paths),
           tuple(collection.get_transform().get_matrix().flat))
    cached = getattr(collection, "_legibility_rectangles", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    transform = collection.get_transform()  # bars carry data coordinates, no offsets
    rectangles = [(index, _flipped(path.get_extents(transform), figure))
                  for index, path in enumerate(paths) if _is_rectangle(path.vertices)]
    collection._legibility_rectangles = (key, rectangles)
    return rectangles


def _is_rectangle(vertices) -> bool:
    """An axis-aligned rectangle: its corners take two x values and two y values."""
    return (len(vertices) in (4, 5) and len({float(x) for x, _ in vertices}) <= 2
            and len({float(y) for _, y in vertices}) <= 2)


def _lane_rows(ax, figure, drawn_ids) -> Dict[str, float]:
    """A trace's lanes (drawn y tick labels 'host', 'IPU0', ...; other ticks, such as memory
    strips, are no lanes) and their y in pixels; empty for an Axes that is no trace.
    Read from the ticks the draw made: ``get_yticklabels()`` would mark the figure stale."""
    height = figure.bbox.height
    return {repr(tick.label1.get_text()): height - ax.transData.transform((0, tick.get_loc()))[1]
            for tick in ax.yaxis.majorTicks
            if id(tick.label1) in drawn_ids and _LANE_NAME.match(tick.label1.get_text())}


def _boxes_in_view(ax, figure) -> int:
    """How many event boxes lie at least partly inside the axes (any kind)."""
    left, right = ax.bbox.x0, ax.bbox.x1
    return sum(1 for box, _ in _bar_boxes(ax, figure, min_alpha=0.2)
               if box.x1 > left and box.x0 < right)


def _compute_widths(ax, figure, lanes: Dict[str, float]) -> Dict[str, List[float]]:
    """Visible width in pixels of each compute box, by lane (boxes out of view are left
    out; zero-length events, such as unit-cost weight updates, are no compute).  Faded boxes
    (a followed micro-batch's neighbours) still show compute, so they count."""
    from matplotlib.colors import to_rgb

    compute = [to_rgb(KIND_COLOURS[kind]) for kind in COMPUTE_KINDS]
    left, right = ax.bbox.x0, ax.bbox.x1
    widths: Dict[str, List[float]] = {}
    for box, colour in _bar_boxes(ax, figure, min_alpha=0.2):
        if not any(max(abs(c - d) for c, d in zip(colour, k)) < 1e-3 for k in compute):
            continue
        if box.width <= 0 or box.x1 < left or box.x0 > right:
            continue
        middle = (box.y0 + box.y1) / 2
        lane = min(lanes, key=lambda name: abs(lanes[name] - middle))
        widths.setdefault(lane, []).append(min(box.x1, right) - max(box.x0, left))
    return widths


# -- SVG -----------------------------------------------------------------------------------

_SVG = "{http://www.w3.org/2000/svg}"
# Widths of sans-serif glyphs in ems, on the wide side (DejaVu Sans, the usual fallback, is
# wide): a digit 0.65 em (svg.py's _LABEL_CHAR_PX = 6.5 px at 10 px), other characters
# 0.62 em, bold 10 % wider.  Estimates, so the tolerance stays at a pixel.
_DIGIT_EM = 0.65
_CHAR_EM = 0.62
_BOLD = 1.1


def svg_problems(svg_text: str) -> List[str]:
    """The checks of ``figure_problems`` for the SVG of ``views.svg.timeline_svg``.

    Text widths are estimated from the font size and the characters (no fonts are loaded);
    lanes are the rows of event boxes (rects with a ``<title>``), named by the lane name at
    their left when there is one.  What the view marks tells the rest: tick labels have
    ``class="tick"`` (without any, the picture's own font size is the tick labels'), a
    legend is a ``<g class="legend">`` whose swatches carry ``data-legend``, event boxes
    ``data-kind`` (the legend entry of their kind), phase shading ``data-phase``.
    """
    root = ET.fromstring(svg_text)
    base_size = _font_size(root.get("style", ""), 11.0)
    texts = [text for text in root.iter(_SVG + "text") if "".join(text.itertext()).strip()]
    labels = [_svg_label(text, base_size) for text in texts]
    labels = [label for label in labels if label is not None]
    sizes = [("".join(text.itertext()).strip(), "", _svg_size(text, base_size))
             for text in texts]
    tick_sizes = [size for text, (_, _, size) in zip(texts, sizes)
                  if "tick" in text.get("class", "").split()]
    problems = _smaller_than_ticks(sizes, max(tick_sizes, default=base_size), "px")
    problems += _legends(sum(1 for g in root.iter(_SVG + "g")
                             if "legend" in g.get("class", "").split()), "picture")
    problems += _unnamed_phases([rect.get("data-phase") for rect in root.iter(_SVG + "rect")
                                 if rect.get("data-phase")], [label.text for label in labels], "")
    kinds: Dict[object, List[tuple]] = {}
    swatches = []
    for rect in root.iter(_SVG + "rect"):
        colour = _svg_colour(rect)
        if colour is None:
            continue
        if rect.get("data-kind"):
            kinds.setdefault(rect.get("data-kind"), []).append(colour)
        if rect.get("data-legend"):
            swatches.append((rect.get("data-legend"), colour, rect.get("data-legend")))
    problems += _miscoloured(swatches, kinds)
    boxes = []
    lanes: Dict[float, List[Tuple[_Box, str]]] = {}
    for rect in root.iter(_SVG + "rect"):
        # Event boxes have a tooltip and a plain colour; phase bands (a tooltip, 12 %
        # opaque), folded stretches (a hatching), engine-run shading and legend swatches are
        # no events.  Faded boxes (micro-batches not followed, 25 %) still show compute.
        fill = rect.get("fill", "").lower()
        if (rect.find(_SVG + "title") is None or not fill.startswith("#")
                or float(rect.get("fill-opacity", 1)) < 0.2):
            continue
        x, y = float(rect.get("x", 0)), float(rect.get("y", 0))
        box = _Box(x, y, x + float(rect.get("width", 0)), y + float(rect.get("height", 0)))
        boxes.append(box)
        lanes.setdefault(y, []).append((box, fill))
    # Coordinates are written to 0.1 px, so a label may lose 0.1 px of its room.
    problems = _overlaps(labels) + _misfits(labels, boxes, room=ROOM_PX - 0.1) + problems
    compute = {KIND_COLOURS[kind].lower() for kind in COMPUTE_KINDS}
    widths = {_lane_name(labels, y, row): [box.width for box, fill in row if fill in compute]
              for y, row in lanes.items()}
    return problems + _thin_lanes(widths, "")


def _font_size(style: str, default: float) -> float:
    match = re.search(r"font-size:\s*([\d.]+)px", style)
    return float(match.group(1)) if match else default


def _svg_size(element, base_size: float) -> float:
    return float(element.get("font-size", "").rstrip("px") or
                 _font_size(element.get("style", ""), base_size))


def _svg_colour(rect) -> Optional[tuple]:
    """A rect's colour as shown over white (its ``fill`` at its ``fill-opacity``), or None
    for a fill that is no plain colour (a pattern, none)."""
    fill = rect.get("fill", "").strip().lower()
    if not re.fullmatch(r"#[0-9a-f]{6}|#[0-9a-f]{3}", fill):
        return None
    digits = fill[1:] if len(fill) == 7 else "".join(c * 2 for c in fill[1:])
    opacity = float(rect.get("fill-opacity", 1))
    return tuple(1 - opacity * (1 - int(digits[i:i + 2], 16) / 255) for i in (0, 2, 4))


def _svg_label(element, base_size: float) -> Optional[_Label]:
    text = "".join(element.itertext()).strip()
    if not text:
        return None
    size = _svg_size(element, base_size)
    width = size * sum(_DIGIT_EM if c.isdigit() else _CHAR_EM for c in text)
    if element.get("font-weight") == "bold":
        width *= _BOLD
    x, y = float(element.get("x", 0)), float(element.get("y", 0))  # y: the baseline
    anchor = element.get("text-anchor", "start")
    left = x - {"middle": width / 2, "end": width}.get(anchor, 0.0)
    box = _Box(left, y - 0.8 * size, left + width, y + 0.2 * size)
    return _Label(text, "", box, ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2))


def _lane_name(labels: Sequence[_Label], y: float, row: List[Tuple[_Box, str]]) -> str:
    """The lane name written left of the row's boxes and the row's position (a name repeats
    when the SVG stacks several timelines)."""
    top, bottom = y, max(box.y1 for box, _ in row)
    left = min(box.x0 for box, _ in row)
    for label in labels:
        if (_LANE_NAME.match(label.text) and label.box.x1 <= left
                and top <= label.anchor[1] <= bottom):
            return f"{label.text!r} at y={y:g}"
    return f"at y={y:g}"


__all__ = ["figure_problems", "svg_problems", "COMPUTE_KINDS", "MIN_COMPUTE_PX"]
