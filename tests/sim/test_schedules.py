"""Schedules as data: action strings, builders' exact structure, validation, SDK rules."""
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipu_emulator.sim import schedule_actions, schedule_rules, schedules as S
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.sim.schedule_actions import (Action, B, DeadlockError, F, InvalidScheduleError,
                                               R, Schedule, U, W)
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError

GAC_SUFFIX = ("This number might be called `gradient_accumulation_count`, "
              "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending on "
              "the API used.")


@st.composite
def shapes(draw, name):
    """(num_stages, micro_batches, options) that the schedule ``name`` accepts."""
    micro_batches = draw(st.integers(1, 20))
    if name == "interleaved-1f1b":
        per_ipu = draw(st.integers(1, 3))
        ipus = draw(st.integers(1 if per_ipu > 1 else 2, 4))
        return ipus * per_ipu, micro_batches, {"stages_per_ipu": per_ipu}
    return draw(st.integers(2, 8)), micro_batches, {}


def build(name, stages, micro_batches, training=True, **options):
    if name == "interleaved-1f1b":
        return S.interleaved_one_f_one_b(stages, micro_batches, training=training, **options)
    return S.BUILDERS[name](stages, micro_batches, training=training)


# --- actions --------------------------------------------------------------------------


@given(st.integers(0, 99), st.sampled_from("FBWR"), st.integers(0, 999))
def test_action_string_round_trips(stage, kind, micro_batch):
    action = Action(stage, kind, micro_batch)
    assert str(action) == f"{stage}{kind}{micro_batch}"
    assert Action.parse(str(action)) == action


def test_weight_update_has_no_micro_batch():
    assert str(U(2)) == "2U" and Action.parse("2U") == Action(2, "U", None)
    with pytest.raises(ValueError, match="takes no micro-batch"):
        Action.parse("2U0")
    with pytest.raises(ValueError, match="needs a micro-batch"):
        Action.parse("1F")
    with pytest.raises(ValueError, match="Cannot parse 'X1'"):
        Action.parse("X1")


def test_parse_and_format_actions():
    actions = schedule_actions.parse_actions("0F0 1F0 1B0 0B0")
    assert actions == (F(0, 0), F(1, 0), B(1, 0), B(0, 0))
    assert schedule_actions.format_actions(actions) == "0F0 1F0 1B0 0B0"


# --- every builder, many shapes -------------------------------------------------------


@pytest.mark.parametrize("name", schedule_rules.SCHEDULE_NAMES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_schedule_is_valid_and_complete(name, data):
    stages, micro_batches, options = data.draw(shapes(name))
    schedule = build(name, stages, micro_batches, **options)
    schedule_actions.validate(schedule)
    actions = schedule.actions()
    assert len(actions) == len(set(actions))
    for k in range(stages):
        assert schedule.ipu_actions[schedule.ipu_of(k)].count(U(k)) == 1
        for m in range(micro_batches):
            assert actions.count(F(k, m)) == 1 and actions.count(B(k, m)) == 1
    for ipu, listed in enumerate(schedule.ipu_actions):
        for k in schedule.stages_on(ipu):
            update = listed.index(U(k))
            backward_work = [i for i, a in enumerate(listed)
                             if a.stage == k and a.kind in schedule_actions.BACKWARD_WORK]
            assert max(backward_work) < update


@pytest.mark.parametrize("name", schedule_rules.SCHEDULE_NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_inference_and_recompute_variants_are_valid(name, data):
    stages, micro_batches, options = data.draw(shapes(name))
    inference = build(name, stages, micro_batches, training=False, **options)
    schedule_actions.validate(inference)
    assert {a.kind for a in inference.actions()} == {"F"}
    recomputed = S.with_recomputation(build(name, stages, micro_batches, **options))
    schedule_actions.validate(recomputed)
    for listed in recomputed.ipu_actions:
        for i, a in enumerate(listed):
            if a.kind == "B":  # an R just before, unless the forward itself is just before
                assert listed[i - 1] in (R(a.stage, a.micro_batch), F(a.stage, a.micro_batch))


@pytest.mark.parametrize("name", schedule_rules.SCHEDULE_NAMES)
def test_print_shows_per_ipu_action_strings_and_text_round_trips(name):
    schedule = build(name, 4, 4)
    text = str(schedule)
    assert text.startswith(f"{name} schedule: 4 stages")
    assert "IPU0" in text and "0F0" in text and "0U" in text
    parsed = Schedule.parse(schedule.to_text(), name=name)
    assert parsed.ipu_actions == schedule.ipu_actions
    assert parsed.device_mapping == schedule.device_mapping


def test_schedules_are_comparable_values():
    assert S.grouped(4, 8) == S.grouped(4, 8)
    assert S.grouped(4, 8) != S.interleaved(4, 8)
    assert hash(F(1, 0)) == hash((1, "F", 0))


# --- Graphcore's synchronous schedules: exact structure -------------------------------


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 20))
def test_grouped_step_formulas(n, m_count):
    step_of = S.grouped(n, m_count).step_of()
    for m in range(m_count):
        for k in range(n):
            assert step_of[F(k, m)] == m + k
            assert step_of[B(k, m)] == m + 2 * n - 2 - k


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 20))
def test_interleaved_step_formulas_and_one_action_per_ipu_per_step(n, m_count):
    schedule = S.interleaved(n, m_count)
    step_of = schedule.step_of()
    for m in range(m_count):
        for k in range(n):
            assert step_of[F(k, m)] == 2 * m + k
            assert step_of[B(k, m)] == 2 * m + 2 * n - 1 - k
    for step in schedule.steps:
        ipus = [schedule.ipu_of(a.stage) for a in step]
        assert len(ipus) == len(set(ipus))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 12))
