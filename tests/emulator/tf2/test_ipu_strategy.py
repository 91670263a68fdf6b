"""IPUStrategy (TF2): run() rules and messages, iter(dataset) infeeds, engine-run records."""
import threading

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_infeed_queue, ipu_strategy
from ipu_emulator.runtime import tf2_feeds

pytestmark = pytest.mark.tf2

BATCH = 8


def batches(count=12, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((count * BATCH, 4), dtype=np.float32).astype(dtype)
    y = (x.astype(np.float32) @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(dtype)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True)


class Regression:
    """A linear model trained with plain SGD, by a loop over an iterator or step by step."""

    def __init__(self):
        self.w = tf.Variable(tf.zeros([4, 1]))

    def step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(x @ self.w - y))
        self.w.assign_sub(0.1 * tape.gradient(loss, self.w))
        return loss


@pytest.fixture
def strategy():
    return ipu_strategy.IPUStrategy()


def test_alias_and_single_replica(strategy):
    assert ipu_strategy.IPUStrategy is ipu_strategy.IPUStrategyV1
    assert strategy.num_replicas_in_sync == 1
    assert isinstance(strategy, tf.distribute.Strategy)


def test_eager_run_of_a_python_function_is_refused_with_the_sdk_message(strategy):
    with pytest.raises(ValueError) as caught:
        strategy.run(lambda: tf.constant(1.0))
    assert str(caught.value) == (
        "IPUStrategyV1.run(fn, ...) does not support eager execution. Either convert `fn` into "
        "a tf.function or consider calling strategy.run inside a tf.function.")


def test_run_returns_the_function_outputs_directly(strategy):
    double = tf.function(lambda x: {"twice": 2 * x})
    result = strategy.run(double, args=(tf.constant([1.0, 2.0]),))
    assert isinstance(result, dict)
    np.testing.assert_array_equal(result["twice"].numpy(), [2.0, 4.0])


def test_run_inside_a_tf_function_accepts_any_callable(strategy):
    @tf.function
    def outer(x):
        return strategy.run(lambda v: v + 1.0, args=(x,))
    assert float(outer(tf.constant(1.0))) == 2.0


def test_float64_inputs_and_outputs_are_refused(strategy):
    identity = tf.function(lambda x: x)
    with pytest.raises(TypeError, match=r"^Unsupported data type for input: float64$"):
        strategy.run(identity, args=(tf.constant(1.0, tf.float64),))
    counter = tf.Variable(0.0)

    @tf.function
    def to_double(x):
        counter.assign_add(1.0)
        return tf.cast(x, tf.float64)
    with pytest.raises(TypeError, match=r"^Unsupported data type for output: float64$"):
        strategy.run(to_double, args=(tf.constant(1.0),))
    assert float(counter.numpy()) == 0.0, "refused before the program ran"


def test_experimental_run_v2_is_gone(strategy):
    with pytest.raises(RuntimeError, match=r"^`experimental_run_v2` has been deleted\. Use `run` instead\.$"):
        strategy.experimental_run_v2(tf.function(lambda: 1.0))


def test_reduce_sum_and_mean_and_unsupported_ops(strategy):
    value = tf.constant([1.0, 3.0])
    np.testing.assert_array_equal(strategy.reduce("SUM", value, axis=None).numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(
        strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None).numpy(), [1.0, 3.0])
    with pytest.raises(ValueError, match=r"^Unsupported reduce op: MAX$"):
        strategy.reduce("MAX", value, axis=None)


def test_variables_made_in_scope_live_on_the_emulated_ipu(strategy):
    with strategy.scope():
        variable = tf.Variable(1.0)
    assert variable.device.endswith("CPU:0")


# --- iter(dataset) ------------------------------------------------------------------------

def test_iter_inside_the_scope_makes_an_infeed_that_eager_next_refuses(strategy):
    with strategy.scope():
        iterator = iter(batches())
    assert isinstance(iterator, ipu_infeed_queue.IPUOwnedIterator)
    with pytest.raises(RuntimeError) as caught:
        next(iterator)
    assert str(caught.value) == tf2_feeds.EAGER_NEXT_MESSAGE
    assert str(caught.value).startswith(
        "Accessing dataset elements can not be accessed in eager mode when inside 'IPUStrategy'.")
    with pytest.raises(NotImplementedError,
                       match=r"^IPU Dataset iterator does not support get_next_as_optional\(\)\.$"):
        iterator.get_next_as_optional()


def test_plain_iteration_outside_the_scope_or_when_disabled():
    x, _ = next(iter(batches()))
    assert x.shape == (BATCH, 4)
    plain = ipu_strategy.IPUStrategy(enable_dataset_iterators=False)
    with plain.scope():
        for x, _ in batches():
            assert x.shape == (BATCH, 4)
            break


