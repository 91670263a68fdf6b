"""IPUInfeedQueue (Graphcore's TensorFlow API reference, ``ipu.ipu_infeed_queue``)."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator.ipu import ipu_compiler, loops, scopes
from ipu_emulator.ipu.ipu_infeed_queue import IPUInfeedQueue

IPU = "/device:IPU:0"
NOT_CREATED = ("Trying to access an infeed dataset iterator which has not been created. Did "
               "you initialize the infeed_queue '{}' ?")
OUT_OF_RANGE = ("Infeed dataset iterator out of range. Are you trying to dequeue more elements "
                "than are in the dataset?")
UNSUPPORTED = ("Unsupported datatype {dtype} on index {index} of feed operation {op} with feed "
               "id '{id}'. You should use a tf.DataSet.map() operation to cast the element "
               "into one of (float,int32,uint8,int8,bool,half).")


def features(n=8, width=4):
    return np.arange(n * width, dtype=np.float32).reshape(n, width)


def batched(n=8, batch=2):
    return tf.data.Dataset.from_tensor_slices(features(n)).batch(batch, drop_remainder=True)


def summing_program(infeed, n):
    """A compiled loop that adds up ``n`` infeed elements."""
    def body(total, x):
        return total + tf.reduce_sum(x)

    with scopes.ipu_scope(IPU):
        [out] = ipu_compiler.compile(lambda: loops.repeat(n, body, [0.0], infeed))
    return out


# --- construction ---------------------------------------------------------------------------

def test_union_signature_is_accepted(graph):
    old = IPUInfeedQueue(batched(), "named_feed", device_ordinal=0, replication_factor=1,
                         data_to_prefetch=1, prefetch_depth=2)
    assert old._id == "named_feed"
    middle = IPUInfeedQueue(batched(), feed_name="other", replication_factor=1,
                            data_to_prefetch=1)
    new = IPUInfeedQueue(batched(), device_ordinal=0, prefetch_depth=3, optimise_latency=False)
    newest = IPUInfeedQueue(batched())
    assert len({old._id, middle._id, new._id, newest._id}) == 4


@pytest.mark.parametrize("make", [
    lambda: tf.data.Dataset.from_tensor_slices(features(7)).batch(2),  # drop_remainder=False
    lambda: tf.data.Dataset.from_generator(lambda: iter(()), tf.float32,
                                           output_shapes=tf.TensorShape([None, 4])),
], ids=["partial-batch", "unknown-length"])
def test_shape_not_fully_defined(graph, make):
    with pytest.raises(ValueError) as info:
        IPUInfeedQueue(make())
    assert str(info.value) == ("Output shape (?, 4) is not fully defined. If using "
                               "tf.Dataset.batch, set `drop_remainder=True`.")


def test_prefetch_depth_bounds(graph):
    with pytest.raises(ValueError) as info:
        IPUInfeedQueue(batched(), prefetch_depth=0)
    assert str(info.value) == "prefetch_depth must be greater than zero, but it is 0"
    with pytest.raises(ValueError) as info:
        IPUInfeedQueue(batched(), prefetch_depth=-3)
    assert str(info.value) == "prefetch_depth must be greater than zero, but it is -3"
    with pytest.raises(ValueError) as info:
        IPUInfeedQueue(batched(), prefetch_depth=256)
    assert str(info.value) == "prefetch_depth must be less than 256, but it is 256"
    IPUInfeedQueue(batched(), prefetch_depth=1)
    IPUInfeedQueue(batched(), prefetch_depth=255)


def test_device_ordinal_checks(graph):
    with pytest.raises(ValueError, match="^Device ordinal must be an integer$"):
        IPUInfeedQueue(batched(), device_ordinal="0")
    with pytest.raises(ValueError, match="^Device ordinal must be >= 0$"):
        IPUInfeedQueue(batched(), device_ordinal=-1)


def test_initializer_can_be_accessed_once(graph):
    infeed = IPUInfeedQueue(batched())
    assert isinstance(infeed.initializer, tf.Operation)
    with pytest.raises(ValueError) as info:
        infeed.initializer  # pylint: disable=pointless-statement
    assert str(info.value) == ("The IPUInfeedQueue `initializer` function can only be "
                               "accessed once.")


def test_get_next_is_obsolete(graph):
    infeed = IPUInfeedQueue(batched())
    with pytest.raises(ValueError) as info:
        infeed.get_next()
    assert str(info.value) == ("`get_next()` is now obsolete as the IPUInfeedQueue is now "
                               "automatically dequeued by the loop.")


def test_number_of_tuple_elements(graph):
    x = features()
    assert IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(x)).number_of_tuple_elements == 1
    triple = tf.data.Dataset.from_tensor_slices((x, x, x[:, 0]))
    assert IPUInfeedQueue(triple).number_of_tuple_elements == 3
    nested = tf.data.Dataset.from_tensor_slices(((x, x), x))  # top level only
    assert IPUInfeedQueue(nested).number_of_tuple_elements == 2
    as_dict = tf.data.Dataset.from_tensor_slices({"a": x, "b": x, "c": x, "d": x})
    assert IPUInfeedQueue(as_dict).number_of_tuple_elements == 4


def test_dequeued_is_set_by_the_loop(graph):
    infeed = IPUInfeedQueue(batched())
    assert not infeed.dequeued
    summing_program(infeed, 2)
    assert infeed.dequeued


# --- running ------------------------------------------------------------------------------

def test_elements_arrive_in_order_across_runs(graph, sess):
    infeed = IPUInfeedQueue(batched(8, 2))
    out = summing_program(infeed, 2)
    sess.run(infeed.initializer)
    x = features(8)
    assert sess.run(out) == x[:4].sum()
    assert sess.run(out) == x[4:].sum()


def test_running_before_initialisation(graph, sess):
    infeed = IPUInfeedQueue(batched(), "uninitialised_feed")
    out = summing_program(infeed, 2)
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(out)
    assert info.value.message == NOT_CREATED.format("uninitialised_feed")


def test_running_before_initialisation_generated_id(graph, sess):
    infeed = IPUInfeedQueue(batched())
    out = summing_program(infeed, 2)
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(out)
    assert info.value.message == NOT_CREATED.format(infeed._id)


def test_exhaustion_raises_out_of_range(graph, sess):
    infeed = IPUInfeedQueue(batched(6, 2))  # three elements
    out = summing_program(infeed, 5)
    sess.run(infeed.initializer)
    with pytest.raises(tf.errors.OutOfRangeError) as info:
        sess.run(out)
    assert info.value.message == OUT_OF_RANGE


def test_exhaustion_on_a_later_run(graph, sess):
    infeed = IPUInfeedQueue(batched(6, 2))  # three elements: one full run of two, then short
    out = summing_program(infeed, 2)
    sess.run(infeed.initializer)
    sess.run(out)
    with pytest.raises(tf.errors.OutOfRangeError) as info:
        sess.run(out)
    assert info.value.message == OUT_OF_RANGE


def cast_summing_program(infeed):
    def body(total, x):
        return total + tf.cast(x, tf.float32)

    with scopes.ipu_scope(IPU):
        [out] = ipu_compiler.compile(lambda: loops.repeat(2, body, [0.0], infeed))
    return out


def test_int64_dataset_fails_when_the_initializer_runs(graph, sess):
    infeed = IPUInfeedQueue(tf.data.Dataset.range(5), "int64_feed")
    initializer = infeed.initializer
    cast_summing_program(infeed)  # construction and graph building are fine
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(initializer)
    assert info.value.message == UNSUPPORTED.format(dtype="int64", index=0, op=initializer.name,
                                                    id="int64_feed")


def test_int64_dataset_fails_when_the_program_is_compiled(graph, sess):
    infeed = IPUInfeedQueue(tf.data.Dataset.range(5), "int64_feed")
    out = cast_summing_program(infeed)
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(out)  # first run = compilation, before the uninitialised feed is touched
    assert info.value.message == UNSUPPORTED.format(
        dtype="int64", index=0, op=infeed.initializer.name, id="int64_feed")


def test_float64_is_printed_as_double_with_its_index(graph, sess):
    x = features()
    dataset = tf.data.Dataset.from_tensor_slices((x, x.astype(np.float64)))
    infeed = IPUInfeedQueue(dataset, "double_feed")
    initializer = infeed.initializer
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(initializer)
    assert info.value.message == UNSUPPORTED.format(dtype="double", index=1,
                                                    op=initializer.name, id="double_feed")


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint8, np.int8, np.bool_])
def test_feedable_dtypes_initialise(graph, sess, dtype):
    infeed = IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(features().astype(dtype)))
    sess.run(infeed.initializer)


def test_uint8_used_in_computation_fails_at_first_run(graph, sess):
    pixels = (features() % 256).astype(np.uint8)
    infeed = IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(pixels).repeat())

    def body(total, x):
        return total + tf.cast(x * 2, tf.float32)[0]  # multiplies uint8 on the device

    with scopes.ipu_scope(IPU):
        [out] = ipu_compiler.compile(lambda: loops.repeat(2, body, [0.0], infeed))
    sess.run(infeed.initializer)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(out)
    assert info.value.message.startswith("Unsupported data type uint8 in operation '")
    assert "/device:IPU:0" in info.value.message


def test_uint8_cast_to_float_inside_the_program_is_fine(graph, sess):
    pixels = (features() % 256).astype(np.uint8)
    infeed = IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(pixels).repeat())

    def body(total, x):
        return total + tf.reduce_sum(tf.cast(x, tf.float32) / 255.0)

    with scopes.ipu_scope(IPU):
        [out] = ipu_compiler.compile(lambda: loops.repeat(2, body, [0.0], infeed))
    sess.run(infeed.initializer)
    expected = pixels[:2].astype(np.float32).sum() / 255.0
    assert sess.run(out) == pytest.approx(expected, rel=1e-6)


def test_running_after_the_deleter(graph, sess):
    infeed = IPUInfeedQueue(batched(8, 2), "deleted_feed")
    initializer, deleter = infeed.initializer, infeed.deleter
    out = summing_program(infeed, 1)
    sess.run(initializer)
    sess.run(out)
    sess.run(deleter)
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(out)
    assert info.value.message == NOT_CREATED.format("deleted_feed")
    sess.run(initializer)  # a new iterator, from the start of the dataset
    assert sess.run(out) == features(8)[:2].sum()
