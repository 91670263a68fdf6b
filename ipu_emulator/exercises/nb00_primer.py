"""Notebook 00's exercise: how long a BSP superstep takes (and what balancing the tiles buys).

A superstep is a compute phase on every tile, a sync and an exchange.  The sync waits for the
last tile, so the compute phase lasts as long as the slowest tile's work, not the sum of the
tiles' work nor their mean.  ``draw_superstep`` draws one in the colours of the lab's traces.

    >>> superstep_cycles([1200, 900, 1500, 600], sync=150, exchange=400)
    2050
    >>> check_superstep_cycles(2050).ok, check_superstep_cycles(4750).ok
    (True, False)

Pure Python: no TensorFlow, NumPy or matplotlib (the figure is SVG, so it also draws in the
browser's Pyodide kernel).
"""
from __future__ import annotations

from html import escape
from typing import List, Sequence

from ipu_emulator.exercises import exercise, is_number, not_yet, right
from ipu_emulator.views.style import KIND_COLOURS

# The example of the exercises: four tiles' compute (cycles), then a sync and an exchange.
TILE_CYCLES = (1200, 900, 1500, 600)
SYNC_CYCLES = 150
EXCHANGE_CYCLES = 400


def superstep_cycles(compute: Sequence[float], sync: float, exchange: float) -> float:
    """Cycles of one superstep: the slowest tile's compute, then the sync, then the exchange."""
    return max(compute) + sync + exchange


def balanced(compute: Sequence[float]) -> List[float]:
    """The same total work spread evenly over the same tiles."""
    return [sum(compute) / len(compute)] * len(compute)


def _as_number(answer):
    """The answer as a number, or None for text, booleans and the like."""
    return answer if is_number(answer) else None


def _hint_for_a_wrong_superstep(answer: float, compute: Sequence[float]) -> str:
    """The usual slips, each with the idea it misses; never the answer."""
    fixed = SYNC_CYCLES + EXCHANGE_CYCLES
    if answer in (sum(compute), sum(compute) + fixed):
        return ("that adds the tiles' compute one after another, but the tiles compute at the "
                "same time, each on its own memory. How long is the compute phase when they "
                "all start together?")
    if answer in (sum(compute) / len(compute), sum(compute) / len(compute) + fixed):
        return ("that is the tiles' average. The sync waits for every tile: a tile that "
                "finishes early sits idle until the last one is done.")
    if answer in (max(compute), min(compute)):
        return ("that is one tile's compute on its own. After the compute phase, every "
                "superstep has two more parts.")
    if answer == min(compute) + fixed:
        return ("that is the fastest tile. Which tile does the sync wait for?")
    return ("add up the superstep's three parts: the compute phase (which tile decides how "
            "long it lasts?), the sync and the exchange.")


@exercise("00.superstep-cycles",
          solution=lambda: superstep_cycles(TILE_CYCLES, SYNC_CYCLES, EXCHANGE_CYCLES),
          wrong=(4200, 4750, 1050, 1600, 1500, 1150, 600, "2050"))
def check_superstep_cycles(cycles):
    """How many cycles does the superstep of TILE_CYCLES, SYNC_CYCLES and EXCHANGE_CYCLES
    take?"""
    answer = _as_number(cycles)
    if answer is None:
        return not_yet("answer with a number of cycles, without quotes.")
    expected = superstep_cycles(TILE_CYCLES, SYNC_CYCLES, EXCHANGE_CYCLES)
    if answer == expected:
        return right(f"{max(TILE_CYCLES):,} cycles of compute (the slowest tile: the others "
                     f"wait for it at the sync), then {SYNC_CYCLES} of sync and "
                     f"{EXCHANGE_CYCLES} of exchange. The fastest tile is idle for "
                     f"{max(TILE_CYCLES) - min(TILE_CYCLES):,} of those cycles.")
    return not_yet(_hint_for_a_wrong_superstep(answer, TILE_CYCLES))


# --- the figure -----------------------------------------------------------------------------

WAIT_COLOUR = "#eeeeee"  # a tile that has finished, waiting for the slowest at the sync


class SuperstepFigure:
    """One superstep per tile lane, in cycles, as an SVG a notebook shows (``svg``)."""

    def __init__(self, svg: str, title: str):
        self.svg = svg
        self.title = title

    def _repr_svg_(self) -> str:
        return self.svg.replace('width="%d"' % _WIDTH, 'width="100%"', 1)

    def __repr__(self) -> str:
        return f"superstep (SVG): {self.title}"


