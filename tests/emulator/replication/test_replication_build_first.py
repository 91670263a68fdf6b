"""Replicated programs built before the IPU system is configured (contrib-era scripts).

The feeds' ``replication_factor`` decides how many replicas such a program gets; the device
configured afterwards must give the same factor (its IPUs over the program's shards), else
the first run fails with the SDK's mismatch error.
"""
import re

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.runtime import configured_system
from ipu_emulator.ipu import (ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, loops,
                              optimizers, scopes, utils)
from ipu_emulator.runtime import replication
from tests.support.child_python import ROOT, run_emulator

IPU = "/device:IPU:0"




def configure_old_style(num_ipus):
    cfg = utils.create_ipu_config()
    cfg = utils.auto_select_ipus(cfg, num_ipus)
    utils.configure_ipu_system(cfg)


def counting_pairs():
    """Element k is (k, 2k) as 3-vectors: outputs say which element a replica took."""
    vectors = tf.data.Dataset.range(10_000).map(lambda k: tf.fill([3], tf.cast(k, tf.float32)))
    return vectors.map(lambda v: (v, 2.0 * v))


def build_sum_program(infeed_factor, outfeed_factor, iterations=5):
    infeed = ipu_infeed_queue.IPUInfeedQueue(counting_pairs(), feed_name="in",
                                             replication_factor=infeed_factor)
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue(feed_name="out",
                                                replication_factor=outfeed_factor)

    def body(x1, x2):
        return outfeed.enqueue({"d1": x1 + x2, "d2": x1 - x2})

    with scopes.ipu_scope(IPU):
        run = ipu_compiler.compile(lambda: loops.repeat(iterations, body, [], infeed), [])
    return infeed, run, outfeed.dequeue()


def run_once(infeed, run, dequeue):
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        with record.capture() as captured:
            sess.run(run)
        return sess.run(dequeue), captured.runs


def test_feeds_declare_the_replicas_of_a_program_built_before_configuring(graph):
    infeed, run, dequeue = build_sum_program(2, 2)
    configure_old_style(2)
    result, [engine_run] = run_once(infeed, run, dequeue)
    assert result["d1"].shape == (5, 2, 3)
    # Two real replicas: iteration i of replica r took element 2i + r.
    taken = np.arange(10, dtype=np.float32).reshape(5, 2)
    np.testing.assert_array_equal(result["d1"][..., 0], 3 * taken)
    np.testing.assert_array_equal(result["d2"][..., 0], -taken)
    assert (engine_run.num_ipus, engine_run.replicas) == (2, 2)


def test_without_a_declared_factor_a_one_ipu_configuration_runs_as_before(graph):
    infeed, run, dequeue = build_sum_program(1, 1)
    configure_old_style(1)
    result, [engine_run] = run_once(infeed, run, dequeue)
    assert result["d1"].shape == (5, 3)
    np.testing.assert_array_equal(result["d1"][:, 0], 3 * np.arange(5, dtype=np.float32))
    assert (engine_run.num_ipus, engine_run.replicas) == (1, 1)


def sdk_message(feed, program_factor, feed_factor):
    template = (replication.INFEED_REPLICATION_MISMATCH if feed == "infeed"
                else replication.OUTFEED_REPLICATION_MISMATCH)
    return template.format(program=program_factor, feed=feed_factor)


@pytest.mark.parametrize("declared, configured, feed, expected", [
    ((2, 2), 4, "infeed", "Current program has been created with replication_factor 4, "
     "however the IPUInfeedQueue has been configured with replication_factor 2. Either "
     "reduce the number of IPUs in your TensorFlow device, or set the `replication_factor` "
     "to  4 when creating IPUInfeedQueue."),
    ((2, 2), 1, "infeed", None),
    ((2, 1), 2, "outfeed", "Current program has been created with replication_factor 2, "
     "however the IPUOutfeedQueue has been configured with replication_factor 1. Either "
     "reduce the number of IPUs in your TensorFlow device, or set the `replication_factor` "
     "to 2 when creating IPUOutfeedQueue."),
])
def test_a_device_giving_another_factor_is_refused_with_the_sdk_error(
        graph, declared, configured, feed, expected):
    infeed, run, _ = build_sum_program(*declared)
    configure_old_style(configured)
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        with pytest.raises(tf.errors.FailedPreconditionError) as error:
            sess.run(run)
    wrong = declared[0] if feed == "infeed" else declared[1]
    assert error.value.message == sdk_message(feed, configured, wrong)
    if expected is not None:
        assert error.value.message == expected


