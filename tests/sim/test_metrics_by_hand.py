"""The simulator's metrics against values worked out here, independently of its code.

Each expected value is either a textbook figure (GPipe and 1F1B with unit costs: makespan
``2(M + S - 1)`` per pass, bubble ``(S - 1)/(M + S - 1)``, 1F1B holds ``S - k`` micro-batches
on stage ``k``) or a sum over the timeline's own events computed in this file, which shares
no code with the simulator's metrics.
"""
import pytest

from ipu_emulator.sim.builtin_models import builtin_model
from ipu_emulator.sim.cost_model import StageCost, stage_costs
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages

# What counts as an IPU computing (not copying, exchanging or waiting).
COMPUTE_KINDS = {"forward", "backward", "weight_update", "recompute"}


def ipu_lanes(timeline):
    return [lane for lane in timeline.lanes if lane.startswith("IPU")]


def compute_time_by_hand(timeline, lane):
    return sum(e.end - e.start for e in timeline.events
               if e.lane == lane and e.kind in COMPUTE_KINDS)


def makespan_by_hand(timeline):
    return max(e.end for e in timeline.events) - min(e.start for e in timeline.events)


def check_utilisation_and_bubble(timeline):
    """Utilisation per IPU lane and the bubble fraction, summed from the events here."""
    makespan = makespan_by_hand(timeline)
    lanes = ipu_lanes(timeline)
    compute = {lane: compute_time_by_hand(timeline, lane) for lane in lanes}
    metrics = timeline.metrics
    assert metrics.makespan == pytest.approx(makespan)
    assert sorted(metrics.utilisation) == sorted(int(lane[3:]) for lane in lanes)
    for lane in lanes:
        assert metrics.utilisation[int(lane[3:])] == pytest.approx(compute[lane] / makespan)
    idle = makespan * len(lanes) - sum(compute.values())
    assert metrics.bubble_fraction == pytest.approx(idle / (makespan * len(lanes)))
    return compute


# --- textbook figures with unit costs -------------------------------------------------------

@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages, micro_batches", [(2, 4), (4, 8), (3, 7)])
@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_unit_cost_makespan_and_bubble_are_the_textbook_ones(schedule, stages, micro_batches,
                                                             replicas):
    timeline = simulate_pipeline(unit_stages(stages), schedule, micro_batches,
                                 replicas=replicas, unit_cost=True)
    assert timeline.metrics.makespan == 2 * (micro_batches + stages - 1)
    assert timeline.metrics.bubble_fraction == pytest.approx(
        (stages - 1) / (micro_batches + stages - 1))
    # Every replica's IPU is a lane of its own, and each one is busy 2M units.
    assert len(ipu_lanes(timeline)) == stages * replicas
    for utilisation in timeline.metrics.utilisation.values():
        assert utilisation == pytest.approx(2 * micro_batches / timeline.metrics.makespan)
    check_utilisation_and_bubble(timeline)


@pytest.mark.parametrize("repeat_count", [1, 3])
def test_repeat_count_runs_the_passes_one_after_another(repeat_count):
    timeline = simulate_pipeline(unit_stages(4), "gpipe", 8, repeat_count=repeat_count,
                                 unit_cost=True)
    assert timeline.metrics.makespan == repeat_count * 22
    assert timeline.metrics.iterations == 8 * repeat_count
    check_utilisation_and_bubble(timeline)


def test_one_f_one_b_holds_s_minus_k_micro_batches_and_gpipe_holds_all():
    one_f_one_b = simulate_pipeline(unit_stages(4), "1f1b", 8, unit_cost=True)
    gpipe = simulate_pipeline(unit_stages(4), "gpipe", 8, unit_cost=True)
    assert one_f_one_b.metrics.peak_in_flight == {0: 4, 1: 3, 2: 2, 3: 1}
    assert gpipe.metrics.peak_in_flight == {0: 8, 1: 8, 2: 8, 3: 8}


def in_flight_by_hand(timeline, lane):
    """Most micro-batches held at once: each, per stage on that lane, from the start of its
    forward to the end of its last backward work."""
    held = {}
    for e in timeline.events:
        if e.lane == lane and e.micro_batch is not None and e.kind in ("forward", "backward"):
            key = (e.stage, e.micro_batch)
            first, last = held.get(key, (e.start, e.end))
            held[key] = (min(first, e.start), max(last, e.end))
    changes = sorted([(start, 1) for start, _ in held.values()]
                     + [(end, -1) for _, end in held.values()])  # ends sort before starts
    peak = count = 0
    for _, step in changes:
        count += step
        peak = max(peak, count)
    return peak


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential", "1f1b",
                                      "interleaved-1f1b", "zero-bubble"])
