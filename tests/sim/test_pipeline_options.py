"""Unit-cost backward:forward ratio, synthetic data and the in-flight counter."""
import pytest

from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.hardware import HostModel
from ipu_emulator.sim.pipeline_simulator import (IN_FLIGHT_COUNTER, simulate_pipeline,
                                                 unit_stages)


def first_backward_end(timeline, stage=0):
    return min(e.end for e in timeline.events if e.kind == "backward" and e.stage == stage)


def test_with_a_longer_backward_grouped_beats_interleaved_as_the_tutorial_says():
    grouped, interleaved = (
        simulate_pipeline(unit_stages(4), schedule, 16, unit_cost=True, backward_ratio=2.0)
        for schedule in ("grouped", "interleaved"))
    assert (grouped.metrics.makespan, interleaved.metrics.makespan) == (57.0, 72.0)
    # ... though its first micro-batch's backward still ends later (the tutorial's 11 vs 8).
    assert (first_backward_end(grouped), first_backward_end(interleaved)) == (15.0, 12.0)


@pytest.mark.parametrize("stages, micro_batches", [(2, 8), (4, 16), (8, 32)])
@pytest.mark.parametrize("ratio", [1.5, 2.0, 3.0])
def test_grouped_is_never_slower_than_interleaved_when_backward_is_longer(
        stages, micro_batches, ratio):
    grouped, interleaved = (
        simulate_pipeline(unit_stages(stages), schedule, micro_batches, unit_cost=True,
                          backward_ratio=ratio).metrics.makespan
        for schedule in ("grouped", "interleaved"))
    assert grouped < interleaved


def test_equal_boxes_tie_grouped_and_interleaved():
    assert {simulate_pipeline(unit_stages(4), schedule, 16, unit_cost=True).metrics.makespan
            for schedule in ("grouped", "interleaved")} == {38.0}


def test_a_backward_lasts_the_ratio_and_a_split_one_half_each():
    ratio = 3.0
    timeline = simulate_pipeline(unit_stages(3), "zero-bubble", 6, unit_cost=True,
                                 backward_ratio=ratio)
    lengths = {(e.kind, "W" in e.name): e.end - e.start for e in timeline.events
               if e.kind in ("forward", "backward")}
    assert lengths == {("forward", False): 1.0, ("backward", False): ratio / 2,
                       ("backward", True): ratio / 2}


@pytest.mark.parametrize("ratio, unit_cost, message", [
    (0, True, "backward_ratio must be a positive number, got 0."),
    (-1.0, True, "backward_ratio must be a positive number, got -1.0."),
    ("2", True, "backward_ratio must be a positive number, got '2'."),
    (2.0, False, "backward_ratio applies in unit-cost mode only"),
])
def test_bad_backward_ratios_are_refused(ratio, unit_cost, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        simulate_pipeline(unit_stages(2), "grouped", 4, unit_cost=unit_cost,
                          backward_ratio=ratio)


def tutorial(**options):
    stages = cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                    ("dense128", "dense64", "dense32"), 32)
    return simulate_pipeline(stages, "grouped", 16, batch_size=32, **options)


def test_synthetic_data_leaves_out_every_host_transfer():
    host = HostModel(host_seconds_per_batch=20e-6)  # a host that takes time to make a batch
    real, synthetic = tutorial(host=host), tutorial(host=host, synthetic_data=True)
    feeds = lambda t: [e for e in t.events if "feed" in e.name]  # noqa: E731
    host_work = lambda t: [e for e in t.events if e.lane == "host" and "prepare" in e.name]  # noqa: E731
    assert feeds(real) and host_work(real)
    assert feeds(synthetic) == [] and host_work(synthetic) == []
    assert synthetic.metrics.makespan < real.metrics.makespan
    assert "synthetic data" in synthetic.title and "synthetic" not in real.title
    # The same computation either way (durations to the picosecond: an event's end minus its
    # start rounds differently where the two timelines place it at different times).
    compute = lambda t: sorted(  # noqa: E731
        (e.name, round((e.end - e.start) * 1e12)) for e in t.events
        if e.kind in ("forward", "backward"))
    assert compute(real) == compute(synthetic)


@pytest.mark.parametrize("schedule", ["grouped", "1f1b", "gpipe"])
def test_the_in_flight_counter_peaks_where_the_metrics_say(schedule):
    timeline = simulate_pipeline(unit_stages(4), schedule, 8, unit_cost=True, replicas=2)
    peaks = {}
    for sample in timeline.counters:
        if sample.name == IN_FLIGHT_COUNTER:
            ipu = int(sample.lane[3:])
            peaks[ipu] = max(peaks.get(ipu, 0), sample.value)
    assert peaks == timeline.metrics.peak_in_flight
    assert min(s.value for s in timeline.counters if s.name == IN_FLIGHT_COUNTER) == 0
