"""Replicated pipelines: a pipeline on a device with more IPUs than its stages need runs as
real copies (Graphcore's TensorFlow user guide: replication, pipelining).

Each replica runs the whole pipeline on its own micro-batches (replica r of R takes infeed
element i * R + r), on its own CPU devices, with its own variables; outfeeds gain the
replica axis.  As in the SDK the pipeline itself does not reduce gradients across replicas:
a ``CrossReplicaOptimizer`` in the optimizer function averages the accumulated gradients
before each weight update, and then the replicas stay identical.
"""
import numpy as np
import pytest
from tests.support.ipu_systems import configure_ipus as configure
import tensorflow as tf

from ipu_emulator import ipu, record
from ipu_emulator.ipu import utils
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_emulator.ipu.ops import cross_replica_ops, pipelining_ops
from ipu_emulator.runtime import replication

IPU = "/device:IPU:0"
BATCH, FEATURES, HIDDEN = 2, 3, 4
RNG = np.random.RandomState(7)
X = RNG.randn(96, FEATURES).astype(np.float32)
Y = RNG.randn(96, 1).astype(np.float32)
W1 = np.linspace(-1, 1, FEATURES * HIDDEN, dtype=np.float32).reshape(FEATURES, HIDDEN)
W2 = np.linspace(-1, 1, HIDDEN, dtype=np.float32).reshape(HIDDEN, 1)
LEARNING_RATE = 0.05
MEAN = GradientAccumulationReductionMethod.MEAN
SUM = GradientAccumulationReductionMethod.SUM






def micro_batches():
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True)


def stage1(x, y):
    w1 = tf.compat.v1.get_variable("w1", initializer=tf.compat.v1.constant_initializer(W1),
                                   shape=W1.shape)
    return tf.nn.relu(tf.matmul(x, w1)), y


def stage2(hidden, y):
    w2 = tf.compat.v1.get_variable("w2", initializer=tf.compat.v1.constant_initializer(W2),
                                   shape=W2.shape)
    return tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - y))


def optimizer_function(make_optimizer, cross_replica):
    def function(loss):
        opt = make_optimizer()
        if cross_replica:
            opt = ipu.optimizers.CrossReplicaOptimizer(opt)
        return pipelining_ops.OptimizerFunctionOutput(opt, loss)
    return function


def sgd(rate=LEARNING_RATE):
    return lambda: tf.compat.v1.train.GradientDescentOptimizer(rate)


def momentum():
    return tf.compat.v1.train.MomentumOptimizer(LEARNING_RATE, 0.9)


def train(graph, num_ipus, gac, dataset=None, make_optimizer=None, cross_replica=True,
          reduction=MEAN, repeat_count=2, runs=1):
    """Train the two-stage model; returns (outfed losses per run, {name: [value per
    replica]}, engine runs)."""
    configure(num_ipus)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset or micro_batches())
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def model():
        return pipelining_ops.pipeline(
            [stage1, stage2], gac, repeat_count=repeat_count, infeed_queue=infeed,
            outfeed_queue=outfeed, outfeed_loss=True, reduction_method=reduction,
            optimizer_function=optimizer_function(make_optimizer or sgd(), cross_replica))

    with ipu.scopes.ipu_scope(IPU):
        run = ipu.ipu_compiler.compile(model, [])
    dequeue = outfeed.dequeue()
    weights = [v for v in tf.compat.v1.trainable_variables()]
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        losses = []
        with record.capture() as captured:
            for _ in range(runs):
                sess.run(run)
                losses.append(sess.run(dequeue))
        values = {v.op.name: replication.replica_values(sess, v) for v in weights}
    return losses, values, captured.runs


# --- numerics ---------------------------------------------------------------------------


