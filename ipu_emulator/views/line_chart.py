"""A small line chart as SVG text: the feeds explorer's total time against steps per execution.

Written by hand, like ``views.timeline_svg``, so it draws in JupyterLite's browser kernel where
no matplotlib exists.  It does what that one picture needs and no more: lines with or without
point markers (a line can be dashed, and two points make a reference line), a linear y axis
from zero, a linear or logarithmic x axis with the ticks the caller names, one point circled,
axis names and a legend under the plot (where it can never hide a line).

    >>> svg = line_chart_svg([Series("with feeds", [(1, 24.2), (10, 14.6), (100, 13.7)])],
    ...                      x_label="steps per execution", y_label="total (s)",
    ...                      x_ticks=[1, 10, 100], log_x=True, circled=(10, 14.6))
    >>> svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" width="320"')
    True

Pure Python; every point carries a tooltip with its values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import List, Optional, Sequence, Tuple

from ipu_emulator.views.time_axis import nice_ticks

Point = Tuple[float, float]

LEFT = 52          # room for the y tick labels and the y axis name
RIGHT = 20         # a centred last tick label ("1000") stays inside
TOP = 26           # room for the title
PLOT_HEIGHT = 170
AXIS_HEIGHT = 36   # x tick labels and the x axis name
LEGEND_ROW = 18
INSET = 8          # the first and last points sit this far inside the axes, clear of them
HEADROOM = 1.06    # the highest point stays below the top of the plot
_FONT = "font-family:sans-serif"
# Tick labels at the chart's own size, as every text (no text is smaller than the tick
# labels, views.legibility): on a log axis those that would touch are left out.
TICK_FONT_PX = 11
_DIGIT_PX = 0.65 * TICK_FONT_PX  # a digit's width, as views.legibility estimates it
_LABEL_GAP = 2


@dataclass(frozen=True)
class Series:
    """One line: its legend name, its points (x, y), its colour and how it is drawn."""

    name: str
    points: Sequence[Point]
    colour: str = "#0072B2"
    dashed: bool = False
    markers: bool = True


class _Scale:
    """Maps a value to a pixel along one axis (logarithmic or linear)."""

    def __init__(self, low: float, high: float, start: float, end: float, log: bool):
        self.log = log
        self.low, self.high = (math.log10(low), math.log10(high)) if log else (low, high)
        if self.high <= self.low:  # one value only: give the axis some width around it
            self.high = self.low + 1.0
        self.start, self.end = start, end

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.start + (v - self.low) / (self.high - self.low) * (self.end - self.start)


def line_chart_svg(series: Sequence[Series], x_label: str, y_label: str,
                   x_ticks: Sequence[float], log_x: bool = False,
                   circled: Optional[Point] = None, circled_name: str = "chosen",
                   title: str = "", width: int = 320, y_format: str = "{:g}") -> str:
    """Draw ``series`` and return an ``<svg>`` element ``width`` pixels wide.

    The x axis spans the points and ``x_ticks`` (a little inset) (logarithmic with ``log_x``: every value must
    then be positive); tick labels that would touch their left neighbour are left out.  The y
    axis starts at zero and ends on a round tick a little above the highest point.  ``circled`` is
    ringed and named ``circled_name`` in the legend.  Raises ``ValueError`` when there is no
    point to draw or ``log_x`` meets a value that is not positive.
    """
    xs = [x for s in series for x, _ in s.points] + list(x_ticks)
    ys = [y for s in series for _, y in s.points]
    if circled is not None:
        xs.append(circled[0])
        ys.append(circled[1])
    if not ys:
        raise ValueError("line_chart_svg needs at least one point")
    if log_x and min(xs) <= 0:
        raise ValueError("a logarithmic x axis needs positive values")
    y_ticks = _y_ticks(max(ys) * HEADROOM)
    bottom = TOP + PLOT_HEIGHT
    x_of = _Scale(min(xs), max(xs), LEFT + INSET, width - RIGHT - INSET, log_x)
    y_of = _Scale(0.0, y_ticks[-1], bottom, TOP, log=False)

    parts: List[str] = []
    if title:
        parts.append(f'<text x="{LEFT}" y="16" font-weight="bold" font-size="12px">'
                     f'{escape(title)}</text>')
    for value in y_ticks:  # light grid lines help read a value off the curve
        y = y_of(value)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{width - RIGHT}" y2="{y:.1f}" '
                     f'stroke="#ddd"/><text x="{LEFT - 5}" y="{y + 4:.1f}" '
                     f'text-anchor="end" class="tick">{escape(y_format.format(value))}</text>')
    parts.append(f'<line x1="{LEFT}" y1="{bottom}" x2="{width - RIGHT}" y2="{bottom}" '
                 f'stroke="#333"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" '
                 f'stroke="#333"/>')
    parts += _x_ticks(x_ticks, x_of, bottom)
    parts.append(f'<text x="{(LEFT + width - RIGHT) / 2:.1f}" y="{bottom + 30}" '
                 f'text-anchor="middle">{escape(x_label)}</text>'
                 f'<text transform="translate(13,{(TOP + bottom) / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">{escape(y_label)}</text>')
    for line in series:
        parts += _line(line, x_of, y_of, y_format)
    if circled is not None:
        parts.append(f'<circle class="circled" cx="{x_of(circled[0]):.1f}" '
                     f'cy="{y_of(circled[1]):.1f}" r="8" fill="none" stroke="#000" '
                     f'stroke-width="2"><title>{escape(circled_name)}: '
                     f'{_point_text(circled, y_format)}</title></circle>')
    legend = [(s.name, s.colour, s.dashed, s.markers) for s in series]
    if circled is not None:
        legend.append((circled_name, None, False, True))
    y = bottom + AXIS_HEIGHT
    parts.append('<g class="legend">')
    for name, colour, dashed, markers in legend:
        parts.append(_legend_entry(name, colour, dashed, markers, y))
        y += LEGEND_ROW
    parts.append("</g>")
    height = math.ceil(y + 4)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" style="{_FONT};font-size:11px;background:#fff">'
            + "".join(parts) + "</svg>")


def _y_ticks(highest: float) -> List[float]:
    """Round ticks from zero to the first one at or above ``highest`` (about five of them)."""
    if highest <= 0:
        return [0, 1]
    ticks = nice_ticks(0.0, highest, target=5)
    if ticks[-1] < highest:
        ticks.append(round(2 * ticks[-1] - ticks[-2], 12))
    return ticks


def _x_ticks(values: Sequence[float], x_of: _Scale, bottom: float) -> List[str]:
    """A tick at each value; a label where it clears the labels already placed, powers of
    ten placed first (on a log axis they are the ones a reader counts by)."""
    parts = [f'<line x1="{x_of(v):.1f}" y1="{bottom}" x2="{x_of(v):.1f}" y2="{bottom + 4}" '
             f'stroke="#333"/>' for v in values]
    first = [v for v in values if x_of.log and _power_of_ten(v)]
    placed: List[Tuple[float, float]] = []
    for value in first + [v for v in values if v not in first]:
        x, label = x_of(value), f"{value:g}"
        half = len(label) * _DIGIT_PX / 2
        if all(x + half + _LABEL_GAP <= left or x - half - _LABEL_GAP >= right
               for left, right in placed):
            placed.append((x - half, x + half))
            parts.append(f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle" '
                         f'font-size="{TICK_FONT_PX}px" class="tick">{label}</text>')
    return parts


def _power_of_ten(value: float) -> bool:
    return value > 0 and abs(math.log10(value) - round(math.log10(value))) < 1e-9


def _line(line: Series, x_of: _Scale, y_of: _Scale, y_format: str) -> List[str]:
    points = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in line.points)
    dash = ' stroke-dasharray="6,4"' if line.dashed else ""
    parts = [f'<polyline points="{points}" fill="none" stroke="{line.colour}" '
             f'stroke-width="2"{dash}><title>{escape(line.name)}</title></polyline>']
    if line.markers:
        parts += [f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3.5" '
                  f'fill="{line.colour}"><title>{escape(line.name)}: '
                  f'{_point_text((x, y), y_format)}</title></circle>'
                  for x, y in line.points]
    return parts


def _point_text(point: Point, y_format: str) -> str:
    return escape(f"{point[0]:g}, {y_format.format(point[1])}")


def _legend_entry(name: str, colour: Optional[str], dashed: bool, markers: bool,
                  y: float) -> str:
    """A sample of the line (or the ring, for the circled point) and its name."""
    middle = y + 9
    if colour is None:
        sample = (f'<circle cx="{LEFT + 11}" cy="{middle}" r="6" fill="none" stroke="#000" '
                  f'stroke-width="2"/>')
    else:
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        sample = (f'<line x1="{LEFT}" y1="{middle}" x2="{LEFT + 22}" y2="{middle}" '
                  f'stroke="{colour}" stroke-width="2"{dash}/>')
        if markers:
            sample += f'<circle cx="{LEFT + 11}" cy="{middle}" r="3.5" fill="{colour}"/>'
    return sample + f'<text x="{LEFT + 30}" y="{middle + 4}">{escape(name)}</text>'


__all__ = ["Series", "line_chart_svg"]
