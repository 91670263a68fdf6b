"""Legibility of the traces: no overlapping texts, box labels inside their boxes, and every
IPU lane with compute showing a box a few pixels wide, in the matplotlib views and in the
widgets' SVG, over a grid of pipelines.  First, the checks find planted problems."""
import functools
import itertools
import xml.etree.ElementTree as ET

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from ipu_emulator.record import ComputeCost, EngineRun  # noqa: E402
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages  # noqa: E402
from ipu_emulator.sim.timeline import simulate_engine_runs  # noqa: E402
from ipu_emulator.views import (KIND_COLOURS, plot_comparison, plot_timeline,  # noqa: E402
                               timeline_svg)
from ipu_emulator.views.legibility import figure_problems, svg_problems  # noqa: E402
from ipu_lab_widgets.playground import render_svg  # noqa: E402
from ipu_lab_widgets.playground_model import SCHEDULES, PlaygroundConfig, simulate  # noqa: E402

FORWARD = KIND_COLOURS["forward"]
SVG = "{http://www.w3.org/2000/svg}"


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
        ax.text(40 + widths[0] / 2, 0, label, ha="center", va="center")
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
           '<text x="106" y="26" text-anchor="middle">123</text></svg>')
    assert svg_problems(svg) == ["label '123' at x=95 is 21.5 px wide, its box 12.0 px"]


def test_svg_compute_lane_of_hairlines_is_found():
    boxes = "".join(f'<rect x="{100 + 10 * i}" y="40" width="1" height="24" fill="{FORWARD}">'
                    f'<title>forward</title></rect>' for i in range(5))
    svg = SVG_HEAD + '<text x="58" y="56" text-anchor="end">IPU0</text>' + boxes + "</svg>"
    assert svg_problems(svg) == ["lane 'IPU0' at y=40: compute drawn only as boxes up to "
                                 "1.0 px wide (fewer than 3 px)"]


# A phase shaded but named nowhere; text smaller than the tick labels; a legend entry whose
# colour is not its boxes'; two legends in one figure.


def phase_axes(name="ramp-down"):
    """A trace-like Axes with one phase shaded as the views shade it (gid "phase:<name>")."""
    fig = lane_axes([8.0])
    fig.axes[0].axvspan(60, 70, color="#E69F00", alpha=0.12, gid=f"phase:{name}")
    return fig


def test_a_phase_named_nowhere_is_found():
    assert figure_problems(phase_axes()) == [
        "phase 'ramp-down' is shaded but named nowhere (neither above its lanes, in full or as "
        "'down', nor in the legend)"]


@pytest.mark.parametrize("name, text", [("ramp-down", "down"), ("weight update", "WU"),
                                        ("ramp-up", "ramp-up")])
def test_a_phase_named_in_full_or_short_above_it_is_fine(name, text):
    fig = phase_axes(name)
    fig.axes[0].text(65, 1.2, text, ha="center")
    assert figure_problems(fig) == []


def test_a_phase_named_in_the_legend_is_fine_and_a_longer_word_does_not_name_it():
    from matplotlib.patches import Patch

    fig = phase_axes("main")
    fig.axes[0].set_title("mainly idle")  # "main" inside another word names nothing
    assert [p for p in figure_problems(fig) if "phase 'main'" in p]
    fig.axes[0].legend(handles=[Patch(color="#009E73", label="main")])
    assert figure_problems(fig) == []


def test_text_smaller_than_the_tick_labels_is_found():
    fig = lane_axes([8.0])
    fig.axes[0].set_title("planted")
    fig.axes[0].text(80, 0, "7 in flight", fontsize="x-small")
    fig.axes[0].text(80, 1, "as big as a tick label")
    assert figure_problems(fig) == [
        "text '7 in flight' in axes 'planted' is 6.94 pt, smaller than the tick labels (10 pt)"]


@pytest.mark.parametrize("size", [9.0, 9.5])
def test_text_up_to_a_point_smaller_than_the_tick_labels_is_found(size):
    # A point smaller is still smaller: only rounding (SIZE_TOLERANCE, 0.05) is let through
    # (a tolerance of 1 pt passed every other test).
    fig = lane_axes([8.0])
    fig.axes[0].set_title("planted")
    fig.axes[0].text(80, 0, "7 in flight", fontsize=size)
    assert figure_problems(fig) == [f"text '7 in flight' in axes 'planted' is {size:g} pt, "
                                    "smaller than the tick labels (10 pt)"]


