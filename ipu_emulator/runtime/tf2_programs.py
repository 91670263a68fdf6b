"""TensorFlow 2 programs: one call of a ``tf.function`` run by ``IPUStrategy`` = one engine run.

In TF1 every ``sess.run`` of a compiled program is an engine run (``session_run``).  In TF2
the program is a ``tf.function`` and ``strategy.run(fn, args)`` executes it once on the IPU.
This module

* strips XLA from such functions (``without_xla``): XLA on the CPU is not the IPU's compiler,
  it cannot compile the host iterator ops a feed needs, and it is several times slower than
  plain TensorFlow for convolutions here, so the emulator runs them as plain TensorFlow;
* reads a function's per-iteration cost off its traced graph (``function_cost``): the body of
  its outermost on-device loop (a ``tf.range`` loop becomes a ``While`` op) or, without a
  loop, the whole function;
* counts the loop's real trip count from the feeds the function uses (noted while it is
  traced): the run's iterations are the most elements any of them moved.  A function
  without feeds counts as one iteration, whatever loops it runs inside;
* records an ``EngineRun`` with the host wall time of the call.
"""
from __future__ import annotations

import os
import time
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.eager.polymorphic_function import polymorphic_function
from tensorflow.python.util import nest

from ipu_emulator import record
from ipu_emulator.record import ComputeCost
from . import feed_messages, float16, graph_costs, memory_release

# The attribute of a function graph listing the feeds its program uses.  Each feed (an
# infeed iterator or an outfeed buffer) exposes ``moved()`` (elements moved so far),
# ``element_bytes()`` and ``direction`` ("in" or "out").
_FEEDS_ATTR = "_ipu_emulator_feeds"

# Name scopes of Keras optimizers: ops created under them update the weights.
_OPTIMIZER_SCOPES = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam",
                     "Ftrl", "Lion", "Adafactor", "GradientDescent", "Momentum"}
_WEIGHT_UPDATE_TYPES = ("AssignAddVariableOp", "AssignSubVariableOp", "ResourceApply",
                        "ResourceSparseApply", "Apply")


def note_feed_use(feed, graph) -> None:
    """Called while tracing: the function being traced (``graph``) uses ``feed``."""
    feeds = getattr(graph, _FEEDS_ATTR, None)
    if feeds is None:
        feeds = []
        setattr(graph, _FEEDS_ATTR, feeds)
    if feed not in feeds:
        feeds.append(feed)


def is_function(fn) -> bool:
    return isinstance(fn, (polymorphic_function.Function, tf.types.experimental.ConcreteFunction))


# --- XLA --------------------------------------------------------------------------------

_plain_twins: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def without_xla(fn):
    """``fn`` as a plain (non-XLA) ``tf.function``; other callables pass through.

    A function that has never been called is switched in place (its tracing options are made
    at the first call), so calling it directly later behaves the same; one that already ran
    with XLA gets a plain twin, made once.
    """
    if not isinstance(fn, polymorphic_function.Function) or not fn._jit_compile:  # pylint: disable=protected-access
        return fn
    if getattr(fn, "_variable_creation_config", None) is None:
        fn._jit_compile = False  # pylint: disable=protected-access
        return fn
    twin = _plain_twins.get(fn)
    if twin is None:
        twin = tf.function(fn.python_function, autograph=fn._autograph,  # pylint: disable=protected-access
                           reduce_retracing=fn._reduce_retracing)  # pylint: disable=protected-access
        _plain_twins[fn] = twin
    return twin


# --- costs ------------------------------------------------------------------------------

def _is_backward(op) -> bool:
    return any(part in ("gradients", "gradient_tape") or part.startswith("gradients_")
               for part in op.name.split("/"))


def phase_of(op) -> str:
    """forward / backward / weight_update for an op of a TF2 function graph."""
    if op.type.startswith(_WEIGHT_UPDATE_TYPES):
        return "weight_update"
    parts = op.name.split("/")
    if any(part in _OPTIMIZER_SCOPES for part in parts):
        return "weight_update"
    # A hand-written update (``w.assign_sub(lr * g)``): the ops feeding only the assignment.
    consumers = [c for t in op.outputs for c in t.consumers()]
    if consumers and all(c.type.startswith(_WEIGHT_UPDATE_TYPES) for c in consumers):
        return "weight_update"
    if _is_backward(op):
        return "backward"
    return "forward"


