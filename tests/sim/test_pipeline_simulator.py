"""The pipeline simulator: invariants over many shapes, the tutorial's exact facts, and what
replication, recomputation, offloading and memory do to a timeline."""
import json
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipu_emulator.sim import schedule_actions, schedule_rules
from ipu_emulator.sim.cost_model import StageCost
from ipu_emulator.sim.hardware import get_target
from ipu_emulator.sim.pipeline_simulator import (action_seconds, out_of_memory_message,
                                   simulate_pipeline, unit_stages)
from ipu_emulator.sim.schedule_actions import Action, DeadlockError, Schedule
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError
from ipu_emulator.sim.timeline import (COMPUTE_KINDS, UNIT_CLOCK, allreduce_seconds,
                                      check_no_overlaps)
from ipu_emulator.views import to_chrome_trace

GC200 = get_target("ipu2")


def balanced_stages(n, activation_bytes=1_000_000, parameter_bytes=4_000_000):
    """Identical, realistic stages: backward twice the forward, some data to move."""
    return [StageCost(f"stage{k}", forward_flops=2e9, backward_flops=4e9,
                      weight_update_flops=2e6, forward_bytes_accessed=1e7,
                      backward_bytes_accessed=2e7, parameter_bytes=parameter_bytes,
                      optimizer_state_bytes=parameter_bytes, activation_bytes=activation_bytes,
                      input_bytes=65_536, output_bytes=65_536) for k in range(n)]


@st.composite
def shapes(draw, name):
    micro_batches = draw(st.integers(1, 12))
    if name == "interleaved-1f1b":
        ipus = draw(st.integers(1, 3))
        return 2 * ipus, micro_batches
    return draw(st.integers(2, 5)), micro_batches


