"""The TensorFlow 2 side of the feeds: infeeds as iterators, outfeeds as host buffers.

``IPUInfeedQueue`` and ``IPUOutfeedQueue`` dispatch here when TensorFlow runs in TF2 mode
(eagerly, or inside a ``tf.function``); their TF1 graph-mode code is untouched.

Infeed.  ``iter(dataset)`` inside an ``IPUStrategy`` returns an ``IPUOwnedIterator``
(``ipu_infeed_queue``): an ``IPUInfeedQueue`` whose iterator lives on the host.
``next(it)`` inside a ``tf.function`` dequeues one element; eagerly it raises the SDK's
error, because on an IPU the elements are only reachable from the device program.

Outfeed.  The first ``enqueue`` traced for a queue creates its host buffer (outside the
function, so every call of the function appends to the same buffer):
* in plain functions a ``FIFOQueue`` on the host, unbounded;
* in functions XLA compiles (``jit_compile=True`` called directly, not through
  ``strategy.run``), where queue ops do not exist, a ring of ``RING_CAPACITY`` slots in
  variables, written with ``scatter_nd_update`` at a counter (assigning to a slice of a
  variable does not compile).  The host drains it on ``dequeue``.
Counting.  An infeed counts the elements it gave (a counter bumped per dequeue); a queue
outfeed knows how many it received (taken so far + its size), a ring keeps its counter.  The
engine run's trip count is the most elements any of its feeds moved.
"""
from __future__ import annotations

import logging
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops
from tensorflow.python.ops import control_flow_util, resource_variable_ops
from tensorflow.python.util import nest

from . import tf2_programs
from .feed_messages import (ENQUEUED_TWICE_MESSAGE, NOT_ENQUEUED_MESSAGE, check_outfeed_tensors,
                            infeed_not_created)

_log = logging.getLogger("ipu_emulator")

EAGER_NEXT_MESSAGE = (
    "Accessing dataset elements can not be accessed in eager mode when inside 'IPUStrategy'. "
    "The dataset elements should be accessed inside of a 'tf.function' with 'jit_compile=True' "
    "set in order to achieve optimal performance. See documentation for detailed examples. If "
    "this behavior is required please set 'enable_dataset_iterators=False' when creating an "
    "'IPUStrategy'.")
XLA_NEXT_MESSAGE = (
    "ipu_emulator: this function is compiled with XLA (jit_compile=True) and reads an IPU "
    "infeed, which XLA on the CPU cannot compile. Run it as the IPU would, with "
    "strategy.run(fn, args=...): the emulator then runs it as plain TensorFlow.")
ITERATE_EAGER_ONLY_MESSAGE = "IPUOutfeedQueue can only be iterated over in eager mode."
ITERATE_ALL_ONLY_MESSAGE = ("IPUOutfeedQueue can only be iterated over if the `outfeed_mode` "
                            "is set to 'IPUOutfeedMode.ALL'.")
RING_CAPACITY = 4096

# The unpatched ``Dataset.__iter__``: the emulator's own iterators must not become infeeds.
plain_dataset_iter = dataset_ops.DatasetV2.__iter__


def in_tf2() -> bool:
    """True when TensorFlow runs TF2-style (eager outside functions), False in TF1 graphs."""
    return tf.compat.v1.executing_eagerly_outside_functions()


def in_xla_context() -> bool:
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _outermost_graph():
    """The function graph being traced at the top (a loop body's graph has an outer graph)."""
    graph = tf.compat.v1.get_default_graph()
    while getattr(graph, "outer_graph", None) is not None and not tf.executing_eagerly():
        outer = graph.outer_graph
        if not getattr(outer, "building_function", False):
            break
        graph = outer
    return graph


def _host_variable(make_initial_value, name):
    """A variable on the host, created outside any function being traced.

    A feed's buffers are made when a function using it is first traced, which may be a later
    trace than the function's first one; ``tf.function`` forbids variables there, so the
    creator chain is bypassed (the variable belongs to the feed, not to the function).
    """
    def direct(next_creator, **kwargs):
        del next_creator
        return resource_variable_ops.default_variable_creator_v2(None, **kwargs)

    with tf.init_scope(), tf.device("/device:CPU:0"), tf.variable_creator_scope(direct):
        return tf.Variable(make_initial_value(), trainable=False, name=name)


