"""Views: matplotlib trace, comparison figure, text summary, Chrome trace, plain data."""
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from ipu_emulator.record import ComputeCost, EngineRun  # noqa: E402
from ipu_emulator.sim.timeline import Event, Timeline, simulate_engine_runs  # noqa: E402
from ipu_emulator.views import (  # noqa: E402
    KIND_COLOURS,
    format_seconds,
    plot_comparison,
    plot_timeline,
    save_chrome_trace,
    summary_table,
    to_chrome_trace,
    to_dict,
)
from matplotlib.collections import PolyCollection  # noqa: E402


STEP = ComputeCost(forward_flops=2e9, backward_flops=4e9, weight_update_flops=1e7,
                   bytes_accessed=1e8, parameter_bytes=1000, activation_bytes=1000)


def per_step(n=20):
    return simulate_engine_runs(
        [EngineRun("train", 1, STEP, input_bytes=4096, output_bytes=4)] * n,
        title="per step", batch_size=32)


def looped(n=20):
    return simulate_engine_runs(
        [EngineRun("train", n, STEP, infeed_bytes_per_iteration=4096, output_bytes=4)],
        title="looped", batch_size=32)


def sharded():
    return simulate_engine_runs([EngineRun("train", 2, STEP, num_ipus=4, replicas=2)] * 2,
                                title="sharded")


def bar_collections(ax):
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_palette_covers_every_kind_and_is_distinct():
    from ipu_emulator.sim.timeline import KINDS
    assert set(KIND_COLOURS) == set(KINDS)
    assert len(set(KIND_COLOURS.values())) == len(KINDS)


def test_plot_timeline_draws_lanes_kinds_and_clock():
    timeline = per_step()
    ax = plot_timeline(timeline)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[::-1] == ["host", "IPU0"]  # host lane on top
    groups = {(e.lane, e.kind) for e in timeline.events}
    assert len(bar_collections(ax)) == len(groups) + 1  # + engine-run shading
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["forward", "backward", "weight update", "sync", "stream copy",
                      "host: engine-run launch"]
    assert ax.get_xlabel() == "simulated IPU time (ms)"
    assert ax.get_title(loc="left") == "per step"


def test_plot_timeline_sharded_lanes_and_units():
    ax = plot_timeline(sharded(), title="custom", time_unit="us")
    assert len(ax.get_yticklabels()) == 5  # host + 4 IPUs
    assert ax.get_xlabel() == "simulated IPU time (µs)"
    assert ax.get_title(loc="left") == "custom"
    assert "exchange" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="time_unit"):
        plot_timeline(sharded(), time_unit="hours")


def test_engine_run_shading_skipped_for_many_runs():
    many = simulate_engine_runs([EngineRun("train", 1, ComputeCost(forward_flops=1e6))] * 201)
    ax = plot_timeline(many)
    assert len(bar_collections(ax)) == len({(e.lane, e.kind) for e in many.events})


def test_plot_comparison_shares_time_axis():
    a, b = per_step(), looped()
    fig = plot_comparison([a, b])
    axes = fig.get_axes()
    assert len(axes) == 2
    assert axes[0].get_xlim() == axes[1].get_xlim()
    assert axes[0].get_xlim()[1] == pytest.approx(a.metrics.makespan * 1e3)
    assert "makespan" in axes[0].get_title(loc="left") and "20 engine runs" in axes[0].get_title(loc="left")
    assert "1 engine run" in axes[1].get_title(loc="left") and "simulated IPU time" in axes[1].get_title(loc="left")
    assert axes[1].get_xlabel() == "simulated IPU time (ms)"
    fig = plot_comparison([a, b], titles=["A", "B"])
    assert fig.get_axes()[0].get_title(loc="left").startswith("A: makespan")
    with pytest.raises(ValueError):
        plot_comparison([a, b], titles=["only one"])


def test_summary_table_names_the_clock():
    text = summary_table(per_step())
    assert text.splitlines()[0] == "Simulated IPU timeline: per step"
    assert "makespan (simulated IPU time)" in text
    assert "host overhead (simulated host time)" in text   # the launch is the host's work
    assert "samples/s" in text and "IPU0" in text and "engine runs" in text
    sharded_text = summary_table(sharded())
    assert all(f"IPU{i}" in sharded_text for i in range(4))
    assert "samples/s" not in sharded_text  # no batch size given


def test_format_seconds():
    assert format_seconds(0.0123) == "12.3 ms"
    assert format_seconds(2.5) == "2.5 s"
    assert format_seconds(4e-6) == "4 µs"
    assert format_seconds(5e-4) == "500 µs"      # under a millisecond stays in µs
    assert format_seconds(1e-3) == "1 ms"


