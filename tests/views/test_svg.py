"""The widgets' SVG view of a timeline: valid SVG, one box per event when there is room, no
event lost when there is not, and a time axis that names its clock."""
import math
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, strategies as st

from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim.timeline import simulate_engine_runs
from ipu_emulator.views.svg import LEFT, RIGHT, MIXED_COLOUR, timeline_svg
from ipu_emulator.views.time_axis import nice_ticks

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg):
    return ET.fromstring(svg)


def event_boxes(root):
    """Boxes that stand for events: every rect with a tooltip except phase bands."""
    return [rect for rect in root.iter(SVG + "rect")
            if rect.find(SVG + "title") is not None
            and rect.get("fill-opacity") is None]


def pipeline_timeline(stages=4, micro_batches=8, schedule="grouped", unit_cost=True):
    return simulate_pipeline(unit_stages(stages), schedule,
                             gradient_accumulation_count=micro_batches, unit_cost=unit_cost)


def test_a_small_pipeline_gets_one_labelled_box_per_event():
    timeline = pipeline_timeline()
    root = parse(timeline_svg([timeline]))
    visible = [e for e in timeline.events if e.end > e.start or e.kind == "weight_update"]
    assert len(event_boxes(root)) == len(visible)
    texts = [t.text for t in root.iter(SVG + "text")]
    for lane in timeline.lanes:
        assert lane in texts
    # micro-batch numbers in the boxes (white text): each micro-batch twice on every stage
    labels = [t.text for t in root.iter(SVG + "text") if t.get("fill") == "#fff"]
    assert sorted(labels) == sorted(str(m) for m in range(8) for _ in range(2 * 4))
    assert "unit time steps" in texts


def test_the_axis_names_the_simulated_clock_and_its_unit():
    run = EngineRun("train", 10, ComputeCost(forward_flops=1e9, backward_flops=2e9))
    timeline = simulate_engine_runs([run] * 3, title="looped")
    texts = [t.text for t in parse(timeline_svg([timeline])).iter(SVG + "text")]
    assert any(re.fullmatch(r"simulated IPU time \((s|ms|µs)\)", t or "") for t in texts)
    assert "looped" in texts


def test_tooltips_say_what_a_box_is():
    timeline = pipeline_timeline(stages=2, micro_batches=4)
    titles = [r.find(SVG + "title").text for r in event_boxes(parse(timeline_svg([timeline])))]
    assert any("stage 1" in t and "micro-batch 3" in t for t in titles)


def test_a_huge_pipeline_stays_small_and_loses_no_event():
    timeline = pipeline_timeline(stages=16, micro_batches=512, schedule="1f1b")
    width = 600
    root = parse(timeline_svg([timeline], width=width))
    boxes = event_boxes(root)
    rows = {}
    for box in boxes:
        rows.setdefault(box.get("y"), []).append(box)
    assert len(rows) == 16
    assert max(len(r) for r in rows.values()) <= width - LEFT - RIGHT
    counted = 0
    for box in boxes:
        title = box.find(SVG + "title").text
        match = re.match(r"(\d+) events", title)
        counted += int(match.group(1)) if match else 1
    assert counted == len(timeline.events)
    # forwards and backwards alternate finer than a pixel: shown as mixed, and the legend says so
    assert any(box.get("fill") == MIXED_COLOUR for box in boxes)
    assert "several kinds, finer than a pixel" in [t.text for t in root.iter(SVG + "text")]


def test_a_window_shows_only_what_falls_inside_it():
    timeline = pipeline_timeline()
    everything = len(event_boxes(parse(timeline_svg([timeline]))))
    window = event_boxes(parse(timeline_svg([timeline], start=0, end=4)))
    assert 0 < len(window) < everything
    inside = [e for e in timeline.events if e.end >= 0 and e.start <= 4]
    assert len(window) == len(inside)


def test_stacked_timelines_share_one_axis_and_one_legend():
    grouped, interleaved = pipeline_timeline(), pipeline_timeline(schedule="interleaved")
    root = parse(timeline_svg([grouped, interleaved], titles=["A", "B"]))
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "A" in texts and "B" in texts
    assert texts.count("forward") == 1       # one legend for both


def test_titles_are_escaped():
    timeline = pipeline_timeline()
    svg = timeline_svg([timeline], titles=["<b>&</b>"])
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in svg
    parse(svg)


def test_no_timelines_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one timeline"):
        timeline_svg([])


@given(st.floats(-1e6, 1e6), st.floats(1e-6, 1e6))
def test_nice_ticks_are_round_evenly_spaced_and_inside(low, relative_span):
    span = relative_span * max(1.0, abs(low))   # a window, not a rounding error
    high = low + span
    ticks = nice_ticks(low, high)
    assert 2 <= len(ticks) <= 17
    tolerance = span * 1e-6
    assert all(low - tolerance <= t <= high + tolerance for t in ticks)
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    step = (ticks[1] - ticks[0])
    assert all(abs(s - step) <= step * 1e-6 + 1e-9 for s in steps)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5, 10))



def test_many_lanes_share_a_screen_and_their_names_do_not_overlap():
    timeline = pipeline_timeline(stages=64, micro_batches=64, schedule="gpipe")
    root = parse(timeline_svg([timeline]))
    assert float(root.get("height")) < 700
    lane_names = [t for t in root.iter(SVG + "text") if (t.text or "").startswith("IPU")]
    ys = sorted(float(t.get("y")) for t in lane_names)
    assert 8 <= len(lane_names) < 64 and lane_names[0].text == "IPU0"
    assert min(b - a for a, b in zip(ys, ys[1:])) >= 12
    assert not [t for t in root.iter(SVG + "text") if t.get("fill") == "#fff"]  # no labels
