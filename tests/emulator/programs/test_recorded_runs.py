"""Every run of a sharded or pipelined program is recorded with per-stage costs measured
from its graph, and simulates to the trace of that run (``ProgramRecord.simulate``)."""
import json

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu, record, views
from ipu_emulator.sim import recorded_runs
from ipu_emulator.sim.hardware import get_target
from ipu_emulator.sim.pipeline_simulator import action_seconds
from ipu_emulator.ipu.ops import pipelining_ops

BATCH = 8
X = np.random.RandomState(1).randn(BATCH * 32, 16).astype(np.float32)
Y = (np.arange(BATCH * 32) % 10).astype(np.int32)


pytestmark = pytest.mark.usefixtures("two_ipus")  # see conftest.py


def dense(name, x, width):
    w = tf.compat.v1.get_variable(name, [x.shape[-1], width],
                                  initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
    return tf.matmul(x, w)


def wide_stage(x, y):  # [8,16]x[16,256] then [8,256]x[256,64]: far more work than stage 2
    return tf.nn.relu(dense("wide2", tf.nn.relu(dense("wide1", x, 256)), 64)), y


def narrow_stage(h, y):
    logits = dense("narrow", h, 10)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def optimizer(loss):
    return pipelining_ops.OptimizerFunctionOutput(
        tf.compat.v1.train.GradientDescentOptimizer(0.01), loss)


def run_pipelined(schedule, gac=8, repeat_count=1, runs=1):
    graph = tf.Graph()
    with graph.as_default():
        data = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(BATCH, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def model():
            return pipelining_ops.pipeline(
                [wide_stage, narrow_stage], gac, repeat_count=repeat_count,
                infeed_queue=infeed, outfeed_queue=outfeed, optimizer_function=optimizer,
                outfeed_loss=True, pipeline_schedule=schedule)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            op = ipu.ipu_compiler.compile(model)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            with record.capture() as recorded:
                for _ in range(runs):
                    sess.run(op)
    return recorded


def run_sharded(steps=3):
    graph = tf.Graph()
    with graph.as_default():
        data = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(BATCH, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)

        def step(total, x, y):
            with ipu.scopes.ipu_shard(0):
                h, y = wide_stage(x, y)
            with ipu.scopes.ipu_shard(1):
                loss = narrow_stage(h, y)
                train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
            return total + loss, train

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [total] = ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(steps, step, [0.0], infeed_queue=infeed))
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            with record.capture() as runs:
                sess.run(total)
    return runs


def compute_events(timeline, lane):
    return [e for e in timeline.events_on(lane) if e.kind in ("forward", "backward")]


def overlapping(a, b):
    return a.start < b.end and b.start < a.end


def test_a_sharded_run_simulates_as_shards_taking_turns():
    runs = run_sharded(steps=3)
    [run] = runs.runs
    assert run.iterations == 3 and len(run.stages) == 2 and run.pipeline is None
    timeline = runs.simulate()
    first, second = compute_events(timeline, "IPU0"), compute_events(timeline, "IPU1")
    # minimize was built in shard 1's scope, so the whole backward pass runs on IPU1 (the
    # SDK's rule): IPU0 computes a forward pass per step, IPU1 a forward and a backward.
    assert [e.kind for e in first] == ["forward"] * 3
    assert len(second) == 6 and sum(e.kind == "backward" for e in second) == 3
    assert not any(overlapping(a, b) for a in first for b in second)
    # The stage costs come from the graph: each shard's forward takes what its recorded
    # stage costs (its ops' fixed cycles plus its FLOPs), and the shards differ.
    target = get_target("ipu2")
    forward = {lane: max(e.duration for e in compute_events(timeline, lane)
                         if e.kind == "forward") for lane in ("IPU0", "IPU1")}
    for lane, stage in zip(("IPU0", "IPU1"), run.stages):
        assert forward[lane] == pytest.approx(
            action_seconds(stage, "F", target, split_backward=False))
    assert run.stages[0].forward_flops > run.stages[1].forward_flops  # the wide shard
    assert run.stages[1].op_cycles[0] > run.stages[0].op_cycles[0]    # the loss's ops


def test_a_pipelined_run_simulates_its_schedule_with_stages_overlapping():
    runs = run_pipelined(pipelining_ops.PipelineSchedule.Grouped, gac=8, repeat_count=2)
    [run] = runs.runs
    assert run.pipeline.schedule == "grouped" and run.iterations == 16
    timeline = runs.simulate()
    first, second = compute_events(timeline, "IPU0"), compute_events(timeline, "IPU1")
    assert sum(e.kind == "forward" for e in first) == 16
    assert any(overlapping(a, b) for a in first for b in second)
    assert {name for name, _, _ in timeline.phases} >= {"ramp-up", "main", "ramp-down",
                                                       "weight update"}


def test_pipelining_beats_sharding_and_sequential_matches_it_in_simulated_time():
    grouped = run_pipelined(pipelining_ops.PipelineSchedule.Grouped, gac=16).simulate()
    sequential = run_pipelined(pipelining_ops.PipelineSchedule.Sequential, gac=16).simulate()
    assert grouped.metrics.makespan < sequential.metrics.makespan
    assert grouped.metrics.bubble_fraction < sequential.metrics.bubble_fraction


def test_grouped_holds_more_micro_batches_in_flight_than_interleaved():
    grouped = run_pipelined(pipelining_ops.PipelineSchedule.Grouped).simulate()
    interleaved = run_pipelined(pipelining_ops.PipelineSchedule.Interleaved).simulate()
    assert grouped.metrics.peak_in_flight[0] > interleaved.metrics.peak_in_flight[0]


def test_several_runs_join_on_one_clock_and_last_runs_gives_the_last_one():
    runs = run_pipelined(pipelining_ops.PipelineSchedule.Grouped, runs=3)
    joined = runs.simulate()
    assert len(joined.engine_run_spans) == 3
    single = record.last_runs(1).simulate()
    assert joined.metrics.makespan == pytest.approx(3 * single.metrics.makespan)
    assert [e.engine_run for e in joined.events if e.kind == "host"] == [0, 1, 2]


def test_the_trace_saves_for_perfetto(tmp_path):
    run_pipelined(pipelining_ops.PipelineSchedule.Interleaved)
    path = tmp_path / "pipeline.json"
    views.save_chrome_trace(record.last_runs(1).simulate(), path)
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"IPU0", "IPU1"} <= names
    assert any(e.get("ph") == "X" and e.get("cat") == "backward" for e in events)


def test_synthetic_data_removes_the_infeed_host_transfer(monkeypatch):
    real = run_pipelined(pipelining_ops.PipelineSchedule.Grouped).runs[0]
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_synthetic_data")
    synthetic = run_pipelined(pipelining_ops.PipelineSchedule.Grouped).runs[0]
    # The record keeps the bytes the program moves and the flag; the simulator decides.
    assert real.stages[0].input_bytes == synthetic.stages[0].input_bytes == (
        BATCH * 16 * 4 + BATCH * 4)
    assert synthetic.synthetic_data and not real.synthetic_data

    def infeed_copies(run, asked):
        return [e for e in recorded_runs.simulate_run(run, synthetic_data=asked).events
                if e.kind == "stream_copy" and "infeed" in e.name.lower()]

    assert infeed_copies(real, asked=False) and infeed_copies(synthetic, asked=False)
    assert not infeed_copies(synthetic, asked=None)
    assert not infeed_copies(real, asked=None)  # a pipeline is shown synthetic by default