def called_graph(graph, op, attr):
    """The graph of the function ``op`` of ``graph`` calls through its attribute ``attr``
    (``f``, a loop's ``body``, a cond's ``then_branch``...), or None."""
    try:
        called = graph._get_function(op.get_attr(attr).name)  # pylint: disable=protected-access
    except (ValueError, AttributeError):
        return None
    return getattr(called, "graph", None)


def loop_body_graph(graph):
    """The body graph of the first (outermost) ``While`` op of ``graph``, or None."""
    for op in graph.get_operations():
        if op.type in ("While", "StatelessWhile"):
            return called_graph(graph, op, "body")
    return None


def _ops_with_nested_calls(graph, depth=0):
    """The graph's ops, plus those of functions it calls (Keras layers may be functions)."""
    ops = list(graph.get_operations())
    if depth > 4:
        return ops
    nested = []
    for op in ops:
        if op.type in ("PartitionedCall", "StatefulPartitionedCall"):
            called = called_graph(graph, op, "f")
            if called is not None:
                nested += _ops_with_nested_calls(called, depth + 1)
    return ops + nested


def function_cost(concrete) -> ComputeCost:
    """Per-iteration cost of a traced function: its loop body, or all of it without a loop."""
    body = loop_body_graph(concrete.graph)
    ops = _ops_with_nested_calls(body if body is not None else concrete.graph)
    return graph_costs.cost_of(
        graph_costs.walk(ops, phase_of_op=phase_of),
        parameter_bytes=graph_costs.variables_bytes(getattr(concrete, "variables", ())))


def value_bytes(values) -> int:
    """Bytes of the tensors and arrays in a nested structure (other objects count 0)."""
    total = 0
    for item in nest.flatten(values, expand_composites=False):
        shape, dtype = getattr(item, "shape", None), getattr(item, "dtype", None)
        if shape is None or dtype is None:
            continue
        try:
            dtype = tf.as_dtype(dtype)
            count = tf.TensorShape(shape).num_elements()
        except (TypeError, ValueError):
            continue
        if count is not None and dtype not in (tf.resource, tf.variant, tf.string):
            total += int(count) * dtype.size
    return total


# --- engine runs ------------------------------------------------------------------------

class _ProgramInfo:
    """What the emulator learned about one traced program (checked and costed once)."""

    def __init__(self, name, cost, feeds=()):
        self.name = name
        self.cost = cost
        self.feeds = list(feeds)  # read before and after each run: they give the trip count
        self.runs = 0
        # Same signature, same input and output sizes: measured at the first run.
        self.input_bytes = None
        self.output_bytes = None


_programs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


# How ``_signature_key`` tells values of each type apart, decided once per type: it runs on
# every call, right after TensorFlow has cooled the caches, so it does as little as it can.
_BY_IDENTITY, _BY_SHAPE, _BY_ARRAY = 0, 1, 2
_key_kinds: dict = {}


def _key_kind(kind) -> int:
    if issubclass(kind, (tf.Tensor, tf.Variable, np.ndarray, np.generic)):
        return _BY_SHAPE  # cached ``shape`` and ``dtype.name`` (TF and NumPy name dtypes alike)
    if hasattr(kind, "__array__"):
        return _BY_ARRAY  # other array-likes
    return _BY_IDENTITY


def _signature_key(args, kwargs):
    """Tensors and arrays by shape and dtype, anything else by identity.  (A ``TensorShape``
    hashes and compares as the tuple of its dimensions.)"""
    key = []
    for item in nest.flatten((args, kwargs)):
        kind = _key_kinds.get(type(item))
        if kind is None:
            kind = _key_kinds[type(item)] = _key_kind(type(item))
        if kind == _BY_SHAPE:
            key.append((item.shape, item.dtype.name))
        elif kind == _BY_ARRAY:
            key.append((tuple(getattr(item, "shape", ())), str(getattr(item, "dtype", ""))))
        else:
            key.append(id(item))
    return tuple(key)


