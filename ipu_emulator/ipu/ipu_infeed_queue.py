"""``IPUInfeedQueue``: stream a ``tf.data.Dataset`` to the IPU inside an on-device loop.

The IPU program cannot ask the host for each batch; instead a host thread pushes dataset
elements into a queue that the device reads from every loop iteration.  Because the device
program is compiled for fixed shapes, every element must have a fully defined shape (batch
with ``drop_remainder=True``), and only types the feed can carry are allowed.

    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    ...
    sess.run(infeed.initializer)          # once, before running the program

In the emulator the queue is a TensorFlow iterator created on the host; the loop body calls
its ``get_next()`` inside the same while loop, so one ``sess.run`` consumes many elements.
"""
import itertools

import tensorflow as tf
from tensorflow.python.util import nest

from ipu_emulator.runtime import feed_messages, programs, replication, tf2_feeds

# Element types a feed can carry (SDK >= 2.0), in TensorFlow's DataType enum order.
FEEDABLE_DTYPES = (tf.float32, tf.int32, tf.uint8, tf.int8, tf.bool, tf.float16)
_FEEDABLE_NAMES = "(float,int32,uint8,int8,bool,half)"

_feed_ids = itertools.count(1)


def _datatype_string(dtype):
    """The name TensorFlow's C++ runtime prints for a dtype (``float``, ``double``...)."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(
        dtype.name, dtype.name)


class IPUInfeedQueue:
    """Wraps a dataset so an IPU loop can dequeue one element per iteration.

    Accepts every historical signature: ``feed_name`` and ``data_to_prefetch`` are taken
    and ignored, as in SDK 2.1 and later.  ``replication_factor`` is ignored too once the
    IPU system is configured (the device decides); a program built before that takes its
    replica count from it, as SDK 2.0 and earlier did (see ``runtime/replication.py``).
    """

    def __init__(self, dataset, feed_name=None, device_ordinal=None, replication_factor=1,
                 data_to_prefetch=1, prefetch_depth=None, optimise_latency=False, **kwargs):
        del data_to_prefetch, optimise_latency, kwargs
        if device_ordinal is None:
            device_ordinal = 0
        if not isinstance(device_ordinal, int):
            raise ValueError("Device ordinal must be an integer")
        if device_ordinal < 0:
            raise ValueError("Device ordinal must be >= 0")
        feed_messages.check_prefetch_depth(prefetch_depth)
        for spec in nest.flatten(dataset.element_spec):
            shape = spec.shape
            if isinstance(shape, (list, tuple)):
                raise ValueError("Nested list/tuple input shapes are not supported")
            if not shape.is_fully_defined():
                raise ValueError(
                    "Output shape {} is not fully defined. If using tf.Dataset.batch, set "
                    "`drop_remainder=True`.".format(shape))

        self._dataset = dataset
        self._element_spec = dataset.element_spec
        self._replication_factor = replication_factor
        replication.note_declared_replication_factor(replication_factor)
        self._device_ordinal = device_ordinal
        self._prefetch_depth = prefetch_depth
        self._id = feed_name if feed_name is not None else "feed%d" % next(_feed_ids)
        self._dequeued = False
        self._initializer_accessed = False
        self._iterator = None
        self._initializer = None
        if not tf.executing_eagerly():
            self._build_graph_iterator()

    def _build_graph_iterator(self):
        graph = tf.compat.v1.get_default_graph()
        # The iterator lives on the host, outside any loop or control dependency.
        with tf.control_dependencies(None), tf.device("/device:CPU:0"):
            self._iterator = tf.compat.v1.data.make_initializable_iterator(self._dataset)
            # Named after the SDK's op, so error messages read as they did on an IPU system.
            self._initializer = tf.group(self._iterator.initializer,
                                         name="IPUCreateDatasetIterator")
            self._deleter = tf.no_op(name="%s_deleter" % self._id)
        reg = programs.registry(graph)
        reg.infeed_by_initializer[self._initializer.name] = self
        reg.infeed_by_deleter[self._deleter.name] = self

    # -- public API -----------------------------------------------------------------

    @property
    def initializer(self):
        """The op that creates the feed's iterator; may be taken only once."""
        if self._initializer_accessed:
            raise ValueError(
                "The IPUInfeedQueue `initializer` function can only be accessed once.")
        self._initializer_accessed = True
        if self._initializer is None and tf.executing_eagerly():
            # TF2: the feed's iterator is created (and its types checked) right now.
            self._initializer = tf2_feeds.start_infeed(self)
        return self._initializer

    @property
    def deleter(self):
        """An op that deletes the feed's iterator on the device."""
        return self._deleter

    @property
    def dequeued(self):
        return self._dequeued

    @property
    def number_of_tuple_elements(self):
        """How many loop-body arguments one element unpacks into."""
        spec = self._element_spec
        if isinstance(spec, dict):
            return len(spec)
        if isinstance(spec, (tuple, list)):
            return len(spec)
        return 1

    @property
    def feed_id(self):
        return self._id

    def get_next(self):
        raise ValueError("`get_next()` is now obsolete as the IPUInfeedQueue is now "
                         "automatically dequeued by the loop.")

    # -- emulator internals -----------------------------------------------------------

    def unsupported_dtype_message(self):
        """The SDK's error text if an element has a type the feed cannot carry, else None."""
        for index, spec in enumerate(nest.flatten(self._element_spec)):
            if spec.dtype not in FEEDABLE_DTYPES:
                return ("Unsupported datatype {} on index {} of feed operation {} with feed "
                        "id '{}'. You should use a tf.DataSet.map() operation to cast the "
                        "element into one of {}.".format(
                            _datatype_string(spec.dtype), index,
                            getattr(self._initializer, "name", "IPUCreateDatasetIterator"),
                            self._id, _FEEDABLE_NAMES))
        return None

    def element_bytes(self):
        """Bytes one element moves from the host to the IPU."""
        return sum(int(spec.shape.num_elements()) * spec.dtype.size
                   for spec in nest.flatten(self._element_spec))

    def _dequeue(self):
        """Next element, with the dataset's structure; called by loops inside the body."""
        self._dequeued = True
        if tf2_feeds.in_tf2():
            return tf2_feeds.infeed_dequeue(self)
        program = programs.current_program()
        if program is not None and self not in program.infeeds:
            program.infeeds.append(self)
        # Replicas take consecutive elements in turn (replica r of iteration i: i*R + r).
        with replication.infeed_dequeue(self) as replica_order:
            element = self._iterator.get_next()
            if replica_order is not None:
                replica_order.append(element)
        return element