def valid_gac(name, stages, micro_batches, training=True):
    """The smallest multiple of the schedule's overlap that is at least ``micro_batches``."""
    overlap = schedule_rules.pipeline_overlap(name, stages, training)
    return max(overlap, -(-micro_batches // overlap) * overlap)


def check_dataflow(timeline, num_stages, micro_batches, passes, training=True):
    """Every action once per stage per pass on every replica, in dependency order, weight
    updates last, passes one after another."""
    by_pass = defaultdict(dict)
    per_lane = Counter()
    for e in timeline.events:
        if e.kind in COMPUTE_KINDS:
            action = Action.parse(e.name)
            per_lane[(e.iteration, e.lane, action)] += 1
            by_pass[e.iteration].setdefault(action, e)  # replicas are identical
    assert set(per_lane.values()) == {1}
    assert sorted(by_pass) == list(range(passes))
    for p, events in by_pass.items():
        for k in range(num_stages):
            for m in range(micro_batches):
                forward = events[schedule_actions.F(k, m)]
                if k > 0:
                    assert forward.start >= events[schedule_actions.F(k - 1, m)].end
                if not training:
                    continue
                backward = events[schedule_actions.B(k, m)]
                assert backward.start >= forward.end
                if k < num_stages - 1:
                    assert backward.start >= events[schedule_actions.B(k + 1, m)].end
            if training:
                update = events[schedule_actions.U(k)]
                last_backward = max(e.end for a, e in events.items()
                                    if a.stage == k and a.kind in schedule_actions.BACKWARD_WORK)
                assert update.start >= last_backward
        if p > 0:  # passes do not overlap
            assert min(e.start for e in events.values()) >= max(
                e.end for e in by_pass[p - 1].values())


# --- invariants over many shapes, every schedule --------------------------------------


@pytest.mark.parametrize("name", schedule_rules.SCHEDULE_NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_unit_cost_timelines_respect_the_dataflow(name, data):
    stages, micro_batches = data.draw(shapes(name))
    gac = valid_gac(name, stages, micro_batches)
    timeline = simulate_pipeline(unit_stages(stages), name, gac, unit_cost=True)
    check_no_overlaps(timeline.events)
    check_dataflow(timeline, stages, gac, passes=1)
    assert {e.kind for e in timeline.events} <= {"forward", "backward", "weight_update"}
    for e in timeline.events:
        assert e.duration in ((1.0,) if name != "zero-bubble" or e.kind != "backward"
                              else (0.5,)) or e.kind == "weight_update"


@pytest.mark.parametrize("name", schedule_rules.SCHEDULE_NAMES)
@settings(max_examples=8, deadline=None)
@given(data=st.data(), recompute=st.booleans(), replicas=st.integers(1, 2),
       repeat_count=st.integers(1, 2))
def test_hardware_timelines_respect_the_dataflow(name, data, recompute, replicas, repeat_count):
    stages, micro_batches = data.draw(shapes(name))
    gac = valid_gac(name, stages, micro_batches)
    timeline = simulate_pipeline(balanced_stages(stages), name, gac, repeat_count=repeat_count,
                                 replicas=replicas, recompute=recompute, offload_weights=True,
                                 offload_activations=recompute, batch_size=8)
    check_no_overlaps(timeline.events)
    check_dataflow(timeline, stages, gac, passes=repeat_count)
    assert [e.name for e in timeline.events if e.kind == "host"] == ["Engine::run"]
    to_chrome_trace(timeline)  # raises on overlaps, needs consistent lanes


@pytest.mark.parametrize("name", schedule_rules.SCHEDULE_NAMES)
def test_inference_runs_forward_passes_only(name):
    stages = 4
    gac = valid_gac(name, stages, 8, training=False)
    timeline = simulate_pipeline(balanced_stages(stages), name, gac, training=False)
    check_dataflow(timeline, stages, gac, passes=1, training=False)
    assert "backward" not in timeline.kinds_present()
    assert "weight_update" not in timeline.kinds_present()
    assert all(v == 1 for v in timeline.metrics.peak_in_flight.values())


# --- the tutorial's exact facts ---------------------------------------------------------


def first_backward_end(schedule, stages=4, gac=8):
    timeline = simulate_pipeline(unit_stages(stages), schedule, gac, unit_cost=True)
    return next(e.end for e in timeline.events if e.name == "0B0")


def test_first_micro_batch_backward_ends_at_11_grouped_and_8_interleaved():
    assert first_backward_end("grouped") == 11
    assert first_backward_end("interleaved") == 8


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 40))
def test_gpipe_bubble_is_exactly_textbook(stages, micro_batches):
    timeline = simulate_pipeline(unit_stages(stages), "gpipe", micro_batches, unit_cost=True)
    assert timeline.metrics.bubble_fraction == (stages - 1) / (micro_batches + stages - 1)
    assert timeline.metrics.makespan == 2 * (micro_batches + stages - 1)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 40))
def test_one_f_one_b_keeps_at_most_s_in_flight_on_stage_0(stages, micro_batches):
    timeline = simulate_pipeline(unit_stages(stages), "1f1b", micro_batches, unit_cost=True)
    assert timeline.metrics.peak_in_flight[0] == min(stages, micro_batches)
    gpipe = simulate_pipeline(unit_stages(stages), "gpipe", micro_batches, unit_cost=True)
    assert gpipe.metrics.peak_in_flight[0] == micro_batches


@pytest.mark.parametrize("unit_cost", [True, False])
@pytest.mark.parametrize("stages", [2, 4, 6])
def test_sequential_never_runs_two_ipus_at_once(unit_cost, stages):
    timeline = simulate_pipeline(balanced_stages(stages), "sequential", 6, unit_cost=unit_cost)
    busy = sorted((e.start, e.end) for e in timeline.events if e.kind in COMPUTE_KINDS
                  and e.end > e.start)
    for (_, end), (start, _) in zip(busy, busy[1:]):
        assert start >= end


