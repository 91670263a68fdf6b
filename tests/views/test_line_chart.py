"""views.line_chart: the feeds explorer's hand-written SVG chart (no matplotlib)."""
import xml.etree.ElementTree as ET

import pytest

from ipu_emulator.views.legibility import svg_problems
from ipu_emulator.views.line_chart import Series, line_chart_svg

SVG = "{http://www.w3.org/2000/svg}"
CHOICES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def chart(**options):
    points = [(x, 10 + 100 / x) for x in CHOICES]
    defaults = dict(series=[Series("falling", points),
                            Series("flat", [(1, 115), (1000, 115)], dashed=True, markers=False)],
                    x_label="steps", y_label="time (s)", x_ticks=CHOICES, log_x=True,
                    circled=(10, 20.0), title="a chart")
    defaults.update(options)
    return ET.fromstring(line_chart_svg(**defaults))


def texts(root):
    return ["".join(t.itertext()) for t in root.iter(SVG + "text")]


def ring(root):
    return next(c for c in root.iter(SVG + "circle") if c.get("class") == "circled")


def test_a_log_axis_spaces_decades_evenly_and_keeps_the_points_inside():
    root = chart()
    markers = [c for c in root.iter(SVG + "circle") if c.get("r") == "3.5"
               and c.find(SVG + "title") is not None]
    xs = [float(c.get("cx")) for c in markers]
    assert len(xs) == len(CHOICES) and xs == sorted(xs)
    one, ten, hundred, thousand = (xs[CHOICES.index(v)] for v in (1, 10, 100, 1000))
    assert ten - one == pytest.approx(hundred - ten, abs=0.2) == pytest.approx(thousand - hundred, abs=0.2)
    width = float(root.get("width"))
    assert 0 < one and thousand < width


def test_the_y_axis_starts_at_zero_and_clears_the_highest_point():
    root = chart()
    labels = texts(root)
    assert "0" in labels and "150" in labels   # 115 is the highest value: the next round tick
    flat = next(p for p in root.iter(SVG + "polyline") if "dasharray" in ET.tostring(p, "unicode"))
    top_of_plot = min(float(line.get("y1")) for line in root.iter(SVG + "line")
                      if line.get("stroke") == "#ddd")
    assert all(float(xy.split(",")[1]) > top_of_plot for xy in flat.get("points").split())


def test_the_circled_point_moves_with_its_value():
    low, high = ring(chart(circled=(10, 20.0))), ring(chart(circled=(100, 11.0)))
    assert float(high.get("cx")) > float(low.get("cx"))
    assert float(high.get("cy")) > float(low.get("cy"))   # smaller value: lower on the page


def test_names_legend_and_tooltips_are_there():
    root = chart(circled_name="chosen: 10")
    labels = texts(root)
    for name in ("a chart", "steps", "time (s)", "falling", "flat", "chosen: 10", "1", "1000"):
        assert name in labels
    assert "chosen: 10: 10, 20" in "".join(t.text for t in root.iter(SVG + "title"))


def test_it_is_legible():
    for options in ({}, {"circled": None}, {"x_ticks": (1, 2, 5)},
                    {"series": [Series("one point", [(7, 3.0)])], "x_ticks": ()}):
        svg = ET.tostring(chart(**options), "unicode")
        assert svg_problems(svg) == [], options


def test_tick_labels_that_would_touch_are_left_out_powers_of_ten_kept():
    crowded = texts(chart(width=200))
    assert {"1", "10", "100", "1000"} <= set(crowded)
    assert len([t for t in crowded if t in {str(c) for c in CHOICES}]) < len(CHOICES)


def test_a_linear_axis_and_bad_requests():
    root = chart(log_x=False, x_ticks=(0, 500, 1000))
    assert {"0", "500", "1000"} <= set(texts(root))
    with pytest.raises(ValueError, match="at least one point"):
        line_chart_svg([], "x", "y", x_ticks=(1, 2))
    with pytest.raises(ValueError, match="positive"):
        line_chart_svg([Series("s", [(0, 1)])], "x", "y", x_ticks=(), log_x=True)
