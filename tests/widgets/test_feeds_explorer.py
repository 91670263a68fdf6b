"""FeedsExplorer: steps per execution against the host's launch overhead (pure simulator)."""
import math
import re
import xml.etree.ElementTree as ET

import pytest

from ipu_emulator.sim import hardware
from ipu_emulator.sim.feeds import tutorial3_step_cost
from ipu_emulator.views.legibility import svg_problems
from tests.support.child_python import run_python
from ipu_lab_widgets.feeds_explorer import (HOSTS, STEPS_PER_EXECUTION_CHOICES, TRACE_STEPS,
                                            FeedsConfig, FeedsExplorer, first_steps, simulate,
                                            sweep)

SVG = "{http://www.w3.org/2000/svg}"


def test_reproduces_tutorial_3_within_15_percent():
    result = simulate(FeedsConfig())  # 10,000 steps, 10 per execution, tutorial 3's host
    assert result.ok, result.error
    published_with, published_without = hardware.TUTORIAL3_LOOPED[1], hardware.TUTORIAL3_PER_STEP[1]
    assert result.with_feeds.total_seconds == pytest.approx(published_with, rel=0.15)
    assert result.without_feeds.total_seconds == pytest.approx(published_without, rel=0.15)
    assert result.speedup == pytest.approx(published_without / published_with, rel=0.15)
    assert result.with_feeds.engine_runs == 1_000
    assert result.without_feeds.engine_runs == 10_000


def test_launch_overhead_shrinks_as_steps_per_execution_grow():
    results = {n: simulate(FeedsConfig(steps_per_execution=n)).with_feeds
               for n in (1, 2, 5, 10, 100, 1000)}
    fractions = [program.launch_fraction for program in results.values()]
    assert all(a > b for a, b in zip(fractions, fractions[1:]))
    points = dict(sweep(FeedsConfig()))
    totals = list(points.values())
    assert all(a >= b for a, b in zip(totals, totals[1:]))
    # The sweep's totals (worked out without the traces) are simulate's.
    assert {n: points[n] for n in results} == {n: p.total_seconds for n, p in results.items()}
    one = simulate(FeedsConfig(steps_per_execution=1))
    assert one.with_feeds.total_seconds == pytest.approx(one.without_feeds.total_seconds, rel=0.01)


def test_an_ideal_host_makes_feeds_matter_even_more():
    tutorial = simulate(FeedsConfig())
    ideal = simulate(FeedsConfig(host="ideal host"))
    assert ideal.speedup > 2 * tutorial.speedup


def test_a_remainder_becomes_one_shorter_engine_run():
    result = simulate(FeedsConfig(steps=25, steps_per_execution=10))
    assert result.with_feeds.engine_runs == 3
    full = simulate(FeedsConfig(steps=20, steps_per_execution=10)).with_feeds.total_seconds
    assert full < result.with_feeds.total_seconds < 1.5 * full


def test_a_recorded_step_cost_is_used():
    heavy = tutorial3_step_cost().scaled(1000)
    assert (simulate(FeedsConfig(step_cost=heavy)).with_feeds.total_seconds
            > simulate(FeedsConfig()).with_feeds.total_seconds)


@pytest.mark.parametrize("change", [{"steps_per_execution": 0}, {"steps": -5},
                                    {"host": "a quantum host"}, {"ipu_version": "ipu9"}])
def test_invalid_configurations_are_reported_not_raised(change):
    result = simulate(FeedsConfig().with_changes(**change))
    assert not result.ok and result.error


def svgs(explorer):
    """The explorer's two pictures: the chart, then the traces."""
    return re.findall(r"<svg.*?</svg>", explorer.drawing.value, re.S)


def chosen_ring(explorer):
    chart = ET.fromstring(svgs(explorer)[0])
    return next(c for c in chart.iter(SVG + "circle") if c.get("class") == "circled")