def test_infeed_refuses_partial_batches_and_int64(strategy):
    with strategy.scope():
        with pytest.raises(ValueError, match=r"^Output shape \(None, 4\) is not fully defined"):
            iter(batches().unbatch().batch(5))
        int64 = tf.data.Dataset.range(16).batch(4, drop_remainder=True)
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match=r"^Unsupported datatype int64 on index 0 of feed operation"):
            iter(int64)


# --- programs, numerics and engine runs ---------------------------------------------------

def test_looped_program_matches_step_by_step_and_records_one_run_per_call(strategy):
    tf.keras.utils.set_random_seed(1)
    looped, stepped = Regression(), Regression()

    @tf.function(jit_compile=True)
    def loop(iterator, steps):
        total = 0.0
        for _ in tf.range(steps):
            total += looped.step(*next(iterator))
        return total

    step = tf.function(stepped.step)
    with strategy.scope():
        iterator = iter(batches())
        with record.capture() as runs:
            totals = [strategy.run(loop, args=(iterator, 4)) for _ in range(3)]
    assert loop._jit_compile is False, "XLA is dropped for programs the strategy runs"
    step_losses = []
    for x, y in batches():
        with strategy.scope():
            step_losses.append(float(strategy.run(step, args=(x, y))))
    np.testing.assert_allclose([float(t) for t in totals],
                               np.add.reduceat(step_losses, [0, 4, 8]), rtol=1e-5)
    np.testing.assert_allclose(looped.w.numpy(), stepped.w.numpy(), rtol=1e-5)

    assert runs.engine_runs == 3
    assert [run.iterations for run in runs.runs] == [4, 4, 4]
    assert [run.first_run for run in runs.runs] == [True, False, False]
    run = runs.runs[0]
    assert run.infeed_bytes_per_iteration == BATCH * 4 * 4 + BATCH * 1 * 4  # x and y, float32
    assert run.input_bytes == 0
    assert run.step_cost.forward_flops > 0 and run.step_cost.backward_flops > 0
    assert run.step_cost.weight_update_flops > 0


def test_per_step_runs_record_one_iteration_and_their_inputs(strategy):
    model = Regression()
    step = tf.function(model.step)
    with record.capture() as runs:
        for x, y in batches(3):
            with strategy.scope():
                strategy.run(step, args=(x, y))
    assert runs.engine_runs == 3
    assert all(run.iterations == 1 for run in runs.runs)
    assert all(run.input_bytes == BATCH * 4 * 4 + BATCH * 4 for run in runs.runs)
    timeline = runs.simulate(target="ipu2", batch_size=BATCH)
    assert timeline.metrics.engine_runs == 3


def test_every_run_traces_in_the_strategys_replica_context_and_leaves_it(strategy):
    """Runs reuse replica contexts: a trace after earlier runs, and a run from another thread,
    still happen in this strategy's replica context, and none stays entered afterwards."""
    traced_in = []

    @tf.function
    def add_one(x):
        traced_in.append(tf.distribute.get_replica_context().strategy)
        return x + 1.0

    results = [strategy.run(add_one, args=(tf.zeros([size]),)) for size in (1, 1, 2, 3)]
    worker = threading.Thread(target=lambda: results.append(
        strategy.run(add_one, args=(tf.zeros([4]),))))
    worker.start()
    worker.join()
    assert traced_in == [strategy] * 4, "one trace per new shape, each in the replica context"
    assert [r.shape[0] for r in results] == [1, 1, 2, 3, 4]
    assert all(np.all(r.numpy() == 1.0) for r in results)
    assert tf.distribute.get_replica_context().strategy is not strategy


def test_a_jit_function_already_compiled_by_xla_still_runs_as_plain_tensorflow(strategy):
    @tf.function(jit_compile=True)
    def square(x):
        return x * x
    assert float(square(tf.constant(3.0))) == 9.0          # compiled with XLA here
    assert float(strategy.run(square, args=(tf.constant(4.0),))) == 16.0
    assert square._jit_compile is True, "the user's function itself is left alone"


def test_calling_a_jit_function_that_reads_an_infeed_directly_says_what_to_do(strategy):
    @tf.function(jit_compile=True)
    def first_batch_sum(iterator):
        x, _ = next(iterator)
        return tf.reduce_sum(x)
    with strategy.scope():
        iterator = iter(batches())
        with pytest.raises(RuntimeError, match=r"strategy\.run\(fn, args=\.\.\.\)"):
            first_batch_sum(iterator)          # compiled by XLA: refused with advice
        assert float(strategy.run(first_batch_sum, args=(iterator,))) > 0
