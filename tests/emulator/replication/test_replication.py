"""Replication: a 1-shard program on a device of N IPUs runs as N real copies.

Each replica takes its own infeed elements, has its own variables, and its outfeed values
gain a replica axis; CrossReplicaOptimizer keeps the copies' weights identical.
"""
import numpy as np
import pytest
from tests.support.ipu_systems import configure_ipus as configure
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.runtime import configured_system
from ipu_emulator.ipu import (config, ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue,
                              loops, optimizers, scopes, utils)
from ipu_emulator.ipu.ops import cross_replica_ops
from ipu_emulator.runtime import replication, shards

IPU = "/device:IPU:0"






def compile_on_ipu(computation, inputs=None):
    with scopes.ipu_scope(IPU):
        return ipu_compiler.compile(computation, inputs=inputs)


def counting_dataset(width=3):
    """Element i is a vector filled with i: the values say which element a replica got."""
    return tf.data.Dataset.range(10_000).map(lambda i: tf.fill([width], tf.cast(i, tf.float32)))


def sum_and_difference_program(iterations=10, mode=None):
    """The user guide's feed example: pairs in, {'d1': x1 + x2, 'd2': x1 - x2} out."""
    data = counting_dataset().map(lambda x: (x, 2.0 * x))
    infeed = ipu_infeed_queue.IPUInfeedQueue(data)
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)

    def body(x1, x2):
        return outfeed.enqueue({"d1": x1 + x2, "d2": x1 - x2})

    run = compile_on_ipu(lambda: loops.repeat(iterations, body, [], infeed))
    return infeed, run, outfeed.dequeue()


@pytest.mark.parametrize("num_ipus", [1, 2, 4])
def test_dict_outfeed_gains_a_replica_axis_only_when_replicated(graph, num_ipus):
    configure(num_ipus)
    infeed, run, dequeue = sum_and_difference_program()
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(run)
        result = sess.run(dequeue)
    expected = (10, 3) if num_ipus == 1 else (10, num_ipus, 3)
    assert {k: v.shape for k, v in result.items()} == {"d1": expected, "d2": expected}
    # Iteration i of replica r took element i * R + r: x1 = that index, x2 = twice it.
    index = np.arange(10 * num_ipus, dtype=np.float32).reshape(expected[:-1])
    np.testing.assert_array_equal(result["d1"][..., 0], 3 * index)
    np.testing.assert_array_equal(result["d2"][..., 0], -index)


def test_last_mode_outfeed_has_the_replica_axis_first(graph):
    configure(2)
    infeed, run, dequeue = sum_and_difference_program(
        iterations=5, mode=ipu_outfeed_queue.IPUOutfeedMode.LAST)
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(run)
        last = sess.run(dequeue)
    assert last["d1"].shape == (2, 3)
    np.testing.assert_array_equal(last["d1"][:, 0], [3 * 8.0, 3 * 9.0])  # elements 8 and 9


def test_replicated_loop_consumes_one_element_per_replica_per_iteration(graph):
    configure(4)
    infeed = ipu_infeed_queue.IPUInfeedQueue(counting_dataset())

    def body(total, x):
        return total + x[0]

    [total] = compile_on_ipu(lambda: loops.repeat(3, body, [0.0], infeed))
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        first = sess.run(total)
        second = sess.run(total)
    # The returned value is replica 0's: elements 0, 4, 8 then 12, 16, 20.
    assert first == 0 + 4 + 8
    assert second == 12 + 16 + 20


