"""Feeds in TF2: outfeed enqueue inside tf.function (plain and XLA), eager dequeue, iteration,
explicit infeeds in TF2, and the SDK's errors."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_infeed_queue, ipu_strategy, loops
from ipu_emulator.ipu.ipu_outfeed_queue import IPUOutfeedMode, IPUOutfeedQueue

pytestmark = pytest.mark.tf2


def counting_function(outfeed, structure="tensor"):
    """A tf.function that enqueues ``steps`` elements built from the step index."""
    @tf.function
    def run(steps):
        for step in tf.range(steps):
            value = tf.cast(step, tf.float32) * tf.ones([2, 3])
            if structure == "dict":
                outfeed.enqueue({"x": value, "sum": tf.reshape(tf.reduce_sum(value), [1])})
            elif structure == "list":
                outfeed.enqueue([value, step])
            else:
                outfeed.enqueue(value)
    return run


def test_all_mode_stacks_every_enqueue_and_empties_the_queue():
    outfeed = IPUOutfeedQueue()
    run = counting_function(outfeed)
    run(tf.constant(3))
    run(tf.constant(2))
    values = outfeed.dequeue()
    assert values.shape == (5, 2, 3)
    np.testing.assert_array_equal(values.numpy()[:, 0, 0], [0, 1, 2, 0, 1])
    assert outfeed.dequeue().shape == (0, 2, 3), "ALL-mode dequeue is destructive"


def test_structures_are_kept():
    outfeed = IPUOutfeedQueue()
    counting_function(outfeed, "dict")(tf.constant(4))
    values = outfeed.dequeue()
    assert set(values) == {"x", "sum"}
    assert values["x"].shape == (4, 2, 3) and values["sum"].shape == (4, 1)
    listed = IPUOutfeedQueue()
    counting_function(listed, "list")(tf.constant(2))
    value, step = listed.dequeue()
    assert value.shape == (2, 2, 3) and step.dtype == tf.int32


def test_last_mode_returns_only_the_most_recent_value():
    outfeed = IPUOutfeedQueue(IPUOutfeedMode.LAST)
    run = counting_function(outfeed)
    run.get_concrete_function(tf.constant(1))  # traced (enqueued), never executed
    with pytest.raises(tf.errors.FailedPreconditionError) as caught:
        outfeed.dequeue()
    assert caught.value.message == IPUOutfeedQueue.LAST_BEFORE_RUN_MESSAGE
    run(tf.constant(4))
    last = outfeed.dequeue()
    assert last.shape == (2, 3) and float(last[0, 0]) == 3.0
    with pytest.raises(tf.errors.FailedPreconditionError):
        outfeed.dequeue()


def test_dequeue_before_any_enqueue_is_refused():
    with pytest.raises(ValueError, match=r"^Trying to dequeue an outfeed which has not been enqueued\.$"):
        IPUOutfeedQueue().dequeue()


def test_all_mode_dequeue_before_the_program_ran_warns_and_is_empty(caplog):
    outfeed = IPUOutfeedQueue()
    counting_function(outfeed).get_concrete_function(tf.constant(1))
    with caplog.at_level(logging.WARNING, logger="ipu_emulator"):
        values = outfeed.dequeue()
    assert values.shape == (0, 2, 3)
    assert "which has not executed yet" in caplog.text


def test_enqueue_once_per_function_but_in_many_functions():
    outfeed = IPUOutfeedQueue()

    @tf.function
    def twice():
        outfeed.enqueue(1.0)
        outfeed.enqueue(2.0)
    with pytest.raises(ValueError, match=r"An outfeed can only be enqueued once\.$"):
        twice()

    @tf.function
    def first():
        outfeed.enqueue(1.0)

    @tf.function
    def second():
        outfeed.enqueue(2.0)
    first()
    second()
    assert outfeed.enqueued
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [1.0, 2.0])


def test_zero_sized_dimension_is_refused():
    outfeed = IPUOutfeedQueue()
    @tf.function
    def empty():
        outfeed.enqueue(tf.zeros([0, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="dimension of size 0"):
        empty()


def test_iterating_over_an_outfeed():
    outfeed = IPUOutfeedQueue()
    assert list(outfeed) == [], "nothing enqueued yet: nothing to iterate"
    counting_function(outfeed)(tf.constant(4))
    elements = list(outfeed)
    assert len(elements) == 4 and elements[0].shape == (2, 3)
    counting_function(outfeed)(tf.constant(4))
    assert float(sum(outfeed)[0, 0]) == 0 + 1 + 2 + 3

    with pytest.raises(RuntimeError) as caught:
        iter(IPUOutfeedQueue(IPUOutfeedMode.LAST))
    assert str(caught.value) == ("IPUOutfeedQueue can only be iterated over if the "
                                 "`outfeed_mode` is set to 'IPUOutfeedMode.ALL'.")

    @tf.function
    def iterate_inside():
        return iter(outfeed)
    with pytest.raises(RuntimeError, match=r"IPUOutfeedQueue can only be iterated over in eager mode\.$"):
        iterate_inside()


def test_enqueue_inside_an_xla_compiled_function():
    outfeed = IPUOutfeedQueue()

    @tf.function(jit_compile=True)
    def compiled(x):
        for step in tf.range(3):
            outfeed.enqueue(x * tf.cast(step, tf.float32))
        return x
    compiled(tf.constant([1.0, 2.0]))
    compiled(tf.constant([10.0, 20.0]))
    values = outfeed.dequeue().numpy()
    np.testing.assert_array_equal(values, [[0, 0], [1, 2], [2, 4], [0, 0], [10, 20], [20, 40]])
    assert outfeed.dequeue().shape == (0, 2)


def test_jit_function_with_next_and_outfeed_runs_through_the_strategy():
    strategy = ipu_strategy.IPUStrategy()
    data = tf.data.Dataset.from_tensor_slices(np.arange(40, dtype=np.float32).reshape(20, 2))
    data = data.batch(2, drop_remainder=True)
    outfeed = IPUOutfeedQueue()

    @tf.function(experimental_compile=True)
    def sums(iterator, steps):
        for _ in tf.range(steps):
            outfeed.enqueue(tf.reduce_sum(next(iterator)))
    with strategy.scope():
        iterator = iter(data)
        with record.capture() as runs:
            strategy.run(sums, args=(iterator, 3))
            strategy.run(sums, args=(iterator, 2))
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [6, 22, 38, 54, 70])
    assert [run.iterations for run in runs.runs] == [3, 2]
    assert runs.runs[0].outfeed_bytes_per_iteration == 4
    assert runs.runs[0].infeed_bytes_per_iteration == 2 * 2 * 4


def test_explicit_infeed_queue_with_a_loop_in_tf2():
    data = tf.data.Dataset.from_tensor_slices(np.arange(12, dtype=np.float32)).batch(
        3, drop_remainder=True)
    infeed = ipu_infeed_queue.IPUInfeedQueue(data)
    infeed.initializer  # pylint: disable=pointless-statement  (creates the iterator in TF2)
    with pytest.raises(ValueError, match="can only be accessed once"):
        infeed.initializer  # pylint: disable=pointless-statement

    @tf.function
    def total():
        return loops.repeat(4, lambda running, x: running + tf.reduce_sum(x), [0.0], infeed)
    assert float(total()) == sum(range(12))


def test_explicit_infeed_refuses_int64_when_initialized():
    infeed = ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(8).batch(2, drop_remainder=True))
    with pytest.raises(tf.errors.FailedPreconditionError, match="Unsupported datatype int64"):
        infeed.initializer  # pylint: disable=pointless-statement


def test_a_new_outfeed_in_a_later_trace_of_the_same_function():
    @tf.function
    def send(outfeed, value):
        for _ in tf.range(2):
            outfeed.enqueue(value)
    first, second = IPUOutfeedQueue(), IPUOutfeedQueue(IPUOutfeedMode.LAST)
    send(first, tf.constant(1.0))
    send(second, tf.constant(2.0))          # a second trace makes the second queue's buffer
    np.testing.assert_array_equal(first.dequeue().numpy(), [1.0, 1.0])
    assert float(second.dequeue()) == 2.0


INFEED_OUT_OF_RANGE = ("Infeed dataset iterator out of range. Are you trying to dequeue more "
                       "elements than are in the dataset?")


def test_running_past_the_end_of_a_dataset_raises_the_sdks_error():
    strategy = ipu_strategy.IPUStrategy()
    data = tf.data.Dataset.from_tensor_slices(np.ones((3, 2), np.float32))   # 3 elements

    @tf.function(experimental_compile=True)
    def total(iterator, steps):
        running = tf.constant(0.0)
        for _ in tf.range(steps):
            running += tf.reduce_sum(next(iterator))
        return running
    with strategy.scope():
        iterator = iter(data)
        assert float(strategy.run(total, args=(iterator, 2))) == 4.0
        with pytest.raises(tf.errors.OutOfRangeError) as caught:
            strategy.run(total, args=(iterator, 2))                   # only one is left
    assert caught.value.message == INFEED_OUT_OF_RANGE


def test_running_past_the_end_of_an_infeed_queue_raises_the_sdks_error():
    strategy = ipu_strategy.IPUStrategy()
    data = tf.data.Dataset.from_tensor_slices(np.arange(6, dtype=np.float32)).batch(
        3, drop_remainder=True)                                       # 2 elements
    infeed = ipu_infeed_queue.IPUInfeedQueue(data)
    infeed.initializer  # pylint: disable=pointless-statement  (creates the iterator in TF2)

    @tf.function
    def total():
        return loops.repeat(3, lambda running, x: running + tf.reduce_sum(x), [0.0], infeed)
    with strategy.scope():
        with pytest.raises(tf.errors.OutOfRangeError) as caught:
            strategy.run(total)
    assert caught.value.message == INFEED_OUT_OF_RANGE


def test_each_run_records_how_many_elements_its_outfeed_received():
    """``EngineRun.outfeed_enqueues``: the busiest outfeed's elements in that run, whether every
    step enqueues, only the end of the loop, or nothing does."""
    strategy = ipu_strategy.IPUStrategy()
    data = tf.data.Dataset.from_tensor_slices(np.arange(80, dtype=np.float32).reshape(40, 2))
    data = data.batch(2, drop_remainder=True).repeat()
    every_step, at_the_end = IPUOutfeedQueue(), IPUOutfeedQueue()

    def looped(send_each_step, send_at_the_end):
        @tf.function
        def program(iterator, steps):
            total = tf.constant(0.0)
            for _ in tf.range(steps):
                total = tf.reduce_sum(next(iterator))
                if send_each_step:
                    every_step.enqueue(total)
            if send_at_the_end:
                at_the_end.enqueue(total)
            return total
        return program

    with strategy.scope():
        iterator = iter(data)
        with record.capture() as runs:
            for program, steps in [(looped(True, True), 4), (looped(False, True), 3),
                                   (looped(False, False), 5)]:
                strategy.run(program, args=(iterator, steps))
    assert [(run.iterations, run.outfeed_enqueues) for run in runs.runs] == [(4, 4), (3, 1),
                                                                             (5, 0)]
    assert every_step.dequeue().shape == (4,) and at_the_end.dequeue().shape == (2,)