def test_widget_redraws_and_keeps_the_last_valid_drawing():
    explorer = FeedsExplorer()
    first_drawing, first_count = explorer.drawing.value, explorer.redraw_count
    assert "1.6" in explorer.summary.value and explorer.message.value == ""
    ring_at_10 = float(chosen_ring(explorer).get("cx"))
    explorer.steps_per_execution.value = 100
    assert explorer.result.config.steps_per_execution == 100
    assert explorer.redraw_count == first_count + 1 and explorer.drawing.value != first_drawing
    assert float(chosen_ring(explorer).get("cx")) > ring_at_10   # the circled point moved right
    assert "with feeds (100 per execution)" in svgs(explorer)[1]
    drawn = explorer.drawing.value
    explorer._base = explorer._base.with_changes(batch_size=0)   # an impossible model
    explorer.refresh()
    assert "cannot run" in explorer.message.value
    assert explorer.drawing.value == drawn and explorer.last_valid.config.steps_per_execution == 100
    assert explorer.redraw_count == first_count + 1


def test_the_chart_shows_the_sweep_and_the_program_without_feeds():
    explorer = FeedsExplorer(FeedsConfig(host="ideal host"))
    chart = ET.fromstring(svgs(explorer)[0])
    lines = list(chart.iter(SVG + "polyline"))
    with_feeds = [float(xy.split(",")[1]) for xy in lines[0].get("points").split()]
    assert len(with_feeds) == len(STEPS_PER_EXECUTION_CHOICES)
    assert with_feeds == sorted(with_feeds)   # SVG y grows downwards: the total falls
    dashed = [float(xy.split(",")[1]) for xy in lines[1].get("points").split()]
    assert "dasharray" in ET.tostring(lines[1], "unicode") and len(set(dashed)) == 1
    assert dashed[0] == pytest.approx(with_feeds[0], abs=0.2)  # 1 per execution = no feeds
    names = "".join(chart.itertext())
    assert "with feeds" in names and "without feeds" in names and "steps per execution" in names
    # a host change redraws: the tutorial's host needs a longer time axis
    explorer.host.value = "tutorial 3 host"
    assert svgs(explorer)[0] != ET.tostring(chart, "unicode") and "(s)" in svgs(explorer)[0]


def test_a_short_training_ends_the_axis_at_its_steps():
    explorer = FeedsExplorer(FeedsConfig(steps=5, steps_per_execution=100))
    chart = ET.fromstring(svgs(explorer)[0])
    bottom = max(float(line.get("y1")) for line in chart.iter(SVG + "line")
                 if line.get("stroke") == "#ddd")   # the x axis: the grid line of zero
    x_labels = {"".join(t.itertext()) for t in chart.iter(SVG + "text")
                if bottom + 8 < float(t.get("y", 0)) < bottom + 20}  # under the axis
    assert x_labels == {"1", "2", "5"}
    assert "the first 5 steps" in svgs(explorer)[1]


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("steps_per_execution", [1, 10, 1000])
def test_the_drawing_is_legible(host, steps_per_execution):
    explorer = FeedsExplorer(FeedsConfig(steps_per_execution=steps_per_execution, host=host))
    assert explorer.message.value == ""
    for svg in svgs(explorer):
        assert svg_problems(svg) == []


def test_it_draws_without_matplotlib_or_numpy():
    """What JupyterLite's kernel has: no matplotlib, no NumPy."""
    code = ("import sys; sys.modules['matplotlib'] = sys.modules['numpy'] = None\n"
            "from ipu_lab_widgets.feeds_explorer import FeedsExplorer\n"
            "e = FeedsExplorer(); e.steps_per_execution.value = 100\n"
            "print(e.redraw_count, repr(e.message.value), e.drawing.value.count('<svg'))")
    result = run_python(code, timeout=120)
    assert result.stdout.strip() == "2 '' 2", result.stderr[-2000:]


@pytest.mark.parametrize("steps_per_execution", [10, 1000])
def test_the_traces_show_exactly_the_first_steps(steps_per_execution):
    """One engine run of 1,000 steps is simulated whole; only its first 20 are drawn."""
    result = simulate(FeedsConfig(steps_per_execution=steps_per_execution))
    cut = first_steps(result.with_feeds.trace, TRACE_STEPS)
    steps = {(e.engine_run, e.iteration) for e in cut.events if e.iteration is not None}
    assert len(steps) == TRACE_STEPS
    launches = [e for e in cut.events if e.name == "Engine::run"]
    assert len(launches) == math.ceil(TRACE_STEPS / steps_per_execution)
    # with feeds the 20 steps end sooner: the window is the program without feeds'
    end = max(e.end for e in cut.events)
    assert end < result.without_feeds.trace.metrics.makespan
    assert max(b for _, b in cut.engine_run_spans) <= end