class Regression:
    """A linear model trained with plain SGD; the data make each replica's batch differ."""

    features, batch, learning_rate = 3, 4, 0.05

    def __init__(self):
        rng = np.random.RandomState(7)
        self.x = rng.randn(64, self.features).astype(np.float32)
        self.y = (self.x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)

    def dataset(self, batch):
        return tf.data.Dataset.from_tensor_slices((self.x, self.y)).batch(
            batch, drop_remainder=True)

    def loss(self, x, y):
        w = tf.compat.v1.get_variable("w", [self.features, 1], use_resource=True,
                                      initializer=tf.compat.v1.constant_initializer(0.1))
        b = tf.compat.v1.get_variable("b", [1], use_resource=True,
                                      initializer=tf.compat.v1.zeros_initializer())
        return tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))

    def train(self, num_ipus, batch, iterations, wrap=None, accumulate=None):
        """Train on the device loop; returns (replica values of w, outfeed losses, runs)."""
        configured_system.reset()
        graph = tf.Graph()
        with graph.as_default():
            configure(num_ipus)
            infeed = ipu_infeed_queue.IPUInfeedQueue(self.dataset(batch))
            outfeed = ipu_outfeed_queue.IPUOutfeedQueue()

            def body(x, y):
                loss = self.loss(x, y)
                opt = tf.compat.v1.train.GradientDescentOptimizer(self.learning_rate)
                if wrap is not None:
                    opt = wrap(opt)
                return outfeed.enqueue(loss), opt.minimize(loss)

            run = compile_on_ipu(lambda: loops.repeat(iterations, body, [], infeed))
            losses = outfeed.dequeue()
            [w] = [v for v in tf.compat.v1.global_variables() if v.op.name == "w"]
            with tf.compat.v1.Session() as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                sess.run(infeed.initializer)
                with record.capture() as runs:
                    sess.run(run)
                return replication.replica_values(sess, w), sess.run(losses), runs.runs


def test_cross_replica_optimizer_keeps_replica_weights_identical():
    model = Regression()
    weights, losses, _ = model.train(4, batch=4, iterations=4,
                                     wrap=optimizers.CrossReplicaOptimizer)
    assert len(weights) == 4
    for replica_weights in weights[1:]:
        np.testing.assert_array_equal(replica_weights, weights[0])
    assert losses.shape == (4, 4)
    assert len(set(losses[0].tolist())) == 4  # each replica saw its own batch


def test_without_cross_replica_optimizer_the_replicas_drift_apart():
    weights, _, _ = Regression().train(2, batch=4, iterations=4)
    assert not np.allclose(weights[0], weights[1])


def test_replicated_sgd_equals_one_device_training_on_the_combined_batch():
    model = Regression()
    replicated, _, _ = model.train(2, batch=4, iterations=3,
                                   wrap=optimizers.CrossReplicaOptimizer)
    single, _, _ = model.train(1, batch=8, iterations=3)
    np.testing.assert_allclose(replicated[0], single[0], rtol=1e-5, atol=1e-6)