def test_sequential_runs_one_stage_per_step(n, m_count):
    schedule = S.sequential(n, m_count)
    assert all(len(step) == 1 for step in schedule.steps)
    assert len(schedule.steps) == m_count * 2 * n + n


def test_grouped_grid_matches_the_tutorial_diagram():
    grid = S.grouped(2, 4).grid().splitlines()
    assert grid[1].split() == ["IPU0", "0F0", "0F1", "0F2+0B0", "0F3+0B1", "0B2", "0B3", "0U"]
    assert grid[2].split() == ["IPU1", ".", "1F0+1B0", "1F1+1B1", "1F2+1B2", "1F3+1B3", ".", "1U"]


def test_grouped_holds_more_micro_batches_than_interleaved():
    n = 4
    assert S.peak_in_flight_by_order(S.grouped(n, 16), 0) == 2 * n - 1
    assert S.peak_in_flight_by_order(S.interleaved(n, 16), 0) == n


# --- comparison schedules -------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 40))
def test_one_f_one_b_holds_at_most_s_micro_batches_on_stage_0(n, m_count):
    schedule = S.one_f_one_b(n, m_count)
    for k in range(n):
        assert S.peak_in_flight_by_order(schedule, k) <= n - k
    assert S.peak_in_flight_by_order(schedule, 0) == min(n, m_count)
    assert S.peak_in_flight_by_order(S.gpipe(n, m_count), 0) == m_count


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 40))
def test_zero_bubble_splits_backward_and_keeps_1f1b_memory(n, m_count):
    schedule = S.zero_bubble(n, m_count)
    actions = schedule.actions()
    for k in range(n):
        assert all(actions.count(W(k, m)) == 1 for m in range(m_count))
        assert S.peak_in_flight_by_order(schedule, k) <= n


def test_interleaved_1f1b_places_virtual_stages_round_robin():
    schedule = S.interleaved_one_f_one_b(6, 9, stages_per_ipu=3)
    assert schedule.device_mapping == (0, 1, 0, 1, 0, 1)
    with pytest.raises(PipelineConfigurationError, match="multiple of 2"):
        S.interleaved_one_f_one_b(5, 4)
    with pytest.raises(PipelineConfigurationError, match="s % 2"):
        S.interleaved_one_f_one_b(4, 4, device_mapping=[0, 0, 1, 1])


@pytest.mark.parametrize("name", ["grouped", "sequential", "gpipe", "1f1b", "zero-bubble"])
@pytest.mark.parametrize("mapping", [[0, 1, 1, 0], [0, 0, 1, 1], [0, 0, 0]])
def test_several_stages_on_one_ipu(name, mapping):
    schedule = S.build_schedule(name, len(mapping), 8, device_mapping=mapping)
    assert schedule.num_ipus == max(mapping) + 1
    for ipu, listed in enumerate(schedule.ipu_actions):
        assert {a.stage for a in listed} == set(schedule.stages_on(ipu))


