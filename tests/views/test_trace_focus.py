"""What makes a trace show its point: folded idle stretches, the in-flight strip under each
IPU lane, following one micro-batch; in the matplotlib and the SVG views alike."""
import xml.etree.ElementTree as ET

import matplotlib
import pytest
from hypothesis import given, strategies as st

from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.sim.timeline import simulate_engine_runs
from ipu_emulator.views import plot_comparison, plot_timeline, timeline_svg
from ipu_emulator.views.time_axis import FOLD_WIDTH_SHARE, FoldedTime, idle_stretches

matplotlib.use("Agg")
SVG = "{http://www.w3.org/2000/svg}"


def tutorial_pipeline(**options):
    stages = cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                    ("dense128", "dense64", "dense32"), 32)
    return simulate_pipeline(stages, "grouped", 16, batch_size=32, **options)


def per_step(steps=20):
    return simulate_engine_runs([EngineRun("step", 1, ComputeCost(forward_flops=1e9))] * steps)


# -- the folded time axis -----------------------------------------------------------------


def test_a_long_launch_is_folded_and_the_rest_keeps_its_scale():
    axis = FoldedTime.build([(0.0, 1.0)], 0.0, 1.5)
    assert axis.folds == ((0.0, 1.0),)
    assert axis.x(1.0) == pytest.approx(FOLD_WIDTH_SHARE * axis.width)
    assert axis.x(1.4) - axis.x(1.1) == pytest.approx(0.3)  # true scale outside the fold


def test_short_or_many_idle_stretches_stay_to_scale():
    assert FoldedTime.build([(0.0, 0.1)], 0.0, 1.0).folds == ()  # 10 %: not worth folding
    many = [(k / 10, k / 10 + 0.05) for k in range(10)]
    assert FoldedTime.build(many, 0.0, 1.0).folds == ()
    assert FoldedTime.build([(0.0, 0.5)], 0.0, 1.0, fold=False).folds == ()


@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0.1, 5)), max_size=4),
       st.lists(st.floats(0, 20), min_size=2, max_size=20))
def test_the_folded_axis_keeps_time_in_order(raw_stretches, times):
    stretches, at = [], 0.0
    for gap, length in raw_stretches:  # disjoint stretches in order
        stretches.append((at + gap, at + gap + length))
        at += gap + length
    end = at + 1.0
    axis = FoldedTime.build(stretches, 0.0, end)
    xs = [axis.x(t) for t in sorted(times)]
    assert xs == sorted(xs)
    assert axis.x(0.0) == 0 and axis.x(end) == pytest.approx(axis.width)
    for tick in axis.ticks(1.0):
        assert not any(a < tick < b for a, b in axis.folds)


def test_the_pipeline_trace_folds_the_launch_and_says_how_long_it_was():
    timeline = tutorial_pipeline(synthetic_data=True)
    (a, b), = idle_stretches([timeline], 0.0, timeline.metrics.makespan)[:1]
    assert a == 0 and b > 0.5 * timeline.metrics.makespan  # the launch is most of the run
    ax = plot_timeline(timeline)
    texts = [t.get_text() for t in ax.texts]
    assert any(text.endswith("ms idle") for text in texts)
    first_compute = min(e.start for e in timeline.events if e.kind == "forward")
    # Once folded, the launch takes a few per cent of the width, not most of it.
    forward_blue = matplotlib.colors.to_rgba("#0072B2")
    trace_x = [path.vertices[:, 0].min() for c in ax.collections
               if len(c.get_facecolor()) and tuple(c.get_facecolor()[0]) == forward_blue
               for path in c.get_paths()]
    assert min(trace_x) / ax.get_xlim()[1] < 0.1
    assert first_compute / timeline.metrics.makespan > 0.5