def hatched_over_boxes(tagged):
    """Forward boxes under a translucent white hatching (as notebook 05's folded launch box
    was), with a legend entry in the boxes' own colour."""
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(6, 2))
    ax.broken_barh([(10, 30), (60, 30)], (-0.4, 0.8), facecolors=FORWARD,
                   gid="kind:forward" if tagged else None)
    for start in (10, 60):
        ax.axvspan(start, start + 30, facecolor="white", edgecolor="#777777", hatch="////",
                   linewidth=0, alpha=0.6)
    ax.set_xlim(0, 100)
    ax.legend(handles=[Patch(facecolor=FORWARD, label="forward")], loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    return fig


@pytest.mark.parametrize("tagged", [True, False])
def test_a_legend_entry_whose_boxes_show_another_colour_is_found(tagged):
    """Boxes of the kind: tagged as the views tag them, or (untagged) given the entry's
    colour; what counts is the colour they show once drawn."""
    problems = figure_problems(hatched_over_boxes(tagged))
    assert len(problems) == 1
    assert problems[0].startswith("legend entry 'forward' is #0072b2, its boxes are drawn #")


def test_a_legend_entry_of_another_colour_than_its_boxes_is_found_and_one_matching_box_suffices():
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(6, 2))
    ax.broken_barh([(10, 30)], (-0.4, 0.8), facecolors="#999999", gid="kind:host: other work")
    ax.legend(handles=[Patch(facecolor="#555555", label="host: other work")])
    assert figure_problems(fig) == ["legend entry 'host: other work' is #555555, its boxes are "
                                    "drawn #999999"]
    # Faded boxes (a followed micro-batch's neighbours) may differ if one box matches.
    ax.broken_barh([(60, 30)], (-0.4, 0.8), facecolors="#555555", gid="kind:host: other work")
    assert figure_problems(fig) == []


def test_two_legends_in_one_figure_are_found():
    fig, (upper, lower) = plt.subplots(2, 1, figsize=(6, 4))
    for ax in (upper, lower):
        ax.plot([0, 1], [0, 1], label="a line")
        ax.legend()
    assert figure_problems(fig) == ["2 legends in one figure: one legend per figure (traces "
                                    "compared one above the other share one)"]
    lower.get_legend().set_visible(False)  # a hidden legend is not seen
    assert figure_problems(fig) == []


def test_svg_phase_named_nowhere_is_found_and_a_short_name_or_legend_entry_names_it():
    band = ('<rect x="100" y="10" width="40" height="24" fill="#CC79A7" fill-opacity="0.12" '
            'data-phase="weight update"><title>weight update</title></rect>')
    assert svg_problems(SVG_HEAD + band + "</svg>") == [
        "phase 'weight update' is shaded but named nowhere (neither above its lanes, in full "
        "or as 'WU', nor in the legend)"]
    above = '<text x="120" y="8" text-anchor="middle">WU</text>'
    assert svg_problems(SVG_HEAD + band + above + "</svg>") == []
    legend = '<g class="legend"><text x="200" y="80">weight update (WU)</text></g>'
    assert svg_problems(SVG_HEAD + band + legend + "</svg>") == []


def test_svg_text_smaller_than_the_tick_labels_is_found():
    ticks = ('<text x="100" y="90" class="tick">0</text>'
             '<text x="200" y="90" class="tick">50</text>')
    small = '<text x="10" y="40" font-size="9px">7 in flight</text>'
    assert svg_problems(SVG_HEAD + ticks + small + "</svg>") == [
        "text '7 in flight' is 9 px, smaller than the tick labels (11 px)"]
    # Without marked tick labels, the picture's own font size is theirs.
    assert svg_problems(SVG_HEAD + small + "</svg>") == [
        "text '7 in flight' is 9 px, smaller than the tick labels (11 px)"]


@pytest.mark.parametrize("size", [10, 10.5])
def test_svg_text_up_to_a_pixel_smaller_than_the_tick_labels_is_found(size):
    small = f'<text x="10" y="40" font-size="{size}px">7 in flight</text>'
    assert svg_problems(SVG_HEAD + small + "</svg>") == [
        f"text '7 in flight' is {size:g} px, smaller than the tick labels (11 px)"]