# --- validation: impossible schedules are reported, never hung ------------------------


def test_crossed_orders_deadlock_with_a_clear_message():
    schedule = Schedule.from_actions(["0F0 0B0 0U", "1B0 1F0 1U"])
    with pytest.raises(DeadlockError) as error:
        schedule_actions.validate(schedule)
    message = str(error.value)
    assert message.startswith("Schedule deadlocks: no IPU can run its next action.")
    assert "IPU0 waits at 0B0 for 1B0 (IPU1)" in message
    assert "IPU1 waits at 1B0 for 1F0 (IPU1, later in its own list)" in message


def test_two_ipus_waiting_for_each_other_deadlock():
    schedule = Schedule.from_actions(["0F0 0B0 0F1 0B1 0U", "1F1 1B1 1F0 1B0 1U"])
    with pytest.raises(DeadlockError) as error:
        schedule_actions.validate(schedule)
    assert "IPU0 waits at 0B0 for 1B0 (IPU1); IPU1 waits at 1F1 for 0F1 (IPU0)" in str(error.value)
    # The same actions in a compatible order are fine.
    schedule_actions.validate(Schedule.from_actions(["0F0 0F1 0B1 0B0 0U", "1F1 1F0 1B0 1B1 1U"]))


def test_a_big_deadlocking_schedule_is_reported_quickly():
    good = S.one_f_one_b(16, 256)
    reversed_last = list(good.ipu_actions)
    reversed_last[15] = tuple(reversed(reversed_last[15][:-1])) + (U(15),)
    bad = Schedule("bad", 16, 256, good.device_mapping, tuple(reversed_last))
    started = time.perf_counter()
    with pytest.raises(DeadlockError):
        schedule_actions.validate(bad)
    # "Reported, never hangs": a bound far above the ~0.1 s it takes, so load cannot flake it.
    assert time.perf_counter() - started < 20.0


def test_weight_update_before_backward_is_a_deadlock():
    with pytest.raises(DeadlockError, match="rest of stage 0's backward work"):
        schedule_actions.validate(Schedule.from_actions(["0F0 0U 0B0", "1F0 1B0 1U"]))


@pytest.mark.parametrize("ipu_actions, message", [
    (["0F0 0U", "1F0 1B0 1U"], "0B0 is missing"),
    (["0F0 0F0 0B0 0U", "1F0 1B0 1U"], "0F0 appears more than once"),
    (["0F0 0B0 0U 1F0", "1B0 1U"], "1F0 is listed on IPU0, but stage 1 is mapped to IPU1"),
    (["0F0 0B0", "1F0 1B0 1U"], "0U is missing"),
    (["0F0 0B0 0W0 0U", "1F0 1B0 1U"], None),
    (["0F0 0F1 0B0 0W0 0B1 0U", "1F0 1F1 1B0 1B1 1U"], "0W1 is missing"),
])
def test_invalid_contents_are_named(ipu_actions, message):
    schedule = Schedule.from_actions(ipu_actions)
    if message is None:
        schedule_actions.validate(schedule)
        return
    with pytest.raises(InvalidScheduleError, match=message):
        schedule_actions.validate(schedule)


def test_synchronous_schedule_cannot_use_another_ipus_result_in_the_same_step():
    schedule = Schedule.from_actions(["0F0 0B0 0U", "1F0 1B0 1U"],
                                     steps=["0F0 1F0", "1B0", "0B0", "0U 1U"])
    with pytest.raises(InvalidScheduleError, match="data moves between IPUs only at the end"):
        schedule_actions.validate(schedule)


# --- the SDK's configuration rules ----------------------------------------------------


@pytest.mark.parametrize("name, n, training, overlap", [
    ("grouped", 4, True, 8), ("grouped", 4, False, 4), ("interleaved", 4, True, 4),
    ("interleaved", 3, False, 3), ("sequential", 4, True, 1), ("1f1b", 4, True, 1),
])
def test_overlap_per_schedule(name, n, training, overlap):
    assert schedule_rules.pipeline_overlap(name, n, training) == overlap


