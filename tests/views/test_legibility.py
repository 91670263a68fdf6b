"""Legibility of the traces: no overlapping texts, box labels inside their boxes, and every
IPU lane with compute showing a box a few pixels wide, in the matplotlib views and in the
widgets' SVG, over a grid of pipelines.  First, the checks find planted problems."""
import functools
import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from ipu_emulator.record import ComputeCost, EngineRun  # noqa: E402
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages  # noqa: E402
from ipu_emulator.sim.timeline import simulate_engine_runs  # noqa: E402
from ipu_emulator.views import KIND_COLOURS, plot_comparison, plot_timeline  # noqa: E402
from ipu_emulator.views.legibility import figure_problems, svg_problems  # noqa: E402
from ipu_lab_widgets.playground import render_svg  # noqa: E402
from ipu_lab_widgets.playground_model import SCHEDULES, PlaygroundConfig, simulate  # noqa: E402

FORWARD = KIND_COLOURS["forward"]


# -- the checks find planted problems -----------------------------------------------------


def test_overlapping_texts_are_found_and_named():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_title("planted")
    ax.text(0.5, 0.5, "twenty")
    ax.text(0.52, 0.51, "thirty-one")
    ax.text(0.1, 0.1, "apart")
    problems = figure_problems(fig)
    assert len(problems) == 1
    assert "'twenty' overlaps 'thirty-one' in axes 'planted' at x=" in problems[0]


def test_crowded_tick_labels_and_texts_of_different_axes_are_found():
    fig, (upper, lower) = plt.subplots(2, 1, figsize=(4, 3), gridspec_kw={"hspace": 0.15})
    upper.set_xticks(range(30))
    upper.set_xticklabels([f"tick {i}" for i in range(30)])
    lower.set_title("a title under the ticks above")
    problems = figure_problems(fig)
    assert any("'tick 0' overlaps 'tick 1'" in p for p in problems)
    assert any("a title under the ticks above" in p and "tick" in p for p in problems)


def test_hidden_and_empty_texts_do_not_count():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.text(0.5, 0.5, "shown")
    ax.text(0.5, 0.5, "hidden").set_visible(False)
    ax.text(0.5, 0.5, "")
    assert figure_problems(fig) == []