_WIDTH, _LEFT, _RIGHT, _TOP, _LANE, _GAP = 720, 60, 20, 26, 24, 6


def draw_superstep(compute: Sequence[float], sync: float = SYNC_CYCLES,
                   exchange: float = EXCHANGE_CYCLES,
                   title: str = "one superstep") -> SuperstepFigure:
    """Each tile's compute, its wait for the slowest tile, the sync and the exchange, on one
    axis in cycles (colours as in the lab's traces: compute blue, sync black, exchange yellow).
    """
    if not compute or min(compute) < 0 or sync < 0 or exchange < 0:
        raise ValueError("draw_superstep needs at least one tile and no negative cycles")
    total = superstep_cycles(compute, sync, exchange)
    scale = (_WIDTH - _LEFT - _RIGHT) / total
    x = lambda cycles: _LEFT + cycles * scale  # noqa: E731  (cycles -> pixels)
    slowest = max(compute)
    parts: List[str] = [f'<text x="{_LEFT}" y="16" font-weight="bold" font-size="12px">'
                        f'{escape(title)}: {total:,.0f} cycles</text>']

    def box(left, right, top, colour, tip, stroke=""):
        parts.append(f'<rect x="{x(left):.1f}" y="{top:.1f}" width="{(right - left) * scale:.1f}"'
                     f' height="{_LANE - _GAP}" fill="{colour}"{stroke}><title>{escape(tip)}'
                     f'</title></rect>')

    for tile, cycles in enumerate(compute):
        top = _TOP + tile * _LANE + _GAP / 2
        parts.append(f'<text x="{_LEFT - 6}" y="{top + 13:.1f}" text-anchor="end">tile {tile}'
                     '</text>')
        box(0, cycles, top, KIND_COLOURS["forward"], f"tile {tile} computes: {cycles:,.0f} cycles")
        if cycles < slowest:
            box(cycles, slowest, top, WAIT_COLOUR,
                f"tile {tile} waits for the slowest tile: {slowest - cycles:,.0f} cycles",
                stroke=' stroke="#bbbbbb" stroke-dasharray="3,2"')
        box(slowest, slowest + sync, top, KIND_COLOURS["sync"], f"sync: {sync:,.0f} cycles")
        box(slowest + sync, total, top, KIND_COLOURS["exchange"],
            f"exchange: {exchange:,.0f} cycles")
    axis_y = _TOP + len(compute) * _LANE + 2
    parts.append(f'<line x1="{_LEFT}" y1="{axis_y}" x2="{_WIDTH - _RIGHT}" y2="{axis_y}" '
                 'stroke="#333"/>')
    for cycles in sorted({0, slowest, slowest + sync, total}):
        parts.append(f'<line x1="{x(cycles):.1f}" y1="{axis_y}" x2="{x(cycles):.1f}" '
                     f'y2="{axis_y + 4}" stroke="#333"/>')
    # Tick labels at the start, the end of the compute phase and the end (the sync's end is
    # too close to the compute's to label both).
    for cycles in sorted({0, slowest, total}):
        parts.append(f'<text x="{x(cycles):.1f}" y="{axis_y + 16}" text-anchor="middle">'
                     f'{cycles:,.0f}</text>')
    parts.append(f'<text x="{(_LEFT + _WIDTH - _RIGHT) / 2}" y="{axis_y + 32}" '
                 'text-anchor="middle">cycles</text>')
    legend_y = axis_y + 50
    legend_x = _LEFT
    waits = min(compute) < slowest   # the legend lists only what is drawn
    legend = [(KIND_COLOURS["forward"], "compute", "")]
    if waits:
        legend.append((WAIT_COLOUR, "waiting for the slowest tile",
                       ' stroke="#bbbbbb" stroke-dasharray="3,2"'))
    legend += [(KIND_COLOURS["sync"], "sync", ""), (KIND_COLOURS["exchange"], "exchange", "")]
    for colour, name, stroke in legend:
        parts.append(f'<rect x="{legend_x}" y="{legend_y - 10}" width="12" height="12" '
                     f'fill="{colour}"{stroke}/>')
        parts.append(f'<text x="{legend_x + 16}" y="{legend_y}">{name}</text>')
        legend_x += 30 + 7 * len(name)
    height = legend_y + 10
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
           f'viewBox="0 0 {_WIDTH} {height}" style="font-family:sans-serif;font-size:11px;'
           f'background:#fff">' + "".join(parts) + "</svg>")
    return SuperstepFigure(svg, title)