def test_interleaved_overlap_with_shared_ipus_counts_non_overlapping_rotations():
    assert schedule_rules.pipeline_overlap("interleaved", 4, training=False,
                                           device_mapping=[0, 1, 0, 1]) == 2


def test_gac_multiple_message_is_verbatim():
    with pytest.raises(PipelineConfigurationError) as error:
        schedule_rules.check_gradient_accumulation_count("grouped", 3, 10, training=False)
    assert error.value.sdk_error == "FailedPreconditionError"
    assert error.value.message == (
        "The number of iterations of the pipeline must be a multiple of 3, but it is 10. "
        + GAC_SUFFIX)
    assert str(error.value) == error.value.message


def test_gac_at_least_message_is_verbatim_and_zero_passes_divisibility():
    with pytest.raises(PipelineConfigurationError) as error:
        schedule_rules.check_gradient_accumulation_count("grouped", 4, 0)
    assert error.value.message == (
        "The number of iterations of the pipeline must be at least 8, but it is 0. "
        + GAC_SUFFIX)


def test_gac_rules_per_schedule():
    assert schedule_rules.check_gradient_accumulation_count("grouped", 4, 16) == 8
    assert schedule_rules.check_gradient_accumulation_count("interleaved", 4, 12) == 4
    assert schedule_rules.check_gradient_accumulation_count("sequential", 4, 3) == 1
    with pytest.raises(PipelineConfigurationError, match="multiple of 8, but it is 12"):
        schedule_rules.check_gradient_accumulation_count("grouped", 4, 12)
    with pytest.raises(PipelineConfigurationError, match="must be specified"):
        schedule_rules.check_gradient_accumulation_count("grouped", 4, None)
    with pytest.raises(PipelineConfigurationError, match="must be >= 0"):
        schedule_rules.check_gradient_accumulation_count("grouped", 4, -8)


def test_sdk_python_side_errors():
    with pytest.raises(PipelineConfigurationError) as error:
        S.grouped(1, 4)
    assert (error.value.sdk_error, error.value.message) == (
        "ValueError", "Pipeline requires at least two computational stages.")
    with pytest.raises(PipelineConfigurationError) as error:
        S.grouped(3, 4, device_mapping=[0, 1])
    assert error.value.message == "Each stage must be mapped to an IPU: 2 mappings != 3 stages"
    with pytest.raises(PipelineConfigurationError) as error:
        S.grouped(2, 4, device_mapping="01")
    assert error.value.sdk_error == "TypeError"
    with pytest.raises(PipelineConfigurationError) as error:
        S.interleaved(4, 8, device_mapping=[0, 1, 1, 0])
    assert error.value.sdk_error == "NotImplementedError"
    assert error.value.message == (
        "The pipelining schedule 'Interleaved' does not currently support multiple pipeline "
        "stages on the same device for training graphs. Please use a different pipeline "
        "schedule.")
    S.interleaved(4, 8, device_mapping=[0, 1, 1, 0], training=False)  # inference is fine


def test_schedule_names_accept_the_sdk_enum_forms():
    assert schedule_rules.normalise_schedule_name("PipelineSchedule.Grouped") == "grouped"
    assert schedule_rules.normalise_schedule_name(1) == "interleaved"
    assert schedule_rules.normalise_schedule_name("ZB-H1") == "zero-bubble"
    with pytest.raises(PipelineConfigurationError, match="Unknown pipeline schedule 'fast'"):
        schedule_rules.normalise_schedule_name("fast")


# --- interleaved 1F1B against Megatron-LM's definition, written out by hand ------------------
# Narayanan et al. (2021), "Efficient large-scale language model training on GPU clusters":
# with P devices and v model chunks each, device d runs forwards chunk by chunk in groups of
# P micro-batches, backwards with the chunks reversed, after 2(P - d - 1) + (v - 1)P warm-up
# forwards; then one forward and one backward in turn; then the remaining backwards.

MEGATRON_P2_V2 = {
    # M = 2: device 0's warm-up (4) is every forward.
    2: ("0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1 0U 2U",
        "1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1 1U 3U"),
    # M = 4: two groups of P = 2 micro-batches.
    4: ("0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3 0U 2U",
        "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3 1U 3U"),
}