def program_info(fn, args, kwargs, check_inputs=None, check_outputs=None, key=None):
    """The ``_ProgramInfo`` of ``fn`` for these arguments.  The first time this signature (or
    ``key``) is seen: ``check_inputs(flat_arguments)``, then trace ``fn`` (without running
    it), ``check_outputs(concrete_function)`` and cost it.  Later calls only look it up."""
    per_function = _programs.get(fn)
    if per_function is None:
        per_function = _programs[fn] = {}
    key = _signature_key(args, kwargs) if key is None else key
    info = per_function.get(key)
    if info is None:
        if check_inputs is not None:
            check_inputs(nest.flatten((args, kwargs)))
        # Traced here, its float16 ops computed wide and rounded as they are made, as
        # a compiled TF1 program's are (runtime/float16.py).
        with float16.computing_traced_ops_wide():
            concrete = (fn if isinstance(fn, tf.types.experimental.ConcreteFunction)
                        else fn.get_concrete_function(*args, **kwargs))
        if check_outputs is not None:
            check_outputs(concrete)
        info = per_function[key] = _ProgramInfo(_function_name(fn), function_cost(concrete),
                                                getattr(concrete.graph, _FEEDS_ATTR, ()))
    return info


def _function_name(fn) -> str:
    return getattr(fn, "name", None) or getattr(fn, "__name__", "tf_function")


def execute(info, fn, args=(), kwargs=None, iterations=None, infeed_bytes=None,
            outfeed_bytes=None, stage_fields=None):
    """Run ``fn(*args, **kwargs)`` as one engine run of the program ``info`` and record it.

    Trip count and feed bytes come from the feeds the call moved, unless the caller knows
    them (Keras knows its steps per execution and its batches).  ``stage_fields()``, if
    given, returns the run's other fields (a pipelined Keras model's stages)."""
    kwargs = kwargs or {}
    started = time.perf_counter()
    try:
        with memory_release.engine_run():
            result = fn(*args, **kwargs)
    except tf.errors.OutOfRangeError as error:
        # TensorFlow's "End of sequence" from an infeed's iterator: the SDK's text instead.
        if any(getattr(feed, "direction", None) == "in" for feed in info.feeds):
            raise tf.errors.OutOfRangeError(
                None, None, feed_messages.INFEED_OUT_OF_RANGE_MESSAGE) from error
        raise
    host_seconds = time.perf_counter() - started
    if info.input_bytes is None:
        info.input_bytes, info.output_bytes = value_bytes((args, kwargs)), value_bytes(result)
    # A program without feeds skips the feed bookkeeping: it runs once per call, per step.
    moved, fed_in, fed_out, sent = _feed_traffic(info.feeds) if info.feeds else (1, 0, 0, 0)
    run = record.EngineRun(
        program=info.name,
        iterations=moved if iterations is None else iterations,
        step_cost=info.cost,
        infeed_bytes_per_iteration=fed_in if infeed_bytes is None else infeed_bytes,
        outfeed_bytes_per_iteration=fed_out if outfeed_bytes is None else outfeed_bytes,
        input_bytes=info.input_bytes,
        output_bytes=info.output_bytes,
        host_seconds=host_seconds,
        first_run=info.runs == 0,
        synthetic_data="--use_synthetic_data" in os.environ.get("TF_POPLAR_FLAGS", ""),
        # Keras (the caller that knows its iterations) feeds itself: its outfeed is not counted.
        outfeed_enqueues=sent if iterations is None else None,
        **(stage_fields() if stage_fields is not None else {}),
    )
    record.add_engine_run(run)
    info.runs += 1
    return result


def _feed_traffic(feeds):
    """Since the last recorded run: the most elements any feed moved (1 if none moved), the
    bytes per element of the infeeds and of the outfeeds that moved any, and the most elements
    any outfeed received (0 if none did)."""
    used = []
    for feed in feeds:
        # ``last_seen`` is where the feed stood after the last recorded run (reading it
        # again would cost a device round trip per feed); elements moved by calls made
        # outside ``strategy.run`` are counted in the next recorded run.
        now = feed.moved()
        if now > feed.last_seen:
            used.append((feed, now - feed.last_seen))
        feed.last_seen = now
    return (max((count for _, count in used), default=1),
            sum(f.element_bytes() for f, _ in used if f.direction == "in"),
            sum(f.element_bytes() for f, _ in used if f.direction == "out"),
            max((count for f, count in used if f.direction == "out"), default=0))
