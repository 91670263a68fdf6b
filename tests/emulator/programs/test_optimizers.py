"""``ipu.optimizers``: gradient accumulation and cross-replica optimizer wrappers."""
import importlib

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator.cli import import_aliases
from ipu_emulator.ipu import (gradient_accumulation, ipu_compiler, ipu_infeed_queue,
                              ipu_outfeed_queue, loops, optimizers, scopes)
from ipu_emulator.ipu.optimizers import gradient_accumulation_optimizer as accumulation

SGD = tf.compat.v1.train.GradientDescentOptimizer
DATA = np.arange(1.0, 13.0, dtype=np.float32).reshape(12, 1)  # one scalar "gradient" per step


def loss_of(x):
    """loss = w * x, so d loss / d w = x: each step's gradient is its data value."""
    w = tf.compat.v1.get_variable("w", [], use_resource=True,
                                  initializer=tf.compat.v1.constant_initializer(0.0))
    return w * tf.reduce_sum(x), w


def train(make_optimizer, iterations, data=DATA, repeat=True):
    """Run the loop once; returns the value of w after every iteration (from the outfeed)."""
    infeed = ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        loss, w = loss_of(x)
        train_op = make_optimizer().minimize(loss)
        with tf.control_dependencies([train_op]):
            return outfeed.enqueue(w.read_value())

    with scopes.ipu_scope("/device:IPU:0"):
        run = ipu_compiler.compile(lambda: loops.repeat(iterations, body, [], infeed))
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        sess.run(run)
        return sess.run(dequeue)


def test_accumulation_applies_the_summed_gradient_every_n_mini_batches(graph):
    weights = train(lambda: optimizers.GradientAccumulationOptimizerV2(SGD(1.0), 3), 6)
    # Updates after steps 3 and 6 by -(1+2+3) and -(4+5+6); unchanged in between.
    np.testing.assert_array_equal(weights, [0, 0, -6, -6, -6, -21])


@pytest.mark.parametrize("method", ["mean", "running_mean",
                                    gradient_accumulation.GradientAccumulationReductionMethod.MEAN])
def test_mean_reductions_apply_the_mean_gradient(graph, method):
    weights = train(lambda: optimizers.GradientAccumulationOptimizerV2(
        SGD(1.0), 4, reduction_method=method), 8)
    np.testing.assert_allclose(weights, [0, 0, 0, -2.5, -2.5, -2.5, -2.5, -9.0], rtol=1e-6)


def test_cross_replica_wrappers_change_nothing_with_one_replica():
    with tf.Graph().as_default():
        plain = train(lambda: SGD(0.5), 4)
    with tf.Graph().as_default():
        wrapped = train(lambda: optimizers.CrossReplicaOptimizer(SGD(0.5)), 4)
    np.testing.assert_array_equal(plain, wrapped)


def test_cross_replica_accumulation_with_one_replica_equals_accumulation(graph):
    weights = train(lambda: optimizers.CrossReplicaGradientAccumulationOptimizerV2(SGD(1.0), 2), 4)
    np.testing.assert_array_equal(weights, [0, -3, -3, -10])


def test_non_positive_mini_batch_count_is_refused():
    with pytest.raises(ValueError, match="^num_mini_batches must be a positive number.$"):
        optimizers.GradientAccumulationOptimizerV2(SGD(0.1), 0)


def test_unknown_reduction_method_is_refused():
    with pytest.raises(ValueError) as error:
        optimizers.GradientAccumulationOptimizerV2(SGD(0.1), 2, reduction_method="median")
    assert str(error.value) == ("Cannot parse median as one of GradientAccumulationReductionMethod. "
                                "Valid values are: SUM, MEAN, RUNNING_MEAN.")


def test_loop_count_not_a_multiple_is_refused_at_first_run(graph):
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        train(lambda: optimizers.GradientAccumulationOptimizerV2(SGD(0.1), 4), 10)
    assert error.value.message == (
        "Detected a gradient accumulation operation with 4 number of mini batches inside a "
        "loop with 10 iterations.\nIt is required that the number of mini batches to "
        "accumulate evenly divides the number of loop iterations.\nThis check can be "
        "disabled with `XLA_FLAGS=\"--xla_disable_hlo_passes=gradient-accumulation-verifier\"`"
        ", however the compiler cannot guarantee correctness of results.")


def test_accumulation_outside_a_loop_is_refused_at_first_run(graph):
    x = tf.compat.v1.placeholder(tf.float32, [1])

    def step(value):
        loss, _ = loss_of(value)
        return optimizers.GradientAccumulationOptimizerV2(SGD(0.1), 2).minimize(loss)

    with scopes.ipu_scope("/device:IPU:0"):
        run = ipu_compiler.compile(step, [x])
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with pytest.raises(tf.errors.FailedPreconditionError) as error:
            sess.run(run, {x: [1.0]})
    assert error.value.message == accumulation.NOT_IN_LOOP_MESSAGE
    assert error.value.message.startswith(
        "Detected a gradient accumulation operation which is not inside a training loop.")


def test_legacy_optimizer_can_skip_the_check(graph):
    weights = train(lambda: optimizers.GradientAccumulationOptimizer(
        SGD(1.0), 4, verify_usage=False), 6)
    np.testing.assert_array_equal(weights, [0, 0, 0, -10, -10, -10])


def test_wrappers_delegate_slots_to_the_wrapped_optimizer(graph):
    inner = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9)
    wrapped = optimizers.CrossReplicaOptimizer(inner)
    loss, w = loss_of(tf.constant([1.0]))
    wrapped.minimize(loss)
    assert wrapped.get_slot_names() == ["momentum"]
    assert wrapped.get_slot(w, "momentum") is inner.get_slot(w, "momentum")


def test_contrib_era_names_resolve():
    import_aliases.install()
    try:
        contrib = importlib.import_module("tensorflow.contrib.ipu")
        assert contrib.CrossReplicaOptimizer is optimizers.CrossReplicaOptimizer
        old = importlib.import_module("tensorflow.contrib.ipu.ipu_optimizer")
        assert old.CrossReplicaOptimizer is optimizers.CrossReplicaOptimizer
        old = importlib.import_module("tensorflow.contrib.ipu.gradient_accumulation_optimizer")
        assert old.GradientAccumulationOptimizer is optimizers.GradientAccumulationOptimizer
        modern = importlib.import_module("tensorflow.python.ipu.optimizers")
        assert modern.GradientAccumulationOptimizerV2 is optimizers.GradientAccumulationOptimizerV2
    finally:
        import_aliases.uninstall()


def test_accumulator_dtype_accepts_a_numpy_type_like_the_pipeline():
    import numpy as np
    from ipu_emulator.runtime.gradient_accumulators import accumulator_dtype
    with tf.Graph().as_default():
        var = tf.compat.v1.Variable(tf.zeros([2]), use_resource=True)
        assert accumulator_dtype(None, var) == tf.float32
        assert accumulator_dtype(np.float16, var) == tf.float16
        assert accumulator_dtype(tf.float16, var) == tf.float16
        assert accumulator_dtype(lambda v: tf.float16, var) == tf.float16
