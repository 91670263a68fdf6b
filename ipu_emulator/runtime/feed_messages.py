"""The SDK's feed messages and argument checks, written once for every raiser: the TF1
graph-mode queues (``ipu_infeed_queue``, ``ipu_outfeed_queue``, ``session_run``), the
replicas' outfeeds (``replication``), the TF2 side (``tf2_feeds``) and IPU Keras's feed
options.  The texts are the SDK's own; tests pin them."""
import tensorflow as tf

INFEED_NOT_CREATED_MESSAGE = (
    "Trying to access an infeed dataset iterator which has not been created. Did you "
    "initialize the infeed_queue '{}' ?")
NOT_ENQUEUED_MESSAGE = "Trying to dequeue an outfeed which has not been enqueued."
ENQUEUED_TWICE_MESSAGE = "An outfeed can only be enqueued once."
# The SDK aborts the process with this text (LOG(FATAL) in poplar_executor.cc); the emulator
# raises it as an OutOfRangeError instead, in TF1 and TF2 alike (docs/fidelity.md).
INFEED_OUT_OF_RANGE_MESSAGE = ("Infeed dataset iterator out of range. Are you trying to "
                               "dequeue more elements than are in the dataset?")
EMPTY_DIMENSION_MESSAGE = ("Detected an input tensor to an outfeed queue with a dimension of "
                           "size 0. Please remove it from the inputs.")


def infeed_not_created(feed_id) -> tf.errors.FailedPreconditionError:
    """The error of a run or dequeue that finds the infeed ``feed_id`` without an iterator."""
    return tf.errors.FailedPreconditionError(
        None, None, INFEED_NOT_CREATED_MESSAGE.format(feed_id))


def check_outfeed_tensors(flat) -> None:
    """Refuses an outfeed enqueue of a tensor with a dimension of size 0."""
    for tensor in flat:
        if tensor.shape.rank is not None and 0 in tensor.shape.as_list():
            raise tf.errors.InvalidArgumentError(None, None, EMPTY_DIMENSION_MESSAGE)


def check_prefetch_depth(depth) -> None:
    """An infeed's ``prefetch_depth``: None, or 1 to 255."""
    if depth is None:
        return
    if depth <= 0:
        raise ValueError("prefetch_depth must be greater than zero, but it is {}".format(depth))
    if depth > 255:
        raise ValueError("prefetch_depth must be less than 256, but it is {}".format(depth))


def check_buffer_depth(depth) -> None:
    """An outfeed's ``buffer_depth``: None, or at least 1."""
    if depth is not None and depth <= 0:
        raise ValueError("Outfeed buffer depth cannot be less than 1")


__all__ = ["INFEED_NOT_CREATED_MESSAGE", "NOT_ENQUEUED_MESSAGE", "ENQUEUED_TWICE_MESSAGE",
           "EMPTY_DIMENSION_MESSAGE", "infeed_not_created", "check_outfeed_tensors",
           "check_prefetch_depth", "check_buffer_depth"]