def test_a_per_step_trace_keeps_its_host_gaps_to_scale():
    """There the waiting on the host is the lesson."""
    ax = plot_timeline(per_step())
    assert not any("idle" in t.get_text() for t in ax.texts)
    root = ET.fromstring(timeline_svg([per_step()]))
    assert not any(r.get("fill") == "url(#fold)" for r in root.iter(SVG + "rect"))


def test_the_svg_folds_the_launch_too():
    root = ET.fromstring(timeline_svg([tutorial_pipeline()]))
    folds = [r for r in root.iter(SVG + "rect") if r.get("fill") == "url(#fold)"
             and r.find(SVG + "title") is not None]  # not the legend's swatch
    assert len(folds) == 1
    assert folds[0].find(SVG + "title").text.startswith("all IPUs idle for ")
    assert any((t.text or "").endswith(" ms") for t in root.iter(SVG + "text")
               if t.get("stroke") == "#fff")


# -- the in-flight strip ------------------------------------------------------------------


def test_each_ipu_of_a_pipeline_gets_an_in_flight_strip():
    timeline = simulate_pipeline(unit_stages(4), "grouped", 8, unit_cost=True)
    # A strip's name takes two lines at the tick labels' size: "in flight" over its peak.
    labels = [t.get_text().replace("\n", " ")
              for t in plot_timeline(timeline).get_yticklabels()][::-1]
    assert labels == ["IPU0", "in flight (peak 7)", "IPU1", "in flight (peak 5)",
                      "IPU2", "in flight (peak 3)", "IPU3", "in flight (peak 1)"]
    assert [t.get_text() for t in plot_timeline(timeline, memory=False).get_yticklabels()] \
        == ["IPU3", "IPU2", "IPU1", "IPU0"]
    root = ET.fromstring(timeline_svg([timeline]))
    assert len(list(root.iter(SVG + "polygon"))) == 4


def test_real_costs_add_the_peak_memory_to_the_strip():
    labels = [t.get_text().replace("\n", " ")
              for t in plot_timeline(tutorial_pipeline()).get_yticklabels()]
    assert any(label.startswith("in flight (peak 7, ") and label.endswith("B)")
               for label in labels)


def test_a_trace_that_is_not_a_pipeline_gets_no_strip():
    assert [t.get_text() for t in plot_timeline(per_step()).get_yticklabels()] == ["IPU0", "host"]


# -- following one micro-batch ------------------------------------------------------------


def test_following_a_micro_batch_fades_the_others_and_outlines_it():
    timeline = simulate_pipeline(unit_stages(4), "grouped", 8, unit_cost=True)
    ax = plot_timeline(timeline, follow_micro_batch=0)
    outlined = [c for c in ax.collections if c.get_linewidth()[0] == pytest.approx(1.2)]
    faded = [c for c in ax.collections if c.get_alpha() == 0.25]
    assert outlined and faded
    assert sum(len(c.get_paths()) for c in outlined) == 2 * 4  # F and B on each stage
    labels = [t.get_text() for t in ax.texts if t.get_color() == "white"]
    assert labels and set(labels) == {"0"}
    assert "micro-batch 0" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_following_in_svg():
    timeline = simulate_pipeline(unit_stages(4), "1f1b", 8, unit_cost=True)
    root = ET.fromstring(timeline_svg([timeline], follow_micro_batch=3))
    rects = list(root.iter(SVG + "rect"))
    outlined = [r for r in rects if r.get("stroke") == "#000" and r.find(SVG + "title") is not None]
    assert len(outlined) == 8
    assert all("micro-batch 3" in r.find(SVG + "title").text for r in outlined)
    assert sum(1 for r in rects if r.get("fill-opacity") == "0.25") == 2 * 4 * 7


def test_following_a_micro_batch_the_trace_lacks_says_so():
    timeline = simulate_pipeline(unit_stages(2), "grouped", 4, unit_cost=True)
    with pytest.raises(ValueError, match=r"follow_micro_batch=9: this trace has "
                                         r"micro-batches 0 to 3\."):
        plot_timeline(timeline, follow_micro_batch=9)
    with pytest.raises(ValueError, match="no micro-batches to follow"):
        timeline_svg([per_step()], follow_micro_batch=0)