def test_effective_batch_is_replicas_times_batch_times_accumulation():
    model = Regression()
    replicas, batch, count = 2, 4, 3

    def wrap(opt):
        return optimizers.GradientAccumulationOptimizerV2(
            optimizers.CrossReplicaOptimizer(opt), count, reduction_method="mean")

    accumulated, _, runs = model.train(replicas, batch=batch, iterations=2 * count, wrap=wrap)
    # Two weight updates, each over replicas x batch x count = 24 samples.
    plain, _, _ = model.train(1, batch=replicas * batch * count, iterations=2)
    np.testing.assert_allclose(accumulated[0], plain[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(accumulated[0], accumulated[1])
    assert runs[0].replicas == replicas and runs[0].gradient_accumulation_count == count


def test_runs_record_device_size_replicas_and_all_reduced_bytes():
    _, _, runs = Regression().train(4, batch=4, iterations=2,
                                    wrap=optimizers.CrossReplicaOptimizer)
    [run] = runs
    assert (run.num_ipus, run.replicas, run.iterations) == (4, 4, 2)
    assert run.all_reduce_bytes == (3 + 1) * 4  # the gradients of w (3 floats) and b (1)
    _, _, [plain] = Regression().train(1, batch=4, iterations=2)
    assert (plain.num_ipus, plain.replicas, plain.all_reduce_bytes) == (1, 1, 0)
    # The per-replica cost is one replica's work, whatever the replica count.
    assert run.step_cost.forward_flops == plain.step_cost.forward_flops


def test_keras_model_and_adam_slots_are_replicated(graph):
    configure(2)
    data = tf.data.Dataset.from_tensor_slices(
        (np.random.RandomState(1).randn(32, 5).astype(np.float32),
         np.ones((32, 1), np.float32))).batch(4, drop_remainder=True)
    infeed = ipu_infeed_queue.IPUInfeedQueue(data)
    model = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="relu"),
                                 tf.keras.layers.Dense(1)])

    def body(x, y):
        loss = tf.reduce_mean(tf.square(model(x) - y))
        opt = optimizers.CrossReplicaOptimizer(tf.compat.v1.train.AdamOptimizer(0.01))
        return opt.minimize(loss)

    run = compile_on_ipu(lambda: loops.repeat(4, body, [], infeed))
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        before = replication.replica_values(sess, model.layers[0].kernel)
        sess.run(run)
        after = replication.replica_values(sess, model.layers[0].kernel)
    np.testing.assert_array_equal(before[0], before[1])  # one initial value for all replicas
    np.testing.assert_array_equal(after[0], after[1])
    assert not np.array_equal(before[0], after[0])


def test_program_without_a_loop_is_replicated_whole_with_inputs_broadcast(graph):
    configure(2)
    x = tf.compat.v1.placeholder(tf.float32, [2])
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue()

    def step(value):
        counter = tf.compat.v1.get_variable("counter", [], use_resource=True,
                                            initializer=tf.compat.v1.zeros_initializer())
        update = counter.assign_add(1.0)
        total = cross_replica_ops.cross_replica_sum(value)
        with tf.control_dependencies([update]):
            return total * 1.0, outfeed.enqueue(value)

    [total] = compile_on_ipu(step, [x])
    dequeue = outfeed.dequeue()
    [counter] = tf.compat.v1.global_variables()
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        result = sess.run(total, {x: [1.0, 2.0]})
        np.testing.assert_array_equal(result, [2.0, 4.0])  # per-replica shape, summed
        assert sess.run(dequeue).shape == (1, 2, 2)
        assert replication.replica_values(sess, counter) == [1.0, 1.0]  # both replicas ran


def test_old_configuration_api_replicates_too(graph):
    cfg = utils.create_ipu_config()
    cfg = utils.auto_select_ipus(cfg, 2)
    utils.configure_ipu_system(cfg)
    infeed, run, dequeue = sum_and_difference_program(iterations=3)
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(run)
        assert sess.run(dequeue)["d1"].shape == (3, 2, 3)


def test_ipu_model_accepts_a_count_that_is_not_a_power_of_two(graph, monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")
    configure(3)
    infeed, run, dequeue = sum_and_difference_program(iterations=2)
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(run)
        assert sess.run(dequeue)["d1"].shape == (2, 3, 3)


def test_hardware_refuses_three_ipus_with_the_sdk_message():
    cfg = config.IPUConfig()
    cfg.auto_select_ipus = 3
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match="could not find an IPU device with 3 IPUs"):
        cfg.configure_ipu_system()


def test_program_built_for_another_device_is_built_again_at_its_first_run(graph):
    configure(2)
    infeed, run, dequeue = sum_and_difference_program(iterations=2)  # 2 replicas
    configure(1)
    initialize_feed = infeed.initializer  # an infeed gives its initializer only once
    with tf.compat.v1.Session() as sess:
        sess.run(initialize_feed)
        sess.run(run)
        assert sess.run(dequeue)["d1"].shape == (2, 3)  # one replica: no replica axis
    configure(4)
    with tf.compat.v1.Session() as sess:
        sess.run(initialize_feed)
        sess.run(run)
        assert sess.run(dequeue)["d1"].shape == (2, 4, 3)