def lane_axes(widths, label=None):
    """An Axes drawn like a trace: lanes 'host' and 'IPU0', forward boxes of ``widths``
    (data units on a 0-100 axis) on IPU0, and ``label`` in the first box."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.broken_barh([(40 + 10 * i, w) for i, w in enumerate(widths)], (-0.4, 0.8),
                   facecolors=FORWARD)
    ax.set_yticks([0, 1])
    ax.set_yticklabels(["IPU0", "host"])
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.5, 1.5)
    if label is not None:
        ax.text(40 + widths[0] / 2, 0, label, ha="center", va="center", fontsize="x-small")
    return fig


def test_a_label_wider_than_its_box_is_found():
    problems = figure_problems(lane_axes([1.0], label="12345"))
    assert len(problems) == 1 and problems[0].startswith("label '12345' at x=")


def test_a_label_that_fits_its_box_is_fine():
    assert figure_problems(lane_axes([8.0], label="3")) == []


def test_a_compute_lane_of_hairlines_is_found():
    # 0.1 of 100 units on an axes about 460 px wide: under half a pixel each.
    problems = figure_problems(lane_axes([0.1] * 5))
    assert problems == ["lane 'IPU0': compute drawn only as boxes up to 0.5 px wide "
                        "(fewer than 3 px)"]
    assert figure_problems(lane_axes([0.1] * 4 + [2.0])) == []  # one box wide enough


def test_a_trace_zoomed_away_from_its_events_is_found():
    """As a set_xlim in true times does on a folded axis."""
    timeline = simulate_pipeline(unit_stages(2), "grouped", 4, unit_cost=True)
    ax = plot_timeline(timeline)
    ax.set_xlim(100, 200)
    assert [p for p in figure_problems(ax.figure) if "shows no event" in p]


def test_micro_batch_numbers_skipped_for_want_of_room_do_not_count():
    # 64 micro-batches in 3 inches: the view draws (almost) no numbers, so none can misfit.
    timeline = simulate_pipeline(unit_stages(4), "grouped", gradient_accumulation_count=16,
                                 unit_cost=True)
    ax = plot_timeline(timeline)
    ax.figure.set_size_inches(3, 3)
    assert not [p for p in figure_problems(ax.figure) if p.startswith("label")]


SVG_HEAD = '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100" style="font-size:11px">'


def test_svg_overlapping_texts_are_found():
    svg = SVG_HEAD + '<text x="10" y="20">IPU0</text><text x="20" y="22">IPU1</text></svg>'
    assert svg_problems(svg) == ["'IPU0' overlaps 'IPU1' at x=10, y=11"]


def test_svg_label_wider_than_its_box_is_found():
    svg = (SVG_HEAD + f'<rect x="100" y="10" width="12" height="24" fill="{FORWARD}">'
           '<title>forward</title></rect>'
           '<text x="106" y="26" text-anchor="middle" font-size="10px">123</text></svg>')
    assert svg_problems(svg) == ["label '123' at x=96 is 19.5 px wide, its box 12.0 px"]


def test_svg_compute_lane_of_hairlines_is_found():
    boxes = "".join(f'<rect x="{100 + 10 * i}" y="40" width="1" height="24" fill="{FORWARD}">'
                    f'<title>forward</title></rect>' for i in range(5))
    svg = SVG_HEAD + '<text x="58" y="56" text-anchor="end">IPU0</text>' + boxes + "</svg>"
    assert svg_problems(svg) == ["lane 'IPU0' at y=40: compute drawn only as boxes up to "
                                 "1.0 px wide (fewer than 3 px)"]


# -- the widgets' SVG over a grid of playground configurations ----------------------------

SPLITS = {"tutorial-mlp": (("dense128",), ("dense128", "dense64", "dense32")),
          "tutorial-convnet": (("conv2",), ("conv2", "flatten"))}
GRID = [PlaygroundConfig(model=model, splits=splits, schedule=schedule, unit_cost=unit_cost,
                         gradient_accumulation_count=count, replicas=replicas)
        for model, schedule, unit_cost, count, replicas in itertools.product(
            SPLITS, SCHEDULES, (True, False), (4, 16, 64), (1, 4))
        for splits in SPLITS[model]]


@functools.lru_cache(maxsize=None)
def playground(config):
    return simulate(config)


def config_id(config):
    return (f"{config.model}-{config.num_stages}stages-{config.schedule}-"
            f"{'unit' if config.unit_cost else 'real'}-ga{config.gradient_accumulation_count}"
            f"-x{config.replicas}")


# make test-fast draws every eighth configuration of the grid; the others are marked ``grid``.
FAST_SAMPLE = 8


def svg_case(index, config):
    return pytest.param(config, id=config_id(config),
                        marks=() if index % FAST_SAMPLE == 0 else pytest.mark.grid)


@pytest.mark.parametrize("config", [svg_case(i, c) for i, c in enumerate(GRID)])
def test_playground_svg_is_legible(config):
    result = playground(config)
    if result.ok:
        assert svg_problems(render_svg([result.timeline])) == []
    else:  # a combination the SDK refuses shows its message, never a trace
        assert result.timeline is None and result.error


def test_playground_comparison_svg_is_legible():
    timelines = [playground(PlaygroundConfig(schedule=s)).timeline
                 for s in ("grouped", "interleaved")]
    assert svg_problems(render_svg(timelines)) == []


# -- the matplotlib views over a grid of timelines -----------------------------------------

STEP = ComputeCost(forward_flops=2e9, backward_flops=4e9, weight_update_flops=1e7,
                   bytes_accessed=1e8, parameter_bytes=1000, activation_bytes=1000)
ENGINE_RUNS = {
    "per-step": lambda: simulate_engine_runs(
        [EngineRun("train", 1, STEP, input_bytes=4096, output_bytes=4)] * 20,
        title="per step", batch_size=32),
    "looped": lambda: simulate_engine_runs(
        [EngineRun("train", 20, STEP, infeed_bytes_per_iteration=4096, output_bytes=4)],
        title="looped", batch_size=32),
    "sharded": lambda: simulate_engine_runs(
        [EngineRun("train", 2, STEP, num_ipus=4, replicas=2)] * 2, title="sharded"),
}


def pipeline(schedule, unit_cost, count):
    return simulate_pipeline(unit_stages(4), schedule, gradient_accumulation_count=count,
                             unit_cost=unit_cost, batch_size=32)


def pipeline_case(index, schedule, unit_cost, count):
    return pytest.param(schedule, unit_cost, count,
                        id=f"{schedule}-{'unit' if unit_cost else 'real'}-ga{count}",
                        marks=() if index % FAST_SAMPLE == 0 else pytest.mark.grid)


# Up to the tutorial's 16 micro-batches, the sizes the notebooks draw with matplotlib (the
# playground's SVG grid above goes to 64
# micro-batches: it widens and scrolls, a notebook figure cannot).
@pytest.mark.parametrize("schedule, unit_cost, count", [
    pipeline_case(i, *case)
    for i, case in enumerate(itertools.product(SCHEDULES, (True, False), (8, 16)))])
def test_plot_timeline_of_a_pipeline_is_legible(schedule, unit_cost, count):
    assert figure_problems(plot_timeline(pipeline(schedule, unit_cost, count)).figure) == []


@pytest.mark.parametrize("name", list(ENGINE_RUNS))
def test_plot_timeline_of_engine_runs_is_legible(name):
    assert figure_problems(plot_timeline(ENGINE_RUNS[name]()).figure) == []


def test_plot_comparison_of_engine_runs_is_legible():
    timelines = [ENGINE_RUNS["per-step"](), ENGINE_RUNS["looped"]()]
    assert figure_problems(plot_comparison(timelines, titles=["per step", "looped"])) == []


def test_plot_comparison_of_schedules_is_legible():
    # As the pipeline playground notebook draws it.
    timelines = [playground(PlaygroundConfig(schedule=s)).timeline
                 for s in ("sequential", "grouped", "interleaved")]
    fig = plot_comparison(timelines, titles=["sequential", "grouped", "interleaved"])
    assert figure_problems(fig) == []
