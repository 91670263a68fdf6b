"""A sharded program trained with ``GradientAccumulationOptimizerV2`` simulates with one
weight update per ``num_mini_batches`` steps, as it runs (tutorial step 2 keeps the
accumulation optimizer of step 1).  ``minimize`` is built in the last shard's scope, so, as
in the SDK, the whole backward pass runs on the last IPU, unless the gradients are colocated
with their forward ops (``colocate_gradients_with_ops=True``)."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu, record

BATCH = 4
X = np.random.RandomState(2).randn(BATCH * 8, 6).astype(np.float32)
Y = (np.arange(BATCH * 8) % 3).astype(np.int32)


pytestmark = pytest.mark.usefixtures("two_ipus")  # see conftest.py


def run_sharded(num_mini_batches, iterations, colocate_gradients=False):
    graph = tf.Graph()
    with graph.as_default():
        data = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(BATCH, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)

        def step(x, y):
            with ipu.scopes.ipu_shard(0):
                hidden = tf.keras.layers.Dense(8, activation="relu")(x)
            with ipu.scopes.ipu_shard(1):
                logits = tf.keras.layers.Dense(3)(hidden)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
                optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
                if num_mini_batches > 1:
                    optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
                        optimizer, num_mini_batches=num_mini_batches)
                return optimizer.minimize(
                    loss, colocate_gradients_with_ops=colocate_gradients)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            program = ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(iterations, step, [], infeed_queue=infeed))
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            with record.capture() as runs:
                sess.run(program)
    return runs


def updates_per_lane(timeline):
    return {lane: sum(e.kind == "weight_update" for e in timeline.events_on(lane))
            for lane in timeline.ipu_lanes}


@pytest.mark.parametrize("colocate_gradients", [False, True])
def test_accumulating_shards_update_once_per_num_mini_batches(colocate_gradients):
    runs = run_sharded(num_mini_batches=4, iterations=8, colocate_gradients=colocate_gradients)
    [run] = runs.runs
    assert len(run.stages) == 2 and run.gradient_accumulation_count == 4
    timeline = runs.simulate(batch_size=BATCH)
    assert updates_per_lane(timeline) == {"IPU0": 2, "IPU1": 2}
    forwards = [e for e in timeline.events_on("IPU0") if e.kind == "forward"]
    assert len(forwards) == 8  # every mini-batch still passes through the shards
    assert timeline.metrics.effective_batch_size == 4 * BATCH

    def backwards_on(lane):
        return [e for e in timeline.events_on(lane) if e.kind == "backward"]

    # Built in shard 1's scope, every gradient runs on IPU1; colocated, each runs where its
    # forward op ran.
    assert bool(backwards_on("IPU0")) == colocate_gradients
    assert len(backwards_on("IPU1")) == 8
    # No update before the 4th mini-batch's backward pass has finished on the IPU that
    # computes it (each IPU's own when colocated, IPU1's otherwise).
    for lane in timeline.ipu_lanes:
        backwards = backwards_on(lane if colocate_gradients else "IPU1")
        first_update = min(e.start for e in timeline.events_on(lane)
                           if e.kind == "weight_update")
        assert sorted(e.end for e in backwards)[3] <= first_update < sorted(
            e.start for e in backwards)[4]


def test_without_accumulation_every_step_updates_the_weights():
    runs = run_sharded(num_mini_batches=1, iterations=6)
    timeline = runs.simulate(batch_size=BATCH)
    assert updates_per_lane(timeline) == {"IPU0": 6, "IPU1": 6}
    assert timeline.metrics.effective_batch_size == BATCH