def test_replication_rule():
    assert [shards.num_shards_for(i) for i in (None, 0, 1, 2, 4)] == [1, 1, 2, 4, 8]
    assert replication.replication_factor(8, 2) == 4
    assert replication.replication_factor(4, 4) == 1
    assert replication.shard_mismatch_message(2, 4) == (
        "Trying to compile a graph for an IPU device with 2 IPUs and 4 shards. The number "
        "of shards needs to divide the number of IPUs.")
    assert replication.shard_mismatch_message(8, 4) is None


def test_trace_shows_replicas_in_parallel_and_the_all_reduce_before_each_update():
    _, _, runs = Regression().train(4, batch=4, iterations=3,
                                    wrap=optimizers.CrossReplicaOptimizer)
    timeline = record.ProgramRecord(runs=runs).simulate(target="ipu2", batch_size=4)
    assert timeline.ipu_lanes == ["IPU0", "IPU1", "IPU2", "IPU3"]
    for kind in ("forward", "backward", "weight_update"):
        starts = {lane: [e.start for e in timeline.events_on(lane) if e.kind == kind]
                  for lane in timeline.ipu_lanes}
        assert len(starts["IPU0"]) == 3 and all(s == starts["IPU0"] for s in starts.values())
    for lane in timeline.ipu_lanes:
        events = [e for e in timeline.events_on(lane) if e.kind in ("exchange", "weight_update")]
        assert [e.kind for e in events] == ["exchange", "weight_update"] * 3
        assert all(a.end <= b.start for a, b in zip(events, events[1:]))
        assert events[0].name == "AllReduce gradients (IPU-Links)"
    assert timeline.metrics.samples == 4 * 3 * 4  # batch x iterations x replicas


def test_trace_of_accumulation_updates_once_per_accumulation_count():
    def wrap(opt):
        return optimizers.CrossReplicaGradientAccumulationOptimizerV2(opt, 3)

    _, _, runs = Regression().train(2, batch=4, iterations=6, wrap=wrap)
    timeline = record.ProgramRecord(runs=runs).simulate()
    kinds = [e.kind for e in timeline.events_on("IPU1")
             if e.kind in ("forward", "exchange", "weight_update")]
    assert kinds == ["forward"] * 3 + ["exchange", "weight_update"] + \
        ["forward"] * 3 + ["exchange", "weight_update"]


@pytest.mark.parametrize("with_loop", [True, False], ids=["loop", "no-loop"])
def test_keras_layers_made_inside_the_program_start_identical_on_every_replica(
        graph, with_loop):
    # A Keras layer built inside the computation is made again for each replica; each
    # replica must get its own copy of replica 0's weights, not fresh random ones.
    configure(2)
    infeed = ipu_infeed_queue.IPUInfeedQueue(counting_dataset(4).map(lambda x: (x, x[:1])))

    def step(x, y):
        prediction = tf.keras.layers.Dense(1)(x[None, :])
        loss = tf.reduce_mean(tf.square(prediction - y))
        sgd = tf.compat.v1.train.GradientDescentOptimizer(1e-3)
        return optimizers.CrossReplicaOptimizer(sgd).minimize(loss)

    if with_loop:
        run = compile_on_ipu(lambda: loops.repeat(3, step, [], infeed))
    else:
        x = tf.fill([4], 1.0)
        run = compile_on_ipu(lambda: step(x, x[:1]))
    [kernel] = [v for v in tf.compat.v1.global_variables() if "kernel" in v.op.name]
    with tf.compat.v1.Session() as sess:
        sess.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
        initial = replication.replica_values(sess, kernel)
        sess.run(run)
        trained = replication.replica_values(sess, kernel)
    assert len(initial) == 2
    np.testing.assert_array_equal(initial[0], initial[1])
    np.testing.assert_array_equal(trained[0], trained[1])
    assert not np.array_equal(initial[0], trained[0])
