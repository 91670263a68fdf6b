"""``ipu.cross_replica_ops``: sums and means across the replicas of a replicated program."""
import importlib

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.cli import import_aliases
from ipu_emulator.ipu import config, ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, loops, scopes
from ipu_emulator.ipu.ops import cross_replica_ops




def per_replica_results(num_ipus, reduce, iterations=1):
    """Replica r of iteration i feeds the value i * R + r to ``reduce``; returns the
    outfeed ``[iterations, R]`` (or ``[iterations]`` with one replica)."""
    cfg = config.IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.configure_ipu_system()
    infeed = ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.range(100).map(lambda i: tf.cast(i, tf.float32)))
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed.enqueue(reduce(x))

    with scopes.ipu_scope("/device:IPU:0"):
        run = ipu_compiler.compile(lambda: loops.repeat(iterations, body, [], infeed))
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(run)
        return sess.run(dequeue)


def test_sum_and_mean_over_all_replicas(graph):
    sums = per_replica_results(4, cross_replica_ops.cross_replica_sum, iterations=2)
    np.testing.assert_array_equal(sums, [[6.0] * 4, [22.0] * 4])  # 0+1+2+3, 4+5+6+7


def test_mean_over_all_replicas(graph):
    means = per_replica_results(4, cross_replica_ops.cross_replica_mean)
    np.testing.assert_array_equal(means, [[1.5] * 4])


def test_replica_groups_reduce_consecutive_replicas(graph):
    sums = per_replica_results(
        4, lambda x: cross_replica_ops.cross_replica_sum(x, replica_group_size=2))
    np.testing.assert_array_equal(sums, [[1.0, 1.0, 5.0, 5.0]])


def test_group_size_that_does_not_divide_the_replicas_is_refused_at_first_run(graph):
    with pytest.raises(tf.errors.FailedPreconditionError, match="group size 3 does not divide"):
        per_replica_results(
            4, lambda x: cross_replica_ops.cross_replica_sum(x, replica_group_size=3))


def test_one_replica_returns_the_input(graph):
    values = per_replica_results(1, cross_replica_ops.cross_replica_mean, iterations=3)
    np.testing.assert_array_equal(values, [0.0, 1.0, 2.0])


def test_gradient_of_a_cross_replica_sum_is_the_sum_of_the_replicas_gradients(graph):
    # y_r = sum_j(x_j) and loss_r = c_r * y_r, so d loss_r / d x_r = sum_j c_j.
    def grad_through_sum(x):
        coefficient = x + 1.0
        y = cross_replica_ops.cross_replica_sum(x)
        [grad] = tf.gradients(tf.stop_gradient(coefficient) * y, [x])
        return grad

    grads = per_replica_results(2, grad_through_sum)
    np.testing.assert_array_equal(grads, [[3.0, 3.0]])  # (0 + 1) + (1 + 1)


def test_assume_equal_across_replicas_is_an_identity(graph):
    x = tf.constant([1.0, 2.0])
    same = cross_replica_ops.assume_equal_across_replicas({"a": x})
    assert same["a"] is not x
    assert cross_replica_ops.assume_equal_across_replicas(x, inplace=True) is x
    with tf.compat.v1.Session() as sess:
        np.testing.assert_array_equal(sess.run(same["a"]), [1.0, 2.0])


def test_module_paths_resolve_as_in_the_sdk():
    assert ipu.cross_replica_ops is cross_replica_ops
    assert ipu.ops.cross_replica_ops is cross_replica_ops
    import_aliases.install()
    try:
        modern = importlib.import_module("tensorflow.python.ipu.ops.cross_replica_ops")
        assert modern.cross_replica_sum is cross_replica_ops.cross_replica_sum
        contrib = importlib.import_module("tensorflow.contrib.ipu.popops_cross_replica_sum")
        assert contrib.cross_replica_sum is cross_replica_ops.cross_replica_sum
        from tensorflow.python.ipu import cross_replica_ops as attribute  # pylint: disable=import-error
        assert attribute is cross_replica_ops
    finally:
        import_aliases.uninstall()
