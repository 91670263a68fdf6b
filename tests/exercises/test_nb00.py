"""Notebook 00's exercises beyond the generic checks: a superstep lasts as long as its slowest
tile's compute plus the sync and the exchange; each usual slip (adding the tiles up, taking
their mean, leaving out the sync and exchange) gets a hint about its own mistake; the figure
draws what the prose says it draws."""
import re

import pytest

from ipu_emulator.exercises import nb00_primer as nb00
from ipu_emulator.views.legibility import svg_problems


def test_a_superstep_is_the_slowest_tile_then_the_sync_and_the_exchange():
    assert nb00.superstep_cycles([10, 30, 20], sync=5, exchange=7) == 42
    assert nb00.superstep_cycles([30], sync=0, exchange=0) == 30
    total = nb00.superstep_cycles(nb00.TILE_CYCLES, nb00.SYNC_CYCLES, nb00.EXCHANGE_CYCLES)
    assert total != sum(nb00.TILE_CYCLES) + nb00.SYNC_CYCLES + nb00.EXCHANGE_CYCLES
    assert nb00.check_superstep_cycles(total).ok
    assert nb00.check_superstep_cycles(float(total)).ok   # 2050.0 is the same number


def test_balancing_keeps_the_total_work_and_shortens_the_superstep():
    even = nb00.balanced(nb00.TILE_CYCLES)
    assert sum(even) == sum(nb00.TILE_CYCLES) and len(set(even)) == 1
    before = nb00.superstep_cycles(nb00.TILE_CYCLES, nb00.SYNC_CYCLES, nb00.EXCHANGE_CYCLES)
    after = nb00.superstep_cycles(even, nb00.SYNC_CYCLES, nb00.EXCHANGE_CYCLES)
    assert after < before
    # balanced, the superstep is the tiles' mean plus the rest: the slip above is right only then
    assert after == sum(nb00.TILE_CYCLES) / 4 + nb00.SYNC_CYCLES + nb00.EXCHANGE_CYCLES


def test_each_usual_slip_gets_its_own_hint():
    tiles, fixed = nb00.TILE_CYCLES, nb00.SYNC_CYCLES + nb00.EXCHANGE_CYCLES
    summed = nb00.check_superstep_cycles(sum(tiles) + fixed).text
    mean = nb00.check_superstep_cycles(sum(tiles) / len(tiles) + fixed).text
    compute_only = nb00.check_superstep_cycles(max(tiles)).text
    fastest = nb00.check_superstep_cycles(min(tiles) + fixed).text
    assert len({summed, mean, compute_only, fastest}) == 4
    assert "same time" in summed and "average" in mean and "two more parts" in compute_only
    assert "fastest" in fastest
    assert "number of cycles" in nb00.check_superstep_cycles("2050").text
    assert "number of cycles" in nb00.check_superstep_cycles(True).text


def test_the_figure_draws_each_tile_its_wait_the_sync_and_the_exchange():
    compute = [800, 1300, 500, 1000]
    figure = nb00.draw_superstep(compute, sync=150, exchange=300, title="example")
    assert svg_problems(figure.svg) == []
    assert "example: 1,750 cycles" in figure.svg
    tips = re.findall(r"<title>([^<]*)</title>", figure.svg)
    assert [t for t in tips if "computes" in t] == [
        f"tile {i} computes: {c:,} cycles" for i, c in enumerate(compute)]
    waits = [t for t in tips if "waits" in t]
    assert waits == ["tile 0 waits for the slowest tile: 500 cycles",
                     "tile 2 waits for the slowest tile: 800 cycles",
                     "tile 3 waits for the slowest tile: 300 cycles"]
    assert tips.count("sync: 150 cycles") == 4 and tips.count("exchange: 300 cycles") == 4
    # box widths in proportion to cycles: tile 1's compute is 13/5 of tile 2's
    widths = {t: float(w) for w, t in re.findall(
        r'width="([\d.]+)" height="[\d.]+" fill="[^"]+"><title>([^<]*)', figure.svg)}
    ratio = widths["tile 1 computes: 1,300 cycles"] / widths["tile 2 computes: 500 cycles"]
    assert abs(ratio - 13 / 5) < 0.01
    assert 'width="100%"' in figure._repr_svg_() and repr(figure) == "superstep (SVG): example"


def test_a_balanced_figure_has_no_waits_in_its_boxes_or_its_legend():
    figure = nb00.draw_superstep([1050] * 4, sync=150, exchange=400)
    assert "waits" not in figure.svg and "waiting" not in figure.svg
    assert "waiting for the slowest tile" in nb00.draw_superstep([1, 2]).svg


def test_the_figure_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError):
        nb00.draw_superstep([])
    with pytest.raises(ValueError):
        nb00.draw_superstep([100, -1])
