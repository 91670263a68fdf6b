"""SplitsPicker and its pure helpers: splits in, stages, device size, accumulation count and
the simulated trace out.  No TensorFlow here (the widget must not need it)."""
import pytest

from ipu_emulator.sim import schedule_rules
from ipu_lab_widgets.playground_model import split_points
from ipu_lab_widgets.splits_picker import (SplitsPicker, accumulation_count_for, describe_stages,
                                           evaluate, imbalance, ipu_work, ipus_for_splits,
                                           next_power_of_two)


@pytest.mark.parametrize("count, expected", [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8),
                                             (9, 16)])
def test_next_power_of_two(count, expected):
    assert next_power_of_two(count) == expected


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3"])
def test_next_power_of_two_rejects_what_is_not_a_positive_count(bad):
    with pytest.raises(ValueError):
        next_power_of_two(bad)


def test_the_device_has_one_ipu_per_stage_rounded_up_to_a_power_of_two():
    assert ipus_for_splits(["dense32"]) == 2                       # 2 stages
    assert ipus_for_splits(["dense128", "dense32"]) == 4           # 3 stages, one IPU spare
    assert ipus_for_splits(["dense128", "dense64", "dense32"]) == 4
    assert ipus_for_splits(["dense256", "dense128", "dense64", "dense32"]) == 8


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential"])
@pytest.mark.parametrize("num_stages", [2, 3, 4, 5])
def test_the_accumulation_count_is_the_smallest_the_schedule_accepts(schedule, num_stages):
    count = accumulation_count_for(schedule, num_stages, at_least=16)
    assert count >= 16
    schedule_rules.check_gradient_accumulation_count(schedule, num_stages, count)  # accepted
    smaller = count - schedule_rules.pipeline_overlap(schedule, num_stages)
    assert smaller < 16                                      # no smaller accepted count >= 16


def test_the_tutorial_counts():
    assert accumulation_count_for("grouped", 2) == 16
    assert accumulation_count_for("grouped", 3) == 18       # a multiple of 2 x 3
    assert accumulation_count_for("interleaved", 3) == 18   # a multiple of 3
    assert accumulation_count_for("sequential", 3, at_least=5) == 5


def test_evaluate_orders_the_splits_and_cuts_the_stages_like_the_tutorial():
    choice = evaluate(["dense32", "dense128"])
    assert choice.ok, choice.error
    assert choice.splits == ("dense128", "dense32")
    assert choice.stages == (("flatten", "dense256"), ("dense128", "dense64"),
                             ("dense32", "logits", "cel"))
    assert describe_stages(choice.stages) == ["0. flatten-dense256", "1. dense128-dense64",
                                              "2. dense32-logits-cel"]
    assert choice.num_ipus == 4 and choice.gradient_accumulation_count == 18
    assert len(choice.result.timeline.ipu_lanes) == 3
    assert choice.result.config.gradient_accumulation_count == 18


@pytest.mark.parametrize("splits, fragment", [
    ((), "ValueError: Pipeline requires at least two computational stages."),
    (("flatten",), "would leave stage 0 empty"),
    (("nonsense",), "unknown split layer 'nonsense'"),
])
def test_splits_that_cannot_run_give_the_message_instead_of_raising(splits, fragment):
    choice = evaluate(splits)
    assert not choice.ok
    assert fragment in choice.error


def test_balance_is_the_busiest_ipus_own_work_over_the_mean():
    timeline = evaluate(["dense32"]).result.timeline
    work = ipu_work(timeline)
    assert set(work) == {0, 1}
    assert imbalance(timeline) == pytest.approx(max(work.values()) / (sum(work.values()) / 2))
    assert imbalance(timeline) > 1


def test_a_balanced_split_runs_faster_than_a_lopsided_one():
    choices = [evaluate([name]) for name in split_points("tutorial-mlp")]
    by_balance = sorted(choices, key=lambda c: imbalance(c.result.timeline))
    balanced, lopsided = by_balance[0], by_balance[-1]
    assert imbalance(balanced.result.timeline) < imbalance(lopsided.result.timeline)
    assert (balanced.result.timeline.metrics.makespan
            < lopsided.result.timeline.metrics.makespan)


@pytest.fixture
def picker():
    return SplitsPicker(splits=("dense32",))


def test_the_picker_starts_with_a_trace_and_the_stages(picker):
    assert picker.splits == ("dense32",)
    assert picker.choice.ok and picker.redraw_count == 1
    assert picker.trace.value.startswith("<svg")
    assert "0. flatten-dense256-dense128-dense64" in picker.summary.value
    assert "2 IPUs" in picker.summary.value
    assert picker.message.value == ""
    assert picker.train_button.disabled           # nothing to call yet


def test_picking_layers_redraws_with_more_stages(picker):
    before = picker.trace.value
    picker.layers.value = ("dense32", "dense128")        # picked out of order
    assert picker.splits == ("dense128", "dense32")
    assert picker.redraw_count == 2 and picker.trace.value != before
    assert "IPU2" in picker.trace.value and "4 IPUs (1 spare" in picker.summary.value


def test_the_schedule_reaches_the_simulation(picker):
    picker.schedule.value = "interleaved"
    assert picker.choice.result.config.schedule == "interleaved"
    assert "interleaved" in picker.metrics.value


def test_an_invalid_pick_shows_the_message_and_keeps_the_last_trace(picker):
    picker.on_train(lambda p: None)
    last_trace = picker.trace.value
    picker.layers.value = ()
    assert "Pipeline requires at least two computational stages." in picker.message.value
    assert "last valid one" in picker.message.value
    assert picker.trace.value == last_trace
    assert picker.train_button.disabled                # nothing valid to train
    picker.layers.value = ("dense64",)
    assert picker.message.value == "" and not picker.train_button.disabled


def test_the_button_hands_the_choice_to_the_training_callback(picker):
    seen = []
    picker.on_train(lambda p: seen.append((p.splits, p.choice.num_ipus)))
    assert not picker.train_button.disabled
    picker.layers.value = ("dense128",)
    picker.train_button.click()
    assert seen == [(("dense128",), 2)] and picker.train_count == 1


def test_a_failing_callback_is_reported_not_raised(picker):
    def broken(_):
        raise RuntimeError("no data here")

    picker.on_train(broken)
    picker.train_button.click()                          # must not raise
    assert picker.train_count == 0
    assert not picker.train_button.disabled