def read_count(variable) -> int:
    """A feed's counter, read after every engine run: the bare read op costs a third of
    ``variable.numpy()``, which also records the read for gradient tapes."""
    return int(tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=variable.dtype))


# --- infeed -----------------------------------------------------------------------------

class InfeedCounter:
    """The host-side state of a TF2 infeed: its iterator and how many elements it gave."""

    direction = "in"

    def __init__(self, infeed):
        with tf.init_scope(), tf.device("/device:CPU:0"):
            self.iterator = plain_dataset_iter(infeed._dataset)  # pylint: disable=protected-access
            self.count = _host_variable(lambda: tf.constant(0, tf.int64), "infeed_count")
        self._element_bytes = infeed.element_bytes()
        self.last_seen = 0  # ``moved()`` after the last recorded engine run

    def moved(self) -> int:
        return read_count(self.count)

    def element_bytes(self) -> int:
        return self._element_bytes

    def dequeue(self):
        tf2_programs.note_feed_use(self, _outermost_graph())
        element = self.iterator.get_next()
        self.count.assign_add(1)
        return element


def start_infeed(infeed):
    """``infeed.initializer`` in TF2: check the element types and create the iterator now."""
    message = infeed.unsupported_dtype_message()
    if message is not None:
        raise tf.errors.FailedPreconditionError(None, None, message)
    return InfeedCounter(infeed)


def infeed_dequeue(infeed):
    """``IPUInfeedQueue._dequeue`` inside a TF2 function."""
    host = infeed._initializer  # pylint: disable=protected-access
    if not isinstance(host, InfeedCounter):
        raise infeed_not_created(infeed.feed_id)
    return host.dequeue()


# --- outfeed ----------------------------------------------------------------------------

class _OutfeedBuffer:
    """Host storage of one outfeed in TF2 (see the module docstring)."""

    direction = "out"

    def __init__(self, flat, structure, ring: bool):
        self.structure = structure
        self.dtypes = [t.dtype for t in flat]
        self.shapes = [t.shape for t in flat]
        self.ring = ring
        self.received = 0  # host side: elements already taken out of the buffer
        self.last_seen = 0  # ``moved()`` after the last recorded engine run
        with tf.init_scope(), tf.device("/device:CPU:0"):
            if ring:
                # The ring needs a counter to find its next slot; a queue counts itself.
                self.count = _host_variable(lambda: tf.constant(0, tf.int64), "outfeed_count")
                self.slots = [
                    _host_variable(lambda s=s, d=d: tf.zeros([RING_CAPACITY] + s.as_list(), d),
                                   "outfeed_ring")
                    for s, d in zip(self.shapes, self.dtypes)]
            else:
                self.queue = tf.queue.FIFOQueue(capacity=2 ** 31 - 1, dtypes=self.dtypes,
                                                shapes=self.shapes)

    def moved(self) -> int:
        if self.ring:
            return read_count(self.count)
        return self.received + int(self.queue.size().numpy())

    def element_bytes(self) -> int:
        return sum(int(s.num_elements()) * d.size for s, d in zip(self.shapes, self.dtypes))

    def enqueue(self, flat):
        tf2_programs.note_feed_use(self, _outermost_graph())
        if self.ring:
            slot = tf.math.floormod(self.count, RING_CAPACITY)
            for variable, value in zip(self.slots, flat):
                variable.scatter_nd_update(tf.reshape(slot, [1, 1]), tf.expand_dims(value, 0))
            return self.count.assign_add(1).op
        return self.queue.enqueue(flat)

    def take_all(self):
        """Everything received since the last call, as NumPy arrays [n, ...] per tensor."""
        if self.ring:
            total = self.moved()
            waiting = total - self.received
            if waiting > RING_CAPACITY:
                _log.warning("An outfeed used inside an XLA-compiled function received %d "
                             "elements since the last dequeue; only the last %d are kept.",
                             waiting, RING_CAPACITY)
                waiting = RING_CAPACITY
            slots = [(total - waiting + k) % RING_CAPACITY for k in range(waiting)]
            self.received = total
            return [v.numpy()[slots] for v in self.slots]
        waiting = int(self.queue.size().numpy())
        if waiting == 0:
            return [np.zeros([0] + s.as_list(), d.as_numpy_dtype)
                    for s, d in zip(self.shapes, self.dtypes)]
        values = self.queue.dequeue_many(waiting)
        self.received += waiting
        if not isinstance(values, (list, tuple)):
            values = [values]
        return [v.numpy() for v in values]


