"""IPUOutfeedQueue (Graphcore's TensorFlow API reference, ``ipu.ipu_outfeed_queue``)."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator.ipu import ipu_compiler, ipu_infeed_queue, loops, scopes
from ipu_emulator.ipu.ipu_outfeed_queue import IPUOutfeedMode, IPUOutfeedQueue

IPU = "/device:IPU:0"
LAST_BEFORE_RUN = ("Trying to get the last value from an outfeed queue before it was executed. "
                   "Make sure the outfeed dequeue TensorFlow operation is executed after the "
                   "enqueue to the outfeed has completed.")


def enqueue_program(outfeed, make_value, n):
    """Compiled ``repeat(n)`` whose body enqueues ``make_value(i)`` (i = 0, 1, ...)."""
    def body(i):
        return i + 1, outfeed.enqueue(make_value(tf.cast(i, tf.float32)))

    with scopes.ipu_scope(IPU):
        [out] = ipu_compiler.compile(lambda: loops.repeat(n, body, [0]))
    return out


# --- construction -------------------------------------------------------------------------

def test_old_signature_feed_name_then_mode(graph):
    old = IPUOutfeedQueue("my_outfeed", IPUOutfeedMode.LAST)
    assert old.outfeed_mode is IPUOutfeedMode.LAST and old._id == "my_outfeed"
    sdk1 = IPUOutfeedQueue("other", outfeed_mode=IPUOutfeedMode.ALL, device_ordinal=0,
                           replication_factor=1, io_batch_size=1)
    assert sdk1.outfeed_mode is IPUOutfeedMode.ALL
    contrib = IPUOutfeedQueue("contrib", outfeed_all=True)
    assert contrib.outfeed_mode is IPUOutfeedMode.ALL


def test_new_signature_mode_first(graph):
    assert IPUOutfeedQueue(IPUOutfeedMode.LAST).outfeed_mode is IPUOutfeedMode.LAST
    assert IPUOutfeedQueue().outfeed_mode is IPUOutfeedMode.ALL
    q = IPUOutfeedQueue(outfeed_mode=IPUOutfeedMode.ALL, device_ordinal=None, buffer_depth=3,
                        optimise_latency=False)
    assert q.outfeed_mode is IPUOutfeedMode.ALL
    assert IPUOutfeedMode.ALL.value == "all" and IPUOutfeedMode.LAST.value == "get_last"


@pytest.mark.parametrize("make, kind", [
    (lambda: IPUOutfeedQueue("feed", "all"), "str"),
    (lambda: IPUOutfeedQueue(outfeed_mode="get_last"), "str"),
    (lambda: IPUOutfeedQueue(3), "int"),
])
def test_bad_mode(graph, make, kind):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == ("Expected `outfeed_mode` value to be of "
                               "`ipu_outfeed_queue.IPUOutfeedMode` type, but is "
                               "<class '%s'>." % kind)


def test_bad_replication_factor_and_buffer_depth(graph):
    with pytest.raises(ValueError, match="^Replication factor must be >= 1$"):
        IPUOutfeedQueue("feed", replication_factor=0)
    with pytest.raises(ValueError, match="^Outfeed buffer depth cannot be less than 1$"):
        IPUOutfeedQueue(buffer_depth=0)


def test_enqueue_twice(graph):
    outfeed = IPUOutfeedQueue()
    outfeed.enqueue(tf.constant(1.0))
    with pytest.raises(ValueError) as info:
        outfeed.enqueue(tf.constant(2.0))
    assert str(info.value) == "An outfeed can only be enqueued once."


def test_enqueue_is_per_graph():
    outfeed = IPUOutfeedQueue()
    for _ in range(2):
        with tf.Graph().as_default():
            assert not outfeed.enqueued
            assert isinstance(outfeed.enqueue(tf.constant(1.0)), tf.Operation)
            assert outfeed.enqueued


def test_dequeue_before_enqueue(graph):
    with pytest.raises(ValueError) as info:
        IPUOutfeedQueue().dequeue()
    assert str(info.value) == "Trying to dequeue an outfeed which has not been enqueued."


def test_zero_sized_dimension(graph):
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        IPUOutfeedQueue().enqueue(tf.zeros([2, 0]))
    assert info.value.message == ("Detected an input tensor to an outfeed queue with a "
                                  "dimension of size 0. Please remove it from the inputs.")


# --- ALL mode -------------------------------------------------------------------------------

def test_all_mode_tensor_shape_and_values(graph, sess):
    outfeed = IPUOutfeedQueue()
    run = enqueue_program(outfeed, lambda i: tf.fill([2, 3], i), 5)
    dequeue = outfeed.dequeue()
    sess.run(run)
    values = sess.run(dequeue)
    assert values.shape == (5, 2, 3)
    np.testing.assert_array_equal(values[:, 0, 0], [0, 1, 2, 3, 4])


def test_all_mode_list(graph, sess):
    outfeed = IPUOutfeedQueue()
    run = enqueue_program(outfeed, lambda i: [tf.fill([2], i), i * 10.0], 4)
    dequeue = outfeed.dequeue()
    assert isinstance(dequeue, list) and len(dequeue) == 2
    sess.run(run)
    a, b = sess.run(dequeue)
    assert a.shape == (4, 2) and b.shape == (4,)
    np.testing.assert_array_equal(b, [0, 10, 20, 30])


def test_all_mode_dict(graph, sess):
    outfeed = IPUOutfeedQueue()
    run = enqueue_program(outfeed, lambda i: {"x": tf.fill([4, 4], i), "y": tf.reshape(i, [1])}, 3)
    dequeue = outfeed.dequeue()
    assert isinstance(dequeue, dict) and set(dequeue) == {"x", "y"}
    sess.run(run)
    values = sess.run(dequeue)
    assert values["x"].shape == (3, 4, 4) and values["y"].shape == (3, 1)
    np.testing.assert_array_equal(values["y"][:, 0], [0, 1, 2])


def test_all_mode_accumulates_across_runs_and_dequeue_is_destructive(graph, sess):
    outfeed = IPUOutfeedQueue()
    run = enqueue_program(outfeed, lambda i: tf.fill([2, 3], i), 4)
    dequeue = outfeed.dequeue()
    sess.run(run)
    sess.run(run)
    assert sess.run(dequeue).shape == (8, 2, 3)
    assert sess.run(dequeue).shape == (0, 2, 3)  # nothing new since the last dequeue
    sess.run(run)
    assert sess.run(dequeue).shape == (4, 2, 3)


def test_all_mode_dequeue_before_any_run_warns_and_is_empty(graph, sess, caplog):
    outfeed = IPUOutfeedQueue("early_outfeed")
    enqueue_program(outfeed, lambda i: tf.fill([3], i), 2)
    dequeue = outfeed.dequeue()
    with caplog.at_level(logging.WARNING):
        values = sess.run(dequeue)
    assert values.shape == (0, 3)
    assert ("Trying to dequeue elements from the outfeed queue with id=early_outfeed which "
            "has not executed yet. Make sure to execute the program with the outfeed before "
            "trying to dequeue an outfeed.") in caplog.text


# --- LAST mode ------------------------------------------------------------------------------

def test_last_mode_returns_only_the_last_value(graph, sess):
    outfeed = IPUOutfeedQueue(IPUOutfeedMode.LAST)
    run = enqueue_program(outfeed, lambda i: {"x": tf.fill([2, 2], i), "y": i}, 5)
    dequeue = outfeed.dequeue()
    sess.run(run)
    values = sess.run(dequeue)
    assert values["x"].shape == (2, 2) and values["y"].shape == ()
    assert values["y"] == 4.0
    np.testing.assert_array_equal(values["x"], np.full([2, 2], 4.0))


def test_last_mode_before_any_run(graph, sess):
    outfeed = IPUOutfeedQueue(IPUOutfeedMode.LAST)
    enqueue_program(outfeed, lambda i: tf.fill([2], i), 3)
    dequeue = outfeed.dequeue()
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(dequeue)
    assert info.value.message == LAST_BEFORE_RUN


def test_last_mode_second_dequeue_without_a_new_run(graph, sess):
    outfeed = IPUOutfeedQueue(IPUOutfeedMode.LAST)
    run = enqueue_program(outfeed, lambda i: tf.fill([2], i), 3)
    dequeue = outfeed.dequeue()
    sess.run(run)
    np.testing.assert_array_equal(sess.run(dequeue), [2.0, 2.0])
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(dequeue)
    assert info.value.message == LAST_BEFORE_RUN


# --- numerics --------------------------------------------------------------------------------

def test_outfeed_losses_equal_the_step_by_step_losses(graph, sess, regression):
    infeed = ipu_infeed_queue.IPUInfeedQueue(regression.dataset())
    outfeed = IPUOutfeedQueue()

    def body(x, y):
        loss, train = regression.model(x, y)
        return outfeed.enqueue({"loss": loss}), train

    with scopes.ipu_scope(IPU):
        run = ipu_compiler.compile(lambda: loops.repeat(regression.steps, body,
                                                        infeed_queue=infeed))
    assert isinstance(run, tf.Operation)
    dequeue = outfeed.dequeue()
    sess.run(infeed.initializer)
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(run)
    losses = sess.run(dequeue)["loss"]
    step_losses, step_w, _ = regression.step_by_step()
    assert losses.shape == (regression.steps,)
    np.testing.assert_array_equal(losses, np.array(step_losses))
    w, _ = regression.variables(graph)
    np.testing.assert_array_equal(sess.run(w), step_w)