def test_a_declared_factor_without_any_configuration_is_refused(graph):
    infeed, run, _ = build_sum_program(2, 2)  # the implicit default device has 1 IPU
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match="created with replication_factor 1, however the "
                                 "IPUInfeedQueue has been configured with replication_factor 2"):
            sess.run(run)


def test_undeclared_feeds_let_the_device_decide_the_replicas_at_the_first_run(graph):
    # SDK 2.1 and later ignore the feeds' factor: the program compiled at its first run
    # takes the device's IPUs over its shards, whenever the system was configured.
    infeed, run, dequeue = build_sum_program(1, 1)
    configure_old_style(2)
    result, [engine_run] = run_once(infeed, run, dequeue)
    assert result["d1"].shape == (5, 2, 3)
    taken = np.arange(10, dtype=np.float32).reshape(5, 2)
    np.testing.assert_array_equal(result["d1"][..., 0], 3 * taken)
    assert (engine_run.num_ipus, engine_run.replicas) == (2, 2)


@pytest.mark.parametrize("configure_first", [False, True])
def test_a_program_without_feeds_takes_the_factor_the_graph_declared(graph, configure_first):
    if configure_first:
        configure_old_style(2)
    ipu_outfeed_queue.IPUOutfeedQueue(feed_name="unused", replication_factor=2)
    counter = tf.compat.v1.get_variable("counter", [], use_resource=True,
                                        initializer=tf.compat.v1.zeros_initializer())
    with scopes.ipu_scope(IPU):
        # assign_add returns a variable standing for the new value, not a tensor.
        [value] = ipu_compiler.compile(lambda: [counter.assign_add(1.0)], [])
    if not configure_first:
        configure_old_style(2)
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        assert sess.run(value) == 1.0
        assert replication.replica_values(sess, counter) == [1.0, 1.0]  # both replicas ran


class CrossReplicaRegression:
    """Linear regression trained with CrossReplicaOptimizer, built in either order."""

    def __init__(self):
        rng = np.random.RandomState(3)
        self.x = rng.randn(48, 3).astype(np.float32)
        self.y = (self.x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)

    def train(self, configure_first, replicas=2, iterations=4):
        configured_system.reset()
        with tf.Graph().as_default():
            if configure_first:
                configure_old_style(replicas)
            data = tf.data.Dataset.from_tensor_slices((self.x, self.y)).batch(
                4, drop_remainder=True)
            infeed = ipu_infeed_queue.IPUInfeedQueue(data, feed_name="xy",
                                                     replication_factor=replicas)

            def body(x, y):
                w = tf.compat.v1.get_variable("w", [3, 1], use_resource=True,
                                              initializer=tf.compat.v1.zeros_initializer())
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
                sgd = tf.compat.v1.train.GradientDescentOptimizer(0.1)
                return optimizers.CrossReplicaOptimizer(sgd).minimize(loss)

            with scopes.ipu_scope(IPU):
                run = ipu_compiler.compile(lambda: loops.repeat(iterations, body, [], infeed))
            if not configure_first:
                configure_old_style(replicas)
            [w] = tf.compat.v1.global_variables()
            with tf.compat.v1.Session() as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                sess.run(infeed.initializer)
                sess.run(run)
                return replication.replica_values(sess, w)


def test_training_built_first_matches_training_configured_first():
    model = CrossReplicaRegression()
    built_first = model.train(configure_first=False)
    configured_first = model.train(configure_first=True)
    assert len(built_first) == 2
    np.testing.assert_array_equal(built_first[0], built_first[1])
    np.testing.assert_allclose(built_first[0], configured_first[0], rtol=1e-6)
    assert not np.allclose(built_first[0], 0.0)


def run_example(tmp_path, *args):
    return run_emulator("run", "--tf1", ROOT / "examples" / "tf1_configure_after_build.py",
                        *args, cwd=tmp_path)


def test_user_guide_layout_runs_unmodified_with_two_replicas(tmp_path):
    result = run_example(tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "total shape (10, 2, 4)" in result.stdout
    taken = {int(r): [int(k) for k in ks.split(", ")] for r, ks in
             re.findall(r"replica (\d) took elements \[([0-9, ]+)\]", result.stdout)}
    assert taken == {0: list(range(0, 20, 2)), 1: list(range(1, 20, 2))}
    assert "ipu_emulator: 1 engine runs, 10 loop iterations" in result.stderr


def test_user_guide_layout_on_a_device_of_another_size_fails_with_the_sdk_error(tmp_path):
    result = run_example(tmp_path, "--ipus", "4")
    assert result.returncode != 0
    assert "FailedPreconditionError: " + sdk_message("infeed", 4, 2) in result.stderr