def test_peak_in_flight_matches_the_events(schedule):
    timeline = simulate_pipeline(unit_stages(4), schedule, 8, unit_cost=True)
    for lane in ipu_lanes(timeline):
        assert timeline.metrics.peak_in_flight[int(lane[3:])] == in_flight_by_hand(timeline, lane)


# --- memory and throughput, worked out from the stage costs -------------------------------

def stage(name, parameters=1000, optimizer_state=200, activations=100):
    return StageCost(name, forward_flops=1.0, backward_flops=2.0, parameter_bytes=parameters,
                     optimizer_state_bytes=optimizer_state, activation_bytes=activations,
                     input_bytes=10, output_bytes=10)


def test_peak_memory_is_weights_accumulators_state_and_the_activations_in_flight():
    stages = [stage("s0", parameters=4000), stage("s1", activations=300), stage("s2"),
              stage("s3", optimizer_state=0)]
    timeline = simulate_pipeline(stages, "1f1b", 8, unit_cost=True)
    for k, cost in enumerate(stages):
        in_flight = 4 - k  # 1F1B
        # float32 accumulators: one per float32 weight, as many bytes as the weights.
        expected = (2 * cost.parameter_bytes + cost.optimizer_state_bytes
                    + in_flight * cost.activation_bytes)
        assert timeline.metrics.peak_memory_bytes[k] == expected
    half = simulate_pipeline(stages, "1f1b", 8, unit_cost=True, accumulation_dtype_bytes=2)
    assert half.metrics.peak_memory_bytes[0] == timeline.metrics.peak_memory_bytes[0] - 2000


def test_samples_per_second_counts_every_replica_and_pass():
    timeline = simulate_pipeline(unit_stages(4), "gpipe", 8, repeat_count=2, replicas=2,
                                 batch_size=16, unit_cost=True)
    samples = 2 * 16 * 8 * 2  # replicas x micro-batch size x micro-batches x passes
    assert timeline.metrics.samples == samples
    assert timeline.metrics.effective_batch_size == 2 * 16 * 8
    assert timeline.metrics.samples_per_second == pytest.approx(samples / (2 * 22))


# --- real costs: uneven stages, recomputation, replicas --------------------------------------

TUTORIAL_STAGES = stage_costs(builtin_model("tutorial-mlp"), ["dense32"], batch_size=32)


@pytest.mark.parametrize("options", [
    {},
    {"replicas": 2},
    {"recompute": True},
    {"repeat_count": 3, "replicas": 4},
], ids=["plain", "replicas", "recompute", "repeat-replicas"])
@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "1f1b"])
def test_uneven_stages_utilisation_and_bubble_match_the_events(schedule, options):
    timeline = simulate_pipeline(TUTORIAL_STAGES, schedule, 16, batch_size=32, **options)
    compute = check_utilisation_and_bubble(timeline)
    # The tutorial's split is very uneven, so IPU0 alone would misstate the bubble.
    utilisation = timeline.metrics.utilisation
    assert abs((1 - utilisation[0]) - timeline.metrics.bubble_fraction) > 0.001
    if options.get("recompute"):
        assert any(e.kind == "recompute" for e in timeline.events)
        plain = simulate_pipeline(TUTORIAL_STAGES, schedule, 16, batch_size=32)
        assert compute["IPU0"] > compute_time_by_hand(plain, "IPU0")


def test_joined_engine_runs_follow_one_another_on_one_clock():
    from ipu_emulator.sim.recorded_runs import join_timelines
    first = simulate_pipeline(unit_stages(2), "gpipe", 4, unit_cost=True)
    second = simulate_pipeline(unit_stages(2), "1f1b", 6, unit_cost=True)
    joined = join_timelines([first, second])
    assert joined.engine_run_spans == [(0.0, 10.0), (10.0, 24.0)]   # 2(M + S - 1) each
    later = [e for e in joined.events if e.engine_run == 1]
    assert len(later) == len(second.events)
    assert min(e.start for e in later) == 10.0
    assert makespan_by_hand(joined) == joined.metrics.makespan == 24.0
    check_utilisation_and_bubble(joined)