def test_svg_legend_entry_of_another_colour_than_its_boxes_is_found():
    box = ('<rect x="100" y="10" width="40" height="24" fill="#6a51a3" fill-opacity="0.45" '
           'data-kind="micro-batches in flight"><title>in flight</title></rect>')
    swatch = ('<g class="legend"><rect x="100" y="60" width="12" height="12" fill="#6a51a3" '
              'data-legend="micro-batches in flight"/>'
              '<text x="116" y="70">micro-batches in flight</text></g>')
    assert svg_problems(SVG_HEAD + box + swatch + "</svg>") == [
        "legend entry 'micro-batches in flight' is #6a51a3, its boxes are drawn #bcb1d6"]
    matching = swatch.replace('fill="#6a51a3"', 'fill="#6a51a3" fill-opacity="0.45"')
    assert svg_problems(SVG_HEAD + box + matching + "</svg>") == []


def test_svg_two_legends_are_found():
    legend = '<g class="legend"><text x="{}" y="90">forward</text></g>'
    assert svg_problems(SVG_HEAD + legend.format(10) + legend.format(200) + "</svg>") == [
        "2 legends in one picture: one legend per figure (traces compared one above the other "
        "share one)"]


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


def pipeline(schedule, unit_cost, count, stages=4, passes=1):
    return _pipeline(schedule, unit_cost, count, stages, passes)


@functools.lru_cache(maxsize=None)  # called with positional arguments only: one key a trace
def _pipeline(schedule, unit_cost, count, stages, passes):
    return simulate_pipeline(unit_stages(stages), schedule, gradient_accumulation_count=count,
                             unit_cost=unit_cost, repeat_count=passes, batch_size=32)


# A drawing takes a few tenths of a second (most of this file's time), and several tests
# look at the same trace from different sides: each trace is drawn and checked once, by the
# first test that needs it.  A figure stays whole after close_figures closes it (the tests
# read its texts and patches; none changes it).  By the Timeline's identity (a Timeline is
# not hashable; ``_pipeline`` keeps each alive, so its id is never reused).
_DRAWN, _DRAWN_SVG = {}, {}


def drawn(timeline):
    """``plot_timeline(timeline)``'s Axes and the figure_problems of its drawing."""
    if id(timeline) not in _DRAWN:
        ax = plot_timeline(timeline)
        _DRAWN[id(timeline)] = ax, figure_problems(ax.figure)
    return _DRAWN[id(timeline)]


def drawn_svg(timeline):
    """``timeline_svg([timeline])`` and its svg_problems."""
    if id(timeline) not in _DRAWN_SVG:
        svg = timeline_svg([timeline])
        _DRAWN_SVG[id(timeline)] = svg, svg_problems(svg)
    return _DRAWN_SVG[id(timeline)]


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
    assert drawn(pipeline(schedule, unit_cost, count))[1] == []


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


# -- the views' own figures of the schedules the notebooks draw ----------------------------

# Wide ramps: 4 stages, 8 micro-batches in unit steps (the playground's figures); narrow
# ramps: 2 stages, 16 micro-batches, 2 passes at real costs (as notebook 09's whole run).
RAMPS = {"wide": dict(stages=4, count=8, unit_cost=True, passes=1),
         "narrow": dict(stages=2, count=16, unit_cost=False, passes=2)}


def schedule_trace(schedule, ramps):
    """The same Timeline object for the same arguments (``pipeline`` is cached), so that
    ``drawn`` draws it once: the wide ramps are the grid's unit-cost cases of 8."""
    return pipeline(schedule, count=RAMPS[ramps]["count"], unit_cost=RAMPS[ramps]["unit_cost"],
                    stages=RAMPS[ramps]["stages"], passes=RAMPS[ramps]["passes"])


@pytest.mark.parametrize("ramps", list(RAMPS))
@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential"])
def test_the_views_name_every_phase_of_the_schedules_notebooks_draw(schedule, ramps):
    timeline = schedule_trace(schedule, ramps)
    assert drawn(timeline)[1] == []
    assert drawn_svg(timeline)[1] == []