@pytest.mark.parametrize("stages", [2, 3, 4, 6])
def test_grouped_holds_more_in_flight_than_interleaved(stages):
    gac = 4 * stages
    grouped = simulate_pipeline(unit_stages(stages), "grouped", gac, unit_cost=True)
    interleaved = simulate_pipeline(unit_stages(stages), "interleaved", gac, unit_cost=True)
    assert grouped.metrics.peak_in_flight[0] == 2 * stages - 1
    assert interleaved.metrics.peak_in_flight[0] == stages
    assert grouped.metrics.peak_in_flight[0] > interleaved.metrics.peak_in_flight[0]
    memory = balanced_stages(stages)
    g = simulate_pipeline(memory, "grouped", gac).metrics.peak_memory_bytes[0]
    i = simulate_pipeline(memory, "interleaved", gac).metrics.peak_memory_bytes[0]
    assert g - i == (stages - 1) * memory[0].activation_bytes


@pytest.mark.parametrize("unit_cost", [True, False])
@pytest.mark.parametrize("pipelined", ["grouped", "interleaved", "1f1b", "gpipe"])
def test_pipelining_beats_sequential_for_balanced_stages(unit_cost, pipelined):
    stages = balanced_stages(4)
    sequential = simulate_pipeline(stages, "sequential", 16, unit_cost=unit_cost)
    fast = simulate_pipeline(stages, pipelined, 16, unit_cost=unit_cost)
    assert fast.metrics.makespan < sequential.metrics.makespan
    assert fast.metrics.bubble_fraction < sequential.metrics.bubble_fraction