@pytest.mark.parametrize("make_optimizer", [sgd(), momentum], ids=["sgd", "momentum"])
def test_two_replicas_train_like_one_pipeline_fed_both_replicas_micro_batches(make_optimizer):
    """2 replicas x 4 micro-batches, averaged across replicas by CrossReplicaOptimizer, is
    one pipeline accumulating the mean over the same 8 micro-batches."""
    with tf.Graph().as_default() as graph:
        replicated_losses, replicated, [run] = train(graph, 4, gac=4,
                                                     make_optimizer=make_optimizer)
    with tf.Graph().as_default() as graph:
        single_losses, single, _ = train(graph, 2, gac=8, make_optimizer=make_optimizer,
                                         cross_replica=False)
    assert replicated_losses[0].shape == (8, 2)  # [micro-batches, replicas]
    assert single_losses[0].shape == (16,)
    # Micro-batch i of replica r took element 2i + r: row-major order is element order.
    np.testing.assert_allclose(replicated_losses[0].reshape(-1), single_losses[0],
                               rtol=1e-5, atol=1e-6)
    for name, (replica0, replica1) in replicated.items():
        np.testing.assert_array_equal(replica0, replica1)  # the replicas stayed identical
        np.testing.assert_allclose(replica0, single[name][0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(replicated["w1"][0], W1)  # it did train
    assert (run.replicas, run.num_ipus, run.iterations) == (2, 4, 8)


def plain_accumulated_sgd(updates, micro_batches_per_update, scale):
    """No pipeline, no replicas: per update, the gradients of the next
    ``micro_batches_per_update`` micro-batches summed, times ``scale``, applied by SGD."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [BATCH, FEATURES])
        y = tf.compat.v1.placeholder(tf.float32, [BATCH, 1])
        loss = stage2(*stage1(x, y))
        variables = tf.compat.v1.trainable_variables()
        grads = tf.gradients(loss, variables)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            values = sess.run(variables)
            for update in range(updates):
                total = [np.zeros_like(v) for v in values]
                for m in range(micro_batches_per_update):
                    index = update * micro_batches_per_update + m
                    feed = {x: X[index * BATCH:(index + 1) * BATCH],
                            y: Y[index * BATCH:(index + 1) * BATCH]}
                    feed.update(dict(zip(variables, values)))
                    total = [t + g for t, g in zip(total, sess.run(grads, feed))]
                values = [v - LEARNING_RATE * scale * t for v, t in zip(values, total)]
    return dict(zip(["w1", "w2"], values))


def test_summed_accumulation_is_averaged_over_the_replicas_by_the_optimizer(graph):
    """SUM accumulation per replica, then CrossReplicaOptimizer's mean: each update applies
    the sum over all 8 micro-batches divided by the 2 replicas."""
    _, replicated, _ = train(graph, 4, gac=4, reduction=SUM)
    expected = plain_accumulated_sgd(updates=2, micro_batches_per_update=8, scale=0.5)
    for name in ("w1", "w2"):
        for value in replicated[name]:
            np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-6)


def test_without_cross_replica_optimizer_each_replica_trains_on_its_own_data():
    """The pipeline itself does not all-reduce (the SDK leaves that to
    CrossReplicaOptimizer): replica r ends as a lone pipeline fed only its elements."""
    with tf.Graph().as_default() as graph:
        _, replicated, _ = train(graph, 4, gac=4, cross_replica=False)
    assert not np.allclose(replicated["w1"][0], replicated["w1"][1])
    for replica in range(2):
        with tf.Graph().as_default() as graph:
            own = micro_batches().shard(2, replica)  # elements r, r + 2, r + 4, ...
            _, alone, _ = train(graph, 2, gac=4, dataset=own, cross_replica=False)
        for name in ("w1", "w2"):
            np.testing.assert_allclose(replicated[name][replica], alone[name][0],
                                       rtol=1e-5, atol=1e-6)


def test_keras_layers_made_in_the_stages_start_and_stay_identical_on_every_replica(graph):
    """Layers built inside a stage (the tutorial's style) make their variables once per
    replica build: the replicas must still share the initial values (random here)."""
    configure(4)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(micro_batches())
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def dense_stage(x, y):
        return tf.keras.layers.Dense(HIDDEN, activation=tf.nn.relu)(x), y

    def loss_stage(hidden, y):
        return tf.reduce_mean(tf.square(tf.keras.layers.Dense(1)(hidden) - y))

    def model():
        return pipelining_ops.pipeline(
            [dense_stage, loss_stage], 4, infeed_queue=infeed, outfeed_queue=outfeed,
            outfeed_loss=True, optimizer_function=optimizer_function(momentum, True))

    with ipu.scopes.ipu_scope(IPU):
        run = ipu.ipu_compiler.compile(model, [])
    kernels = [v for v in tf.compat.v1.trainable_variables() if "kernel" in v.op.name]
    assert len(kernels) == 2  # replica 1 made no variables of its own
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        initial = [replication.replica_values(sess, k) for k in kernels]
        sess.run(run)
        trained = [replication.replica_values(sess, k) for k in kernels]
    # Each replica's copy lives on that replica's IPU of the stage: replica 1 has IPUs 2-3.
    assert [replication.replica_variables(k)[1].device[-5:] for k in kernels] == [
        "CPU:2", "CPU:3"]
    for before, after in zip(initial, trained):
        assert len(before) == 2
        np.testing.assert_array_equal(before[0], before[1])
        np.testing.assert_array_equal(after[0], after[1])
        assert not np.allclose(before[0], after[0])


# --- dataflow: infeed order, outfeed shapes, collectives -----------------------------------


def counting_pipeline(graph, mode=None, accumulate_outfeed=False, gac=4, repeat_count=2,
                      stages=2):
    """Inference: element k is a 3-vector of k; the pipeline outputs 2k + 1."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.range(10_000).map(lambda k: tf.fill([3], tf.cast(k, tf.float32))))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)

    def model():
        return pipelining_ops.pipeline(
            [lambda x: 2.0 * x] + [lambda x: 1.0 * x] * (stages - 2) + [lambda x: x + 1.0],
            gac, repeat_count=repeat_count,
            infeed_queue=infeed, outfeed_queue=outfeed,
            accumulate_outfeed=accumulate_outfeed)

    with ipu.scopes.ipu_scope(IPU):
        run = ipu.ipu_compiler.compile(model, [])
    return infeed, run, outfeed.dequeue()


def run_counting(graph, runs=1, **kwargs):
    infeed, run, dequeue = counting_pipeline(graph, **kwargs)
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())  # outfeed accumulators
        sess.run(infeed.initializer)
        results = []
        with record.capture() as captured:
            for _ in range(runs):
                sess.run(run)
                results.append(sess.run(dequeue))
    return results, captured.runs


def test_each_replica_takes_its_own_infeed_elements_and_the_outfeed_gains_the_replica_axis(
        graph):
    configure(4)
    results, runs = run_counting(graph, runs=2)
    for index, result in enumerate(results):
        assert result.shape == (8, 2, 3)  # [gac x repeat_count, replicas, element]
        # Micro-batch i of replica r took element i * 2 + r; each run takes 16 elements.
        taken = 16 * index + np.arange(16, dtype=np.float32).reshape(8, 2)
        np.testing.assert_array_equal(result[..., 0], 2 * taken + 1)
    assert [(r.replicas, r.num_ipus, r.iterations) for r in runs] == [(2, 4, 8), (2, 4, 8)]


def test_last_mode_outfeed_holds_every_replicas_last_value(graph):
    configure(4)
    [last], _ = run_counting(graph, mode=ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    assert last.shape == (2, 3)
    np.testing.assert_array_equal(last[:, 0], 2 * np.array([14.0, 15.0]) + 1)


def test_accumulated_outfeed_sums_each_replicas_pass(graph):
    configure(4)
    [sums], _ = run_counting(graph, accumulate_outfeed=True)
    assert sums.shape == (2, 2, 3)  # [repeat_count, replicas, element]
    taken = np.arange(16, dtype=np.float32).reshape(2, 4, 2)  # [pass, micro-batch, replica]
    np.testing.assert_array_equal(sums[..., 0], (2 * taken + 1).sum(axis=1))


def test_collectives_in_a_stage_reduce_over_the_replicas(graph):
    configure(4)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.range(100).map(lambda k: tf.cast(k, tf.float32)))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def total_stage(x):
        return x, cross_replica_ops.cross_replica_sum(x)

    def model():
        return pipelining_ops.pipeline([lambda x: x * 1.0, total_stage], 2,
                                       infeed_queue=infeed, outfeed_queue=outfeed)

    with ipu.scopes.ipu_scope(IPU):
        run = ipu.ipu_compiler.compile(model, [])
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(infeed.initializer)
        sess.run(run)
        own, total = sess.run(dequeue)
    np.testing.assert_array_equal(own, [[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(total, [[1.0, 1.0], [5.0, 5.0]])


# --- placement and the record -----------------------------------------------------------


@pytest.mark.parametrize("stages, num_ipus, first_ipus", [
    (2, 4, [0, 2]),      # 2 shards: replica 1 starts at IPU 2
    (3, 8, [0, 4]),      # 3 stages round up to 4 shards: replica 1 starts at IPU 4
])
def test_replica_r_runs_its_stage_k_on_ipu_r_times_shards_plus_k(graph, stages, num_ipus,
                                                                  first_ipus):
    configure(num_ipus)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.range(100).map(lambda k: tf.fill([2, 2], tf.cast(k, tf.float32))))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def matmul_stage(x):
        return tf.matmul(x, x, name="stage_matmul")

    def model():
        return pipelining_ops.pipeline([matmul_stage] * stages, 2 * stages,
                                       infeed_queue=infeed, outfeed_queue=outfeed)

    with ipu.scopes.ipu_scope(IPU):
        run = ipu.ipu_compiler.compile(model, [])
    metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(infeed.initializer)
        sess.run(run, options=tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=metadata)
    ran_on = {}  # CPU device -> names of the stage matmuls that ran there
    for stats in metadata.step_stats.dev_stats:
        names = [n.node_name for n in stats.node_stats if "stage_matmul" in n.node_name]
        if names:
            ran_on[int(stats.device.rsplit(":", 1)[1])] = names
    expected = {first + k for first in first_ipus for k in range(stages)}
    assert set(ran_on) == expected
    for device, names in ran_on.items():
        assert all(("replica1/" in name) == (device >= first_ipus[1]) for name in names)


def test_a_replica_is_recorded_at_one_replicas_cost():
    """Each stage's measured cost is one replica's (the copies run alongside)."""
    stages = {}
    for num_ipus in (2, 4):
        with tf.Graph().as_default() as graph:
            _, _, [run] = train(graph, num_ipus, gac=4)
        stages[num_ipus] = run
    single, double = stages[2], stages[4]
    assert (single.replicas, double.replicas) == (1, 2)
    for one, two in zip(single.stages, double.stages):
        assert two.forward_flops == one.forward_flops
        assert two.backward_flops == one.backward_flops
        assert two.parameter_bytes == one.parameter_bytes
    # CrossReplicaOptimizer's all-reduce: one replica's gradients, w1 and w2 in float32.
    assert double.all_reduce_bytes == (W1.size + W2.size) * 4
    assert single.all_reduce_bytes == 0
    # The run's trace: both replicas' IPUs, an all-reduce on each before each of the 2
    # weight updates.
    trace = record.ProgramRecord(runs=[double]).simulate()
    assert trace.ipu_lanes == ["IPU0", "IPU1", "IPU2", "IPU3"]
    assert len([e for e in trace.events if "AllReduce" in e.name]) == 4 * 2
    single_trace = record.ProgramRecord(runs=[single]).simulate()
    assert not any("AllReduce" in e.name for e in single_trace.events)


def test_stages_that_fill_the_device_run_one_replica(graph):
    """3 stages on 4 IPUs need all 4 (rounded up): no copies are built."""
    configure(4)
    results, [run] = run_counting(graph, gac=6, repeat_count=1, stages=3)
    assert results[0].shape == (6, 3)
    np.testing.assert_array_equal(results[0][:, 0], 2 * np.arange(6) + 1)
    assert (run.replicas, run.num_ipus) == (1, 4)
    assert not any("replica1" in op.name for op in graph.get_operations())


def test_pipeline_built_before_configuring_takes_its_replicas_from_the_feeds(graph):
    """Contrib-era scripts: the feeds' replication_factor says how many replicas."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.range(100).map(lambda k: tf.fill([3], tf.cast(k, tf.float32))),
        feed_name="infeed", replication_factor=2)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(feed_name="outfeed",
                                                    replication_factor=2)

    def model():
        return pipelining_ops.pipeline([lambda x: 2.0 * x, lambda x: x + 1.0], 4,
                                       infeed_queue=infeed, outfeed_queue=outfeed)

    with ipu.scopes.ipu_scope(IPU):
        run = ipu.ipu_compiler.compile(model, [])
    dequeue = outfeed.dequeue()
    cfg = utils.auto_select_ipus(utils.create_ipu_config(), 4)
    utils.configure_ipu_system(cfg)
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(infeed.initializer)
        with record.capture() as captured:
            sess.run(run)
        result = sess.run(dequeue)
    assert result.shape == (4, 2, 3)
    np.testing.assert_array_equal(result[..., 0],
                                  2 * np.arange(8, dtype=np.float32).reshape(4, 2) + 1)
    assert (captured.runs[0].replicas, captured.runs[0].num_ipus) == (2, 4)