@pytest.mark.parametrize("micro_batches", sorted(MEGATRON_P2_V2))
def test_interleaved_1f1b_is_megatrons_order(micro_batches):
    schedule = S.interleaved_one_f_one_b(4, micro_batches, stages_per_ipu=2)
    assert schedule.device_mapping == (0, 1, 0, 1)
    assert tuple(schedule_actions.format_actions(actions) for actions in schedule.ipu_actions) \
        == MEGATRON_P2_V2[micro_batches]


@pytest.mark.parametrize("ipus", [2, 3, 4])
@pytest.mark.parametrize("chunks", [2, 3])
@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_interleaved_1f1b_warms_up_each_ipu_as_megatron_counts(ipus, chunks, rounds):
    """Megatron's warm-up on device p, over more shapes than the orders above: 2(P-p-1) +
    (v-1)P forwards (at most all v*M of them), then one forward and one backward in turn
    until the forwards run out, then the remaining backwards."""
    micro_batches = rounds * ipus
    schedule = S.interleaved_one_f_one_b(ipus * chunks, micro_batches, stages_per_ipu=chunks)
    for p, actions in enumerate(schedule.ipu_actions):
        kinds = "".join(a.kind for a in actions if a.kind in "FB")
        forwards = chunks * micro_batches
        warmup = min(forwards, 2 * (ipus - p - 1) + (chunks - 1) * ipus)
        steady = forwards - warmup
        assert kinds == "F" * warmup + "FB" * steady + "B" * (forwards - steady), f"IPU {p}"


# --- zero-bubble against ZB-H1's definition, written out by hand -----------------------------
# Qi et al. (2024), "Zero Bubble Pipeline Parallelism": 1F1B's order of forwards and input
# gradients (B); stage k runs each weight gradient (W) k micro-batches late, so every stage
# holds at most S micro-batches; the late Ws fill the cool-down.

ZB_H1_S3_M4 = (
    "0F0 0F1 0F2 0B0 0W0 0F3 0B1 0W1 0B2 0W2 0B3 0W3 0U",
    "1F0 1F1 1B0 1F2 1B1 1W0 1F3 1B2 1W1 1B3 1W2 1W3 1U",
    "2F0 2B0 2F1 2B1 2F2 2B2 2W0 2F3 2B3 2W1 2W2 2W3 2U",
)


def test_zero_bubble_is_zb_h1s_order():
    schedule = S.zero_bubble(3, 4)
    assert tuple(schedule_actions.format_actions(actions)
                 for actions in schedule.ipu_actions) == ZB_H1_S3_M4


@pytest.mark.parametrize("stages, micro_batches", [(2, 3), (3, 4), (4, 4), (4, 8), (5, 12)])
def test_zero_bubble_reaches_zb_h1s_bubble_and_holds_s_micro_batches(stages, micro_batches):
    # Unit costs: F = 1, B = W = 1/2.  ZB-H1's bubble is (S-1)(T_F + T_B - T_W) = S - 1, so a
    # pass takes M(T_F + T_B + T_W) + S - 1 = 2M + S - 1 units; 1F1B's takes 2(M + S - 1).
    timeline = simulate_pipeline(unit_stages(stages), "zero-bubble", micro_batches,
                                 unit_cost=True)
    assert timeline.metrics.makespan == 2 * micro_batches + stages - 1
    # (checked against the events by tests/sim/test_metrics_by_hand.py)
    assert timeline.metrics.peak_in_flight == {k: min(stages, micro_batches)
                                               for k in range(stages)}


@pytest.mark.parametrize("schedule, stages, overlap", [("grouped", 3, 6), ("interleaved", 4, 4),
                                                       ("sequential", 3, 1)])
def test_the_accumulation_count_must_reach_the_overlap(schedule, stages, overlap):
    assert schedule_rules.check_gradient_accumulation_count(schedule, stages, overlap) == overlap
    # 0 is a multiple of every overlap, so only the "at least" rule refuses it.
    with pytest.raises(PipelineConfigurationError,
                       match=f"must be at least {overlap}, but it is 0"):
        schedule_rules.check_gradient_accumulation_count(schedule, stages, 0)
