"""The bubble split by cause: the parts add up, each cause lands where it belongs, and the
textbook fill-and-drain value is met where it should be."""
import pytest

from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.bubbles import CAUSES, bubble_breakdown, textbook_bubble
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.sim.schedule_rules import SCHEDULE_NAMES
from ipu_emulator.sim.timeline import COMPUTE_KINDS

TUTORIAL_SPLITS = ("dense128", "dense64", "dense32")


def tutorial_stages(splits=TUTORIAL_SPLITS):
    return cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"), splits, 32)


def micro_batches_for(schedule):
    return 16 if schedule != "interleaved-1f1b" else 8


@pytest.mark.parametrize("schedule", SCHEDULE_NAMES)
@pytest.mark.parametrize("options", [
    dict(unit_cost=True), dict(unit_cost=True, backward_ratio=2.0),
    dict(unit_cost=True, repeat_count=3, replicas=2), dict(unit_cost=True, training=False),
    dict(), dict(replicas=4, repeat_count=2), dict(recompute=True, offload_weights=True),
    dict(synthetic_data=True, offload_activations=True),
])
def test_the_causes_add_up_to_the_bubble_fraction(schedule, options):
    unit = options.get("unit_cost", False)
    stages = unit_stages(4) if unit else tutorial_stages()
    timeline = simulate_pipeline(stages, schedule, micro_batches_for(schedule),
                                 batch_size=None if unit else 32, **options)
    parts = bubble_breakdown(timeline)
    assert tuple(parts) == CAUSES
    assert all(share >= -1e-12 for share in parts.values())
    assert sum(parts.values()) == pytest.approx(timeline.metrics.bubble_fraction, abs=1e-9)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "grouped", "interleaved"])
@pytest.mark.parametrize("stages, micro_batches", [(2, 4), (4, 8), (4, 16), (8, 32)])
def test_equal_unit_stages_have_only_the_textbook_fill_and_drain(schedule, stages,
                                                                  micro_batches):
    timeline = simulate_pipeline(unit_stages(stages), schedule, micro_batches, unit_cost=True)
    parts = bubble_breakdown(timeline)
    assert parts["ramp-up"] == pytest.approx(parts["ramp-down"])
    assert parts["ramp-up"] + parts["ramp-down"] == pytest.approx(
        textbook_bubble(stages, micro_batches))
    assert parts["imbalance"] == parts["communication"] == parts["host"] == 0


def test_interleaved_pays_for_a_longer_backward_in_imbalance_and_grouped_does_not():
    grouped, interleaved = (
        simulate_pipeline(unit_stages(4), schedule, 16, unit_cost=True, backward_ratio=2.0)
        for schedule in ("grouped", "interleaved"))
    assert bubble_breakdown(grouped)["imbalance"] == 0
    # Every Interleaved step pairs forwards with backwards twice as long: the forwards wait.
    assert bubble_breakdown(interleaved)["imbalance"] > 0.15
    assert grouped.metrics.bubble_fraction == pytest.approx(textbook_bubble(4, 16))


def test_communication_is_the_ipus_time_moving_data():
    timeline = simulate_pipeline(tutorial_stages(), "grouped", 16, batch_size=32)
    moving = sum(e.end - e.start for e in timeline.events
                 if e.ipu is not None and e.kind not in COMPUTE_KINDS)
    capacity = timeline.metrics.makespan * len(timeline.ipu_lanes)
    assert bubble_breakdown(timeline)["communication"] == pytest.approx(moving / capacity)
    assert moving > 0


def test_the_engine_run_launch_is_the_hosts_share():
    timeline = simulate_pipeline(tutorial_stages(), "grouped", 16, batch_size=32,
                                 synthetic_data=True)
    launch = min(start for _, start, _ in timeline.phases)
    assert launch > 0
    assert bubble_breakdown(timeline)["host"] == pytest.approx(
        launch / timeline.metrics.makespan, rel=1e-6)


def test_an_unbalanced_split_shows_as_imbalance():
    balanced = simulate_pipeline([unit_stages(1)[0]] * 2, "1f1b", 16, unit_cost=False)
    lopsided_stages = [cost_model.StageCost("light", forward_flops=1e8, backward_flops=2e8),
                       cost_model.StageCost("heavy", forward_flops=4e9, backward_flops=8e9)]
    lopsided = simulate_pipeline(lopsided_stages, "1f1b", 16)
    assert bubble_breakdown(lopsided)["imbalance"] > 0.3
    assert bubble_breakdown(lopsided)["imbalance"] > bubble_breakdown(balanced)["imbalance"]


def test_textbook_bubble():
    assert textbook_bubble(4, 8) == pytest.approx(3 / 11)
    assert textbook_bubble(1, 8) == 0