def test_chrome_trace_round_trips_with_metadata():
    timeline = sharded()
    trace = json.loads(json.dumps(to_chrome_trace(timeline)))
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    assert {"name": "process_name", "ph": "M", "pid": 1,
            "args": {"name": "Simulated IPU system"}} in meta
    threads = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert threads == {1: "host", 2: "IPU0", 3: "IPU1", 4: "IPU2", 5: "IPU3"}
    assert sum(e["name"] == "thread_sort_index" for e in meta) == 5

    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(timeline.events)
    first = timeline.events[0]
    assert slices[0]["ts"] == pytest.approx(first.start * 1e6)
    assert slices[0]["dur"] == pytest.approx(first.duration * 1e6)
    assert set(slices[0]["args"]) >= {"kind", "stage", "micro_batch", "iteration", "engine_run"}
    by_track = {}
    for s in slices:
        by_track.setdefault(s["tid"], []).append((s["ts"], s["ts"] + s["dur"]))
    for spans in by_track.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-9  # no overlapping slices on a track

    counters = [e for e in events if e["ph"] == "C"]
    assert {c["name"] for c in counters} == {f"memory IPU{i}" for i in range(4)}
    starts = [e for e in events if e["ph"] == "s"]
    finishes = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(finishes) == len(timeline.flows) > 0
    assert {e["id"] for e in starts} == {e["id"] for e in finishes}


def test_chrome_trace_rejects_overlapping_events():
    bad = Timeline(events=[Event("IPU0", "forward", "a", 0.0, 2.0, ipu=0),
                           Event("IPU0", "backward", "b", 1.0, 3.0, ipu=0)],
                   lanes=["host", "IPU0"])
    with pytest.raises(ValueError, match="overlapping"):
        to_chrome_trace(bad)


def test_save_chrome_trace(tmp_path):
    path = save_chrome_trace(looped(), tmp_path / "trace.json")
    with open(path) as handle:
        assert len(json.load(handle)["traceEvents"]) > 0


def test_to_dict_is_json_friendly():
    timeline = looped()
    data = json.loads(json.dumps(to_dict(timeline)))
    assert data["clock"] == "simulated IPU time"
    assert len(data["events"]) == len(timeline.events)
    assert set(data["events"][0]) >= {"ipu", "stage", "kind", "micro_batch", "start", "end"}
    assert data["metrics"]["makespan"] == pytest.approx(timeline.metrics.makespan)
    assert data["metrics"]["samples_per_second"] == pytest.approx(timeline.metrics.samples_per_second)
    assert data["engine_runs"] == [{"start": 0.0, "end": timeline.metrics.makespan}]


def test_summary_table_prints_each_ipus_utilisation_as_a_percentage():
    timeline = sharded()
    text = summary_table(timeline)
    for ipu, utilisation in timeline.metrics.utilisation.items():
        row = next(line for line in text.splitlines() if line.strip().startswith(f"IPU{ipu} "))
        assert f"{100 * utilisation:.2f} %" in row


def test_micro_batch_numbers_are_drawn_only_where_they_fit(monkeypatch):
    from matplotlib.text import Text
    from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    drawn = []
    text_draw = Text.draw

    def spy(self, renderer):  # FittingLabel.draw calls Text.draw only when the number fits
        if type(self).__name__ == "FittingLabel" and self.get_text().isdigit():
            drawn.append(self.get_text())  # a micro-batch number (phase names fit too)
        return text_draw(self, renderer)

    monkeypatch.setattr(Text, "draw", spy)
    timeline = simulate_pipeline(unit_stages(4), "grouped", 16, unit_cost=True)
    ax = plot_timeline(timeline)
    ax.set_xlim(0, 400)         # a one-unit box is a pixel or two wide: no number fits
    ax.figure.canvas.draw()
    assert drawn == []
    ax.set_xlim(0, 12)          # zoomed in: the boxes in view carry their numbers
    ax.figure.canvas.draw()
    assert sorted(set(drawn)) == ["0", "1", "2", "3", "4", "5", "6", "7"]
    plt.close(ax.figure)


def test_a_labels_kept_size_is_what_matplotlib_measures_in_each_font_resolution_and_format(
        monkeypatch):
    """FittingLabel keeps each text's size (a trace has hundreds of labels and few texts):
    what it keeps is what matplotlib measures, for a larger font, another resolution, and
    each file format's own renderer."""
    import io
    from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    ax = plot_timeline(simulate_pipeline(unit_stages(2), "grouped", 4, unit_cost=True))
    labels = [text for text in ax.texts if hasattr(text, "shown")]
    kept, differences = type(labels[0])._size, []

    def checked(label, renderer):   # the kept size against a measure of the label as placed
        size, extent = kept(label, renderer), label.get_window_extent(renderer)
        if size != pytest.approx((extent.width, extent.height), abs=1e-9):
            differences.append((type(renderer).__name__, label.get_text(), size))
        return size

    monkeypatch.setattr(type(labels[0]), "_size", checked)
    ax.figure.canvas.draw()
    labels[0].set_fontsize(30)
    ax.figure.canvas.draw()
    ax.figure.set_dpi(200)
    ax.figure.canvas.draw()
    for file_format in ("png", "svg", "pdf"):
        ax.figure.savefig(io.BytesIO(), format=file_format, dpi=150)
    assert len(labels) > 4 and differences == []
    plt.close(ax.figure)