def test_narrow_ramps_are_named_short_or_in_the_legend():
    timeline = schedule_trace("grouped", "narrow")
    ax, problems = drawn(timeline)  # drawn, so each phase's text knows what it showed
    assert problems == []
    shown = [t.shown for t in ax.texts if hasattr(t, "shown")]
    assert "main" in shown
    assert "ramp-up" not in shown and "ramp-down" not in shown  # too narrow for their names
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"ramp-up (up)", "main", "ramp-down (down)"} <= set(legend)
    svg = timeline_svg([timeline], width=960)
    assert svg.count(">ramp-up (up)</text>") == 1 and svg.count(">ramp-down (down)</text>") == 1


def test_wide_ramps_are_named_in_full_above_the_lanes():
    svg = drawn_svg(schedule_trace("grouped", "wide"))[0]
    for name in ("ramp-up", "main", "ramp-down"):
        assert f'text-anchor="middle" fill="#333">{name}</text>' in svg


def test_a_sequential_pass_is_named_one_ipu_at_a_time_not_main():
    timeline = schedule_trace("sequential", "wide")
    ax = drawn(timeline)[0]  # drawn, so each phase's text knows what it showed
    shown = [t.shown for t in ax.texts if hasattr(t, "shown")]
    assert "one IPU at a time" in shown and "main" not in shown
    svg = drawn_svg(timeline)[0]
    assert 'data-phase="one IPU at a time"' in svg and 'data-phase="main"' not in svg


def test_the_host_lane_is_tinted_only_by_the_hosts_own_boxes():
    """Phases, engine runs and folds shade the IPU lanes only (notebook 09's host lane
    looked busy all along)."""
    timeline = schedule_trace("grouped", "narrow")
    ax = drawn(timeline)[0]
    host_bottom = 0.5 - 1.0  # the host lane is the top one, y from -0.5 to 0.5
    shading = [p for p in ax.patches if (p.get_gid() or "").startswith("phase:")]
    assert shading
    for patch in shading:
        top = ax.transData.inverted().transform(
            ax.transAxes.transform((0, patch.get_path().get_extents(
                patch.get_patch_transform()).y1)))[1]
        assert top <= host_bottom + 1e-9
    root = ET.fromstring(drawn_svg(timeline)[0])
    host_y = min(float(r.get("y")) for r in root.iter(SVG + "rect")
                 if r.get("data-kind", "").startswith("host"))
    for rect in root.iter(SVG + "rect"):
        if rect.get("data-phase") or rect.get("fill") == "url(#fold)" or (
                rect.get("fill") == "#000" and rect.get("fill-opacity")):
            assert float(rect.get("y")) > host_y + 20


def test_a_comparison_has_one_legend_and_each_axes_keeps_its_own_hidden():
    fig = plot_comparison([schedule_trace(s, "wide") for s in ("grouped", "sequential")])
    assert not [ax for ax in fig.axes if ax.get_legend().get_visible()]
    assert len(fig.legends) == 1  # under the traces, which keep the figure's width
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "main" in names and "one IPU at a time (1 IPU)" in names  # both traces' entries
    # Kinds first, phases last in a pass's order, whichever trace brought them.
    assert names[:2] == ["forward", "backward"]
    assert names[-4:] == ["ramp-up (up)", "main", "ramp-down (down)", "one IPU at a time (1 IPU)"]
    assert figure_problems(fig) == []
    # As notebook 03 does: each Axes still has a legend to take handles from or remove.
    fig, axes = plt.subplots(2, 1, figsize=(10, 8))
    for ax in axes:
        plot_timeline(schedule_trace("grouped", "wide"), ax=ax)
    fig.tight_layout()
    assert all(ax.get_legend() is not None for ax in axes)
    assert sum(ax.get_legend().get_visible() for ax in axes) == 1
    assert figure_problems(fig) == []


def test_a_window_names_only_the_phases_it_shows():
    timeline = schedule_trace("grouped", "wide")  # ramp-up until step 3, ramp-down from 19
    ax = plot_timeline(timeline, window=(0, 5))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "ramp-up (up)" in legend and "main" in legend and "ramp-down (down)" not in legend
    assert figure_problems(ax.figure) == []
    svg = timeline_svg([timeline], start=0, end=5)
    assert ">ramp-up (up)</text>" in svg and "ramp-down" not in svg
    assert svg_problems(svg) == []