class OutfeedState:
    """Per-queue TF2 state: the buffer and the function graphs that enqueued."""

    def __init__(self):
        self.buffer = None
        self.graphs = []  # weak references to the graphs that enqueued (one enqueue each)
        self.last = None  # LAST mode: the most recent element not yet dequeued


def _state(outfeed) -> OutfeedState:
    state = getattr(outfeed, "_tf2_state", None)
    if state is None:
        state = outfeed._tf2_state = OutfeedState()  # pylint: disable=protected-access
    return state


def enqueued(outfeed) -> bool:
    state = _state(outfeed)
    if tf.executing_eagerly():
        return state.buffer is not None
    graph = _outermost_graph()
    return any(ref() is graph for ref in state.graphs)


def enqueue(outfeed, tensors):
    """``IPUOutfeedQueue.enqueue`` in TF2 (inside a ``tf.function``, or eagerly)."""
    state = _state(outfeed)
    if not tf.executing_eagerly():
        graph = _outermost_graph()
        if any(ref() is graph for ref in state.graphs):
            raise ValueError(ENQUEUED_TWICE_MESSAGE)
        state.graphs = [ref for ref in state.graphs if ref() is not None] + [weakref.ref(graph)]
    flat = [tf.convert_to_tensor(t) for t in nest.flatten(tensors)]
    check_outfeed_tensors(flat)
    ring = in_xla_context()
    buffer = state.buffer
    if buffer is None or buffer.dtypes != [t.dtype for t in flat] or \
            [s.as_list() for s in buffer.shapes] != [t.shape.as_list() for t in flat]:
        buffer = state.buffer = _OutfeedBuffer(flat, tensors, ring)
    elif ring and not buffer.ring:
        # The plain buffer's queue ops cannot be compiled: move to a ring for good.
        buffer = state.buffer = _OutfeedBuffer(flat, tensors, ring=True)
    return buffer.enqueue(flat)


def dequeue(outfeed, last_mode: bool, warn_before_run, last_before_run_message):
    """``IPUOutfeedQueue.dequeue()`` in eager mode."""
    state = _state(outfeed)
    buffer = state.buffer
    if buffer is None:
        raise ValueError(NOT_ENQUEUED_MESSAGE)
    values = buffer.take_all()
    if last_mode:
        if len(values[0]):
            state.last = [v[-1] for v in values]
        if state.last is None:
            raise tf.errors.FailedPreconditionError(None, None, last_before_run_message)
        result, state.last = state.last, None
        return nest.pack_sequence_as(buffer.structure, [tf.constant(v) for v in result])
    if len(values[0]) == 0 and buffer.moved() == 0:
        warn_before_run()
    return nest.pack_sequence_as(buffer.structure, [tf.constant(v) for v in values])


def iterate(outfeed, all_mode: bool, dequeue_all):
    """``iter(outfeed)``: one element per enqueue, taken from one eager dequeue."""
    if not tf.executing_eagerly():
        raise RuntimeError(ITERATE_EAGER_ONLY_MESSAGE)
    if not all_mode:
        raise RuntimeError(ITERATE_ALL_ONLY_MESSAGE)
    state = _state(outfeed)
    if state.buffer is None:
        return iter(())
    values = dequeue_all()
    flat = nest.flatten(values)
    count = int(flat[0].shape[0]) if flat else 0
    structure = state.buffer.structure
    return iter([nest.pack_sequence_as(structure, [v[k] for v in flat]) for k in range(count)])