def test_the_comparison_headings_give_the_bubble_of_a_pipeline():
    fig = plot_comparison([simulate_pipeline(unit_stages(4), s, 8, unit_cost=True)
                           for s in ("grouped", "gpipe")], titles=["A", "B"])
    assert [ax.get_title(loc="left") for ax in fig.get_axes()] == [
        "A: makespan 22 time steps, bubble 27.3 %", "B: makespan 22 time steps, bubble 27.3 %"]


# -- the Perfetto export's counterparts ---------------------------------------------------


def test_perfetto_gets_the_in_flight_counters_and_the_bubble_split():
    from ipu_emulator.views import to_chrome_trace, to_dict
    timeline = simulate_pipeline(unit_stages(4), "grouped", 8, unit_cost=True)
    trace = to_chrome_trace(timeline)
    in_flight = [e for e in trace["traceEvents"]
                 if e["ph"] == "C" and e["name"] == "micro-batches in flight IPU0"]
    assert max(e["args"]["count"] for e in in_flight) == 7
    assert trace["otherData"]["bubble ramp-up"] == "13.6 %"
    assert trace["otherData"]["bubble imbalance"] == "0.0 %"
    # Each slice names its micro-batch, which Perfetto's search can follow.
    assert {e["args"]["micro_batch"] for e in trace["traceEvents"]
            if e["ph"] == "X" and e["args"].get("kind") == "forward"} == set(range(8))
    assert to_dict(timeline)["metrics"]["bubble_breakdown"]["ramp-down"] == pytest.approx(3 / 22)


def test_a_window_draws_that_stretch_with_true_tick_labels():
    timeline = tutorial_pipeline(repeat_count=3, synthetic_data=True)
    first = views_one_pass_span(timeline, 1)
    ax = plot_timeline(timeline, window=first)
    labels = [float(t.get_text()) for t in ax.get_xticklabels()]
    scale = 1e3 if ax.get_xlabel().endswith("(ms)") else 1e6
    assert first[0] * scale - 1e-9 <= min(labels) and max(labels) <= first[1] * scale + 1e-9
    shown = {e.iteration for e in timeline.events if e.ipu is not None
             and e.end >= first[0] and e.start <= first[1]}
    assert 1 in shown
    from ipu_emulator.views.legibility import figure_problems
    assert figure_problems(ax.figure) == []


def views_one_pass_span(timeline, index):
    events = [e for e in timeline.events if e.ipu is not None and e.iteration == index]
    return min(e.start for e in events), max(e.end for e in events)


def test_the_host_launch_is_told_apart_from_the_hosts_other_work():
    from ipu_emulator.sim.hardware import HostModel
    timeline = tutorial_pipeline(host=HostModel(host_seconds_per_batch=1e-5))
    legend = [t.get_text() for t in plot_timeline(timeline, fold_idle=False).get_legend().get_texts()]
    assert {"host: engine-run launch", "host: other work"} <= set(legend)
    svg = timeline_svg([timeline])
    assert "host: engine-run launch" in svg and "#555555" in svg


def test_the_strip_can_show_memory_in_bytes():
    timeline = tutorial_pipeline(synthetic_data=True)
    labels = [t.get_text().replace("\n", " ")
              for t in plot_timeline(timeline, memory="bytes").get_yticklabels()]
    peak = timeline.metrics.peak_memory_bytes[0]
    from ipu_emulator.sim.timeline import format_bytes
    assert f"memory (peak {format_bytes(peak)})" in labels
    svg = timeline_svg([timeline], memory="bytes")
    assert f">{format_bytes(peak)}</text>" in svg and ">memory</text>" in svg
    with pytest.raises(ValueError, match="memory must be True, False, 'auto' or 'bytes'"):
        plot_timeline(timeline, memory="MB")