class IPUOwnedIterator:
    """What ``iter(dataset)`` returns inside an ``IPUStrategy``: an infeed you call
    ``next()`` on inside a ``tf.function``.  Pass it into the function as an argument."""

    def __init__(self, dataset):
        self._infeed = IPUInfeedQueue(dataset)
        self._host = tf2_feeds.start_infeed(self._infeed)
        self._infeed._initializer = self._host  # pylint: disable=protected-access
        self._infeed._initializer_accessed = True  # pylint: disable=protected-access

    @property
    def element_spec(self):
        return self._infeed._element_spec  # pylint: disable=protected-access

    def __iter__(self):
        return self

    def __next__(self):
        return self.get_next()

    def get_next(self):
        if tf.executing_eagerly():
            raise RuntimeError(tf2_feeds.EAGER_NEXT_MESSAGE)
        if tf2_feeds.in_xla_context():
            # Called directly, a jit_compile function is compiled by XLA, which has no CPU
            # kernel for a host iterator; through strategy.run the emulator drops XLA.
            raise RuntimeError(tf2_feeds.XLA_NEXT_MESSAGE)
        self._infeed._dequeued = True  # pylint: disable=protected-access
        return self._host.dequeue()

    def get_next_as_optional(self):
        raise NotImplementedError("IPU Dataset iterator does not support get_next_as_optional().")
