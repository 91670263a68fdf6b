"""Gradient accumulation: a weight update after every k-th micro-batch, no more, no fewer.

A run of N steps with accumulation count k (k divides N, as the loop check guarantees) does N
forwards and N backwards on each IPU and N / k weight updates, each after the k backwards of
its micro-batches: counted here from the simulated events, for one-IPU and replicated engine
runs (``timeline.simulate_engine_runs``) and for recorded sharded runs, whose shards take
turns (``recorded_runs.simulate_run``).
"""
from collections import Counter

import pytest

from ipu_emulator import record
from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.recorded_runs import simulate_run, simulate_runs
from ipu_emulator.sim.timeline import simulate_engine_runs

STEP = ComputeCost(forward_flops=2e9, backward_flops=4e9, weight_update_flops=1e7,
                   bytes_accessed=3e8, parameter_bytes=400_000)
MLP = builtin_models.builtin_model("tutorial-mlp")
# (steps, accumulation count): k = 1 (an update every step), k = N (one update per run), and
# between.
SHAPES = [(1, 1), (4, 1), (4, 2), (6, 3), (8, 4), (12, 4), (5, 5), (12, 6)]


def counts(timeline):
    """{(kind, ipu): how many events}."""
    return Counter((e.kind, e.ipu) for e in timeline.events)


def backwards_between_updates(timeline, ipu):
    """On ``ipu``, in time order: how many backwards each weight update follows (counted
    from the previous update), and how many backwards come after the last one."""
    between, since = [], 0
    for e in sorted(timeline.events, key=lambda e: e.start):
        if e.ipu != ipu:
            continue
        if e.kind == "backward":
            since += 1
        elif e.kind == "weight_update":
            between.append(since)
            since = 0
    return between, since


# --- engine runs (timeline.py) ------------------------------------------------------------


@pytest.mark.parametrize("steps, k", SHAPES)
@pytest.mark.parametrize("replicas", [1, 2])
def test_an_engine_run_updates_the_weights_once_per_k_steps(steps, k, replicas):
    run = EngineRun("train", steps, STEP, gradient_accumulation_count=k, replicas=replicas,
                    num_ipus=replicas, all_reduce_bytes=100_000 if replicas > 1 else 0)
    timeline = simulate_engine_runs([run])
    n = counts(timeline)
    assert run.weight_updates == steps // k   # the record's count, as the trace draws it
    for ipu in range(replicas):
        assert (n["forward", ipu], n["backward", ipu]) == (steps, steps)
        assert n["weight_update", ipu] == steps // k
        assert backwards_between_updates(timeline, ipu) == ([k] * (steps // k), 0)
        # The replicas all-reduce their gradients for each update, never in between.
        assert n["exchange", ipu] == (steps // k if replicas > 1 else 0)
    updates = [e.iteration for e in timeline.events if e.kind == "weight_update" and e.ipu == 0]
    assert updates == [j * k + k - 1 for j in range(steps // k)]   # after steps k, 2k, ...


@pytest.mark.parametrize("steps, k", [(4, 2), (6, 3), (12, 4), (8, 8)])
def test_an_engine_run_with_accumulation_saves_exactly_the_skipped_updates(steps, k):
    """Timed rather than counted: accumulating over k steps takes the time of the N - N/k
    weight updates it skips less than updating every step (one IPU: nothing else moves)."""
    every_step = simulate_engine_runs([EngineRun("train", steps, STEP)])
    accumulated = simulate_engine_runs(
        [EngineRun("train", steps, STEP, gradient_accumulation_count=k)])
    durations = [e.duration for e in every_step.events if e.kind == "weight_update"]
    update = durations[0]
    assert durations == pytest.approx([update] * steps, rel=1e-9)
    skipped = steps - steps // k
    assert every_step.metrics.makespan - accumulated.metrics.makespan == pytest.approx(
        skipped * update, rel=1e-9)
    assert accumulated.metrics.busy_time_by_kind[0]["weight_update"] == pytest.approx(
        steps // k * update, rel=1e-9)


# --- recorded sharded runs (recorded_runs.py) ---------------------------------------------


def sharded_run(steps, k, shards):
    layers = ("dense128", "dense64", "dense32")[:shards - 1]
    stages = tuple(cost_model.stage_costs(MLP, layers, 32))
    assert len(stages) == shards
    return EngineRun("train", steps, ComputeCost(), stages=stages, num_ipus=shards,
                     gradient_accumulation_count=k)


@pytest.mark.parametrize("steps, k", SHAPES)
@pytest.mark.parametrize("shards", [2, 4])
def test_a_sharded_run_updates_each_shard_once_per_k_steps(steps, k, shards):
    run = sharded_run(steps, k, shards)
    timeline = simulate_run(run, synthetic_data=True)
    n = counts(timeline)
    assert run.weight_updates == steps // k
    for ipu in range(shards):
        assert (n["forward", ipu], n["backward", ipu]) == (steps, steps)
        assert n["weight_update", ipu] == steps // k
        assert backwards_between_updates(timeline, ipu) == ([k] * (steps // k), 0)
    assert timeline.metrics.iterations == steps
    micro_batches = [(e.iteration, e.micro_batch) for e in timeline.events
                     if e.kind == "forward" and e.ipu == 0]
    # Pass j of the Sequential schedule carries micro-batches 0 .. k-1, one pass per update.
    assert micro_batches == [(j, m) for j in range(steps // k) for m in range(k)]


def test_accumulating_a_sharded_run_takes_less_time_than_updating_every_step():
    """N steps are N micro-batches whatever k is: accumulating drops N - N/k updates of each
    shard, so the run gets shorter, never longer, as k grows."""
    makespans = [simulate_run(sharded_run(12, k, 2), synthetic_data=True).metrics.makespan
                 for k in (1, 2, 3, 6, 12)]
    assert makespans == sorted(makespans, reverse=True)
    assert len(set(makespans)) == len(makespans)


def test_sharded_runs_in_a_record_keep_their_own_accumulation_counts():
    runs = [sharded_run(8, 4, 2), sharded_run(6, 1, 2), sharded_run(6, 3, 2)]
    joined = simulate_runs(runs, synthetic_data=True)
    by_run = Counter(e.engine_run for e in joined.events
                     if e.kind == "weight_update" and e.ipu == 0)
    assert by_run == {0: 8 // 4, 1: 6 // 1, 2: 6 // 3}
    assert joined.metrics.iterations == 8 + 6 + 6


# --- the record's count (record.EngineRun.weight_updates) -----------------------------------


def test_a_run_without_weight_update_work_counts_no_updates():
    """Inference, or a step that only adds its gradients up (accumulated by hand, applied by
    another program): no optimizer apply, so no weight update, whatever the count."""
    forward_and_backward = ComputeCost(forward_flops=2e9, backward_flops=4e9)
    assert EngineRun("accumulate", 16, forward_and_backward).weight_updates == 0
    assert EngineRun("apply", 1, ComputeCost(weight_update_flops=1e7)).weight_updates == 1


def test_a_training_pipeline_updates_once_per_pass():
    settings = record.PipelineSettings("grouped", gradient_accumulation_count=8,
                                       repeat_count=3, device_mapping=(0, 1))
    stages = tuple(cost_model.stage_costs(MLP, ("dense64",), 32))
    training = EngineRun("pipeline", 24, ComputeCost(), stages=stages, pipeline=settings)
    assert training.weight_updates == 3
    inference = EngineRun("pipeline", 24, ComputeCost(), stages=stages,
                          pipeline=record.PipelineSettings(
                              "grouped", 8, 3, (0, 1), training=False))
    assert inference.weight_updates == 0
