"""``IPUOutfeedQueue``: stream results from the IPU back to the host during a loop.

A loop body can only hand back its final loop-carried values; anything produced every
iteration (per-step losses, predictions) goes into an outfeed, which the host drains later.

    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    def body(x, y):
        loss = step(x, y)
        return outfeed.enqueue(loss)        # an op: return it from the body
    ...
    dequeue = outfeed.dequeue()            # build once, on the host
    losses = sess.run(dequeue)             # everything enqueued since the last dequeue

``IPUOutfeedMode.ALL`` returns every enqueued value stacked on a new leading axis and empties
the queue; ``IPUOutfeedMode.LAST`` returns only the most recent value.  In the emulator the
queue is a TensorFlow FIFO queue on the host.
"""
import enum
import logging
import weakref

import tensorflow as tf
from tensorflow.python.util import nest

from ipu_emulator.runtime import feed_messages, programs, replication, tf2_feeds

_log = logging.getLogger("ipu_emulator")


class IPUOutfeedMode(enum.Enum):
    """What ``dequeue`` returns: every enqueued value (``ALL``) or only the last (``LAST``)."""
    ALL = "all"
    LAST = "get_last"


class IPUOutfeedQueue:
    """A queue of values enqueued on the IPU and dequeued on the host.

    Accepts every historical signature: ``feed_name`` (positional first argument in SDK 2.0
    and earlier), ``replication_factor``, ``io_batch_size``, ``buffer_depth`` and
    ``optimise_latency``; the names are generated automatically when omitted.
    """

    def __init__(self, feed_name=None, outfeed_mode=None, outfeed_all=None,
                 device_ordinal=None, replication_factor=1, io_batch_size=1,
                 buffer_depth=3, optimise_latency=False):
        del outfeed_all, io_batch_size, optimise_latency
        if isinstance(feed_name, IPUOutfeedMode) or (feed_name is not None and not isinstance(feed_name, str)):
            # SDK >= 2.4 signature: the first positional argument is the mode.
            feed_name, outfeed_mode = None, feed_name
        if outfeed_mode is None:
            outfeed_mode = IPUOutfeedMode.ALL
        if not isinstance(outfeed_mode, IPUOutfeedMode):
            raise ValueError(
                "Expected `outfeed_mode` value to be of `ipu_outfeed_queue.IPUOutfeedMode` "
                "type, but is {}.".format(type(outfeed_mode)))
        if replication_factor < 1:
            raise ValueError("Replication factor must be >= 1")
        feed_messages.check_buffer_depth(buffer_depth)
        self._outfeed_mode = outfeed_mode
        self._device_ordinal = 0 if device_ordinal is None else device_ordinal
        # Used only by programs built before the IPU system is configured (replication.py).
        self._replication_factor = replication_factor
        replication.note_declared_replication_factor(replication_factor)
        self._id = feed_name if feed_name is not None else "outfeed%d" % id(self)
        # Enqueueing is per graph: the same queue object may serve several graphs.
        self._queues = weakref.WeakKeyDictionary()

    @property
    def outfeed_mode(self):
        return self._outfeed_mode

    @property
    def enqueued(self):
        if tf2_feeds.in_tf2():
            return tf2_feeds.enqueued(self)
        return self._graph_queue() is not None

    def _graph_queue(self):
        return self._queues.get(tf.compat.v1.get_default_graph())

    def enqueue(self, tensors):
        """Enqueue a tensor, a list/tuple or a dict of tensors; returns the enqueue op."""
        if tf2_feeds.in_tf2():
            return tf2_feeds.enqueue(self, tensors)
        if self.enqueued:
            raise ValueError(feed_messages.ENQUEUED_TWICE_MESSAGE)
        flat = [tf.convert_to_tensor(t) for t in nest.flatten(tensors)]
        feed_messages.check_outfeed_tensors(flat)
        # In a replicated program every replica enqueues; the values are enqueued together,
        # stacked on a replica axis, once all replicas are built.
        enqueue_op = replication.defer_outfeed_enqueue(self, tensors)
        if enqueue_op is None:
            enqueue_op = self._enqueue_replicated(tensors, flat, flat)
        program = programs.current_program()
        if program is not None:
            if self not in program.outfeeds:
                program.outfeeds.append(self)
            if programs.inside_loop():
                program.outfeeds_in_loop.add(self)
        return enqueue_op

    def _enqueue_replicated(self, structure, flat, enqueued):
        """Create this graph's host queue and the op enqueueing ``enqueued`` into it: one
        replica's ``flat`` tensors, or all replicas' stacked on axis 0 (so ALL-mode dequeues
        are ``[n, replicas, ...]`` and LAST-mode ``[replicas, ...]``)."""
        with tf.control_dependencies(None), tf.device("/device:CPU:0"):
            queue = tf.queue.FIFOQueue(
                capacity=2 ** 31 - 1, dtypes=[t.dtype for t in enqueued],
                shapes=[t.shape for t in enqueued], name=self._id)
        self._queues[tf.compat.v1.get_default_graph()] = _GraphQueue(queue, structure, flat)
        return queue.enqueue(enqueued)

    def dequeue(self, wait_for_completion=False):
        """A host op returning what was enqueued (see the module docstring for shapes)."""
        del wait_for_completion  # The CPU runs the program to completion before this op.
        if tf2_feeds.in_tf2() and tf.executing_eagerly():
            return tf2_feeds.dequeue(self, self._outfeed_mode is IPUOutfeedMode.LAST,
                                     self.warn_dequeue_before_run, self.LAST_BEFORE_RUN_MESSAGE)
        graph_queue = self._graph_queue()
        if graph_queue is None:
            raise ValueError(feed_messages.NOT_ENQUEUED_MESSAGE)
        queue = graph_queue.queue
        with tf.device("/device:CPU:0"):
            values = queue.dequeue_many(queue.size(), name="%s_dequeue" % self._id)
            if not isinstance(values, (list, tuple)):
                values = [values]
            if self._outfeed_mode is IPUOutfeedMode.LAST:
                values = [v[-1] for v in values]
        reg = programs.registry(tf.compat.v1.get_default_graph())
        for value in values:
            reg.outfeed_by_dequeue[value.name] = self
            reg.outfeed_by_dequeue[value.op.name] = self
        graph_queue.dequeues.append(list(values))
        return nest.pack_sequence_as(graph_queue.structure, list(values))

    # A program compiled again at its first run (runtime/late_compile.py) enqueues anew,
    # perhaps with a replica axis: its queue replaces the old one, and every dequeue built
    # from the old queue is built again from the new one.
    def _take_graph_queue(self, graph):
        return self._queues.pop(graph, None)

    def _rebuild_dequeues(self, graph, old_queue):
        """``{old dequeue tensor name: new dequeue tensor}`` after a rebuild."""
        if old_queue is None:
            return {}
        if graph not in self._queues:  # the new build did not enqueue: keep the old queue
            self._queues[graph] = old_queue
            return {}
        replaced = {}
        for old_values in old_queue.dequeues:
            new_values = nest.flatten(self.dequeue())
            replaced.update((old.name, new) for old, new in zip(old_values, new_values))
        return replaced

    def __iter__(self):
        """TF2, eager, ALL mode: one element per enqueue since the last dequeue."""
        return tf2_feeds.iterate(self, self._outfeed_mode is IPUOutfeedMode.ALL, self.dequeue)

    def element_bytes(self):
        """Bytes one enqueue moves from the IPU to the host."""
        graph_queue = self._graph_queue()
        if graph_queue is None:
            return 0
        return sum(int(t.shape.num_elements() or 0) * t.dtype.size for t in graph_queue.flat)

    # Messages used by the session hook when a dequeue finds nothing to return.
    LAST_BEFORE_RUN_MESSAGE = (
        "Trying to get the last value from an outfeed queue before it was executed. Make "
        "sure the outfeed dequeue TensorFlow operation is executed after the enqueue to the "
        "outfeed has completed.")

    def warn_dequeue_before_run(self):
        _log.warning(
            "Trying to dequeue elements from the outfeed queue with id=%s which has not "
            "executed yet. Make sure to execute the program with the outfeed before trying "
            "to dequeue an outfeed.", self._id)


class _GraphQueue:
    def __init__(self, queue, structure, flat):
        self.queue = queue
        self.structure = structure
        self.flat = flat
        self.dequeues = []  # the flat results of every dequeue() built from this queue