@pytest.mark.parametrize("stages", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("factor", [2, 3])
def test_zero_bubble_has_a_smaller_bubble_than_1f1b(stages, factor):
    micro_batches = factor * stages
    unit = {name: simulate_pipeline(unit_stages(stages), name, micro_batches, unit_cost=True)
            for name in ("1f1b", "zero-bubble")}
    assert unit["zero-bubble"].metrics.bubble_fraction < unit["1f1b"].metrics.bubble_fraction
    real = {name: simulate_pipeline(balanced_stages(stages), name, micro_batches)
            for name in ("1f1b", "zero-bubble")}
    assert real["zero-bubble"].metrics.makespan < real["1f1b"].metrics.makespan


def test_unit_cost_costs_nothing_but_stage_work():
    timeline = simulate_pipeline(balanced_stages(4), "grouped", 8, unit_cost=True,
                                 replicas=2, repeat_count=2, offload_weights=True)
    assert timeline.clock == UNIT_CLOCK and timeline.metrics.clock == UNIT_CLOCK
    assert "host" not in timeline.lanes
    assert set(timeline.kinds_present()) == {"forward", "backward", "weight_update"}
    assert timeline.metrics.makespan == 2 * 22


# --- the engine run around the passes ---------------------------------------------------


def test_one_engine_run_with_repeat_count_passes_and_phases():
    timeline = simulate_pipeline(balanced_stages(4), "grouped", 8, repeat_count=3)
    assert [e.name for e in timeline.events if e.lane == "host"] == ["Engine::run"]
    assert {e.iteration for e in timeline.events if e.kind == "forward"} == {0, 1, 2}
    names = [name for name, _, _ in timeline.phases]
    assert names == ["ramp-up", "main", "ramp-down", "weight update"] * 3
    for (_, _, end), (_, start, _) in zip(timeline.phases, timeline.phases[1:]):
        assert start == pytest.approx(end)
    updates = [e for e in timeline.events if e.kind == "weight_update"]
    weight_phases = [(s, e) for name, s, e in timeline.phases if name == "weight update"]
    for update in updates:
        assert any(s <= update.start and update.end <= e + 1e-15 for s, e in weight_phases)
    assert timeline.metrics.iterations == 24 and timeline.metrics.engine_runs == 1


def test_infeed_feeds_stage_0_and_outfeed_leaves_the_last_stage():
    timeline = simulate_pipeline(balanced_stages(3), "1f1b", 6, repeat_count=2,
                                 device_mapping=[0, 1, 2])
    copies = [e for e in timeline.events if e.kind == "stream_copy"]
    infeed = [e for e in copies if "infeed" in e.name]
    outfeed = [e for e in copies if "outfeed" in e.name]
    assert len(infeed) == len(outfeed) == 12
    assert {e.lane for e in infeed} == {"IPU0"} and {e.lane for e in outfeed} == {"IPU2"}
    for copy in infeed:  # each copy comes before its micro-batch's first forward
        forward = next(e for e in timeline.events if e.name == f"0F{copy.micro_batch}"
                       and e.iteration == copy.iteration)
        assert copy.end <= forward.start


def test_exchanges_move_activations_and_gradients_between_ipus():
    for name in ("grouped", "1f1b"):
        timeline = simulate_pipeline(balanced_stages(3), name, 6)
        assert any(e.kind == "exchange" for e in timeline.events)
        labels = Counter(f.name for f in timeline.flows)
        assert labels["activations"] == 12 and labels["gradients"] == 12
        if name == "grouped":
            assert any(e.kind == "sync" and e.name == "Sync (External)" for e in timeline.events)


@pytest.mark.parametrize("recompute", [False, True])
def test_the_fifo_op_pops_and_pushes_with_the_forward_pass(recompute):
    # The SDK's FIFO op runs after a stage's forward pass: it pops the oldest micro-batch's
    # activations and pushes this one's.  The backward pass reads what was popped.
    stages = balanced_stages(2, activation_bytes=8_000_000)
    timeline = simulate_pipeline(stages, "grouped", 8, recompute=recompute)
    kept = stages[0].input_bytes if recompute else stages[0].activation_bytes
    fifo = 2 * kept / GC200.fifo_bandwidth_bytes_per_s
    by_kind = defaultdict(set)
    for e in timeline.events:
        if e.stage == 0 and e.kind in ("forward", "backward", "recompute"):
            by_kind[e.kind].add(round((e.end - e.start) * 1e9))
    forward = action_seconds(stages[0], "F", GC200, False)
    backward = action_seconds(stages[0], "B", GC200, False)
    assert by_kind["forward"] == {round((forward + fifo) * 1e9)}
    assert by_kind["backward"] == {round(backward * 1e9)}
    if recompute:  # the recompute repeats the layers, not the FIFO op
        assert by_kind["recompute"] == {round(forward * 1e9)}


def test_replicas_run_identical_lanes_and_all_reduce_before_the_update():
    stages = balanced_stages(2)
    one = simulate_pipeline(stages, "grouped", 8, batch_size=16)
    two = simulate_pipeline(stages, "grouped", 8, replicas=2, batch_size=16)
    assert two.lanes == ["host", "IPU0", "IPU1", "IPU2", "IPU3"]
    lane0 = [(e.kind, e.name, e.start) for e in two.events if e.lane == "IPU0"]
    lane2 = [(e.kind, e.name, e.start) for e in two.events if e.lane == "IPU2"]
    assert lane0 == lane2
    reduce = [e for e in two.events if e.name == "AllReduce gradients (IPU-Links)"]
    assert {e.lane for e in reduce} == {"IPU0", "IPU1", "IPU2", "IPU3"}
    update = next(e for e in two.events if e.lane == "IPU0" and e.kind == "weight_update")
    assert next(e for e in reduce if e.lane == "IPU0").end <= update.start
    accumulators = stages[0].parameter_bytes  # float32 variables, float32 accumulators
    assert reduce[0].duration == pytest.approx(allreduce_seconds(accumulators, 2, GC200))
    assert two.metrics.effective_batch_size == 2 * 16 * 8 == 2 * one.metrics.effective_batch_size
    assert two.metrics.samples_per_second == pytest.approx(256 / two.metrics.makespan)


def test_samples_per_second_counts_replicas_batch_gac_and_repeats():
    timeline = simulate_pipeline(balanced_stages(2), "interleaved", 4, repeat_count=3,
                                 replicas=2, batch_size=32)
    assert timeline.metrics.samples == 2 * 32 * 4 * 3
    assert timeline.metrics.samples_per_second == pytest.approx(
        768 / timeline.metrics.makespan)



@pytest.mark.parametrize("name, kwargs", [
    ("grouped", dict(replicas=2, repeat_count=2, batch_size=8)),
    ("1f1b", dict(offload_weights=True, offload_activations=True, recompute=True)),
    ("zero-bubble", dict(unit_cost=True)),
])
def test_metrics_are_the_sums_of_the_events(name, kwargs):
    timeline = simulate_pipeline(balanced_stages(4), name, 8, **kwargs)
    m = timeline.metrics
    assert m.makespan == max(e.end for e in timeline.events)
    busy = defaultdict(Counter)
    for e in timeline.events:
        busy[e.lane][e.kind] += e.duration
    ipu_lanes = [lane for lane in timeline.lanes if lane != "host"]
    assert sorted(m.utilisation) == sorted(m.busy_time_by_kind) == list(range(len(ipu_lanes)))
    compute = {}
    for lane in ipu_lanes:
        ipu = int(lane[3:])
        compute[ipu] = sum(t for kind, t in busy[lane].items() if kind in COMPUTE_KINDS)
        assert m.utilisation[ipu] == pytest.approx(compute[ipu] / m.makespan)
        for kind, seconds in busy[lane].items():
            assert m.busy_time_by_kind[ipu][kind] == pytest.approx(seconds)
    idle = sum(m.makespan - t for t in compute.values())
    assert m.bubble_fraction == pytest.approx(idle / (m.makespan * len(compute)))
    assert m.host_overhead_time == pytest.approx(sum(busy["host"].values()))
    assert m.stream_copy_time == pytest.approx(
        max(busy[lane]["stream_copy"] for lane in ipu_lanes))
    passes = kwargs.get("repeat_count", 1)
    assert (m.engine_runs, m.iterations) == (1, 8 * passes)
    if "batch_size" in kwargs:
        samples = kwargs.get("replicas", 1) * kwargs["batch_size"] * 8 * passes
        assert m.samples_per_second == pytest.approx(samples / m.makespan)
    else:
        assert m.samples is m.samples_per_second is m.effective_batch_size is None

# --- memory ------------------------------------------------------------------------------


def test_peak_memory_counts_weights_accumulators_optimizer_state_and_activations():
    stages = balanced_stages(4)
    timeline = simulate_pipeline(stages, "1f1b", 16)
    stage = stages[0]
    static = stage.parameter_bytes * 2 + stage.optimizer_state_bytes
    for ipu in range(4):
        in_flight = timeline.metrics.peak_in_flight[ipu]
        assert in_flight == 4 - ipu
        assert timeline.metrics.peak_memory_bytes[ipu] == static + in_flight * stage.activation_bytes
    samples = [c for c in timeline.counters if c.lane == "IPU0" and c.name == "memory"]
    assert max(c.value for c in samples) == timeline.metrics.peak_memory_bytes[0]


def test_accumulation_dtype_sizes_the_accumulators():
    stages = balanced_stages(2)
    wide = simulate_pipeline(stages, "grouped", 4, accumulation_dtype_bytes=4)
    narrow = simulate_pipeline(stages, "grouped", 4, accumulation_dtype_bytes=2)
    saved = stages[0].parameter_bytes // 4 * 2  # parameters x (4 - 2) bytes
    assert wide.metrics.peak_memory_bytes[0] - narrow.metrics.peak_memory_bytes[0] == saved


def test_recomputation_keeps_only_stage_inputs_and_adds_a_forward():
    stages = balanced_stages(4, activation_bytes=5_000_000)
    plain = simulate_pipeline(stages, "grouped", 16)
    recomputed = simulate_pipeline(stages, "grouped", 16, recompute=True)
    recomputes = [e for e in recomputed.events if e.kind == "recompute"]
    assert len(recomputes) == 3 * 16  # not on the last stage: its F and B are back to back
    assert all(e.stage != 3 for e in recomputes)
    assert recomputed.metrics.peak_memory_bytes[0] < plain.metrics.peak_memory_bytes[0]
    assert recomputed.metrics.makespan > plain.metrics.makespan


def test_offloading_moves_optimizer_state_and_activations_through_streaming_memory():
    stages = balanced_stages(2, activation_bytes=5_000_000)
    plain = simulate_pipeline(stages, "grouped", 8)
    offloaded = simulate_pipeline(stages, "grouped", 8, offload_weights=True,
                                  offload_activations=True)
    names = Counter(e.name for e in offloaded.events if e.kind == "stream_copy" and e.lane == "IPU0")
    assert names["load optimizer state (streaming memory->IPU)"] == 1
    assert names["store optimizer state (IPU->streaming memory)"] == 1
    assert names["store activations (IPU->streaming memory)"] == 8
    assert names["load activations (streaming memory->IPU)"] == 8
    lane = [e for e in offloaded.events if e.lane == "IPU0"]
    update = next(i for i, e in enumerate(lane) if e.kind == "weight_update")
    assert lane[update - 1].name.startswith("load optimizer state")
    assert lane[update + 1].name.startswith("store optimizer state")
    assert offloaded.metrics.peak_memory_bytes[0] < plain.metrics.peak_memory_bytes[0]
    assert offloaded.metrics.makespan > plain.metrics.makespan


def test_out_of_memory_is_flagged_with_the_ipus_message():
    huge = balanced_stages(2, activation_bytes=350_000_000)  # stage 0 holds 3: 1.05 GB
    timeline = simulate_pipeline(huge, "grouped", 8)
    assert timeline.metrics.out_of_memory == {0: True, 1: False}
    [message] = timeline.metrics.out_of_memory_messages
    assert message.startswith("Out of memory on IPU0: ") and message.endswith("0.941 GB available")
    assert out_of_memory_message(1, 1.2e9, 0.9e9) == (
        "Out of memory on IPU1: 1.2 GB required, 0.9 GB available")
    fits = simulate_pipeline(huge, "grouped", 8, recompute=True)
    assert not any(fits.metrics.out_of_memory.values())


# --- inputs ------------------------------------------------------------------------------


def test_gradient_accumulation_errors_come_with_the_sdk_message():
    with pytest.raises(PipelineConfigurationError) as error:
        simulate_pipeline(unit_stages(4), "grouped", 12)
    assert error.value.sdk_error == "FailedPreconditionError"
    assert error.value.message.startswith(
        "The number of iterations of the pipeline must be a multiple of 8, but it is 12.")
    with pytest.raises(PipelineConfigurationError, match="must be specified"):
        simulate_pipeline(unit_stages(4), "grouped")
    with pytest.raises(PipelineConfigurationError, match="at least two computational stages"):
        simulate_pipeline(unit_stages(1), "gpipe", 4)
    with pytest.raises(PipelineConfigurationError) as error:
        simulate_pipeline(unit_stages(4), "interleaved", 12, device_mapping=[0, 1, 1, 0])
    assert error.value.sdk_error == "NotImplementedError"


def test_a_hand_written_schedule_runs_and_a_deadlocking_one_is_reported():
    mine = Schedule.from_actions(["0F0 0F1 0B0 0B1 0U", "1F0 1B0 1F1 1B1 1U"])
    timeline = simulate_pipeline(unit_stages(2), mine, unit_cost=True)
    assert timeline.metrics.makespan == 6
    stuck = Schedule.from_actions(["0F0 0B0 0U", "1B0 1F0 1U"])
    with pytest.raises(DeadlockError):
        simulate_pipeline(unit_stages(2), stuck, unit_cost=True)


def test_split_backward_costs_half_each():
    stage = balanced_stages(1)[0]
    full = action_seconds(stage, "B", GC200, split_backward=False)
    assert action_seconds(stage, "B", GC200, True) + action_seconds(stage, "W", GC200, True) \
        == pytest.approx(full)


def test_chrome_trace_has_phase_track_memory_counters_and_flows():
    timeline = simulate_pipeline(balanced_stages(3), "grouped", 6)
    trace = json.loads(json.dumps(to_chrome_trace(timeline)))["traceEvents"]
    assert any(e.get("cat") == "phase" and e["name"] == "ramp-up" for e in trace)
    assert any(e["ph"] == "C" and e["name"] == "memory IPU0" for e in trace)
    assert any(e["ph"] == "s" for e in trace)
