"""How the emulator builds a device loop into a TensorFlow graph.

``ipu.loops``, ``pipelining_ops.pipeline`` and the estimators all build one v1 while loop
whose body runs in the caller's name scope and takes the next infeed element as arguments;
the pieces they share are here:

* ``control_flow_of(graph)`` / ``tf1_control_flow()``: v1 loops and conds in a graph built by
  hand, even in TF2 mode;
* ``enclosing_name_scope(graph, scope)``: the body's ops named as if unlooped, so checkpoints
  move between looped and unlooped programs;
* ``dequeued_arguments(args, infeed_queue)``: the next infeed element appended to a body's
  arguments, as the SDK's loops hand it over.
"""
import contextlib

from tensorflow.python.ops import control_flow_util


def control_flow_of(graph):
    """The control flow to build in ``graph``: a graph built by hand gets v1 loops even in
    TF2 mode (see ``tf1_control_flow``); a tf.function keeps TensorFlow's choice."""
    return contextlib.nullcontext() if graph.building_function else tf1_control_flow()


@contextlib.contextmanager
def tf1_control_flow():
    """Build TF1 control flow (v1 while loops and conds) in this block, even in TF2 mode.

    The emulator's loops, feeds and pipelines are v1 while loops of the graph being built.
    With TF2 behaviour on, ``tf.compat.v1.while_loop`` in a ``tf.Graph`` (a TF1-style script
    run without ``--tf1``, or an estimator's own graph) would build a v2 loop, whose body is
    a separate function graph: an outfeed enqueued there would not be the graph's."""
    previous = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        yield
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = previous


def enclosing_name_scope(graph, scope):
    """Re-enter name scope ``scope`` (e.g. from inside a while loop's ``while/`` scope); ""
    is the top level.  Op names stay unique: the graph numbers clashes as usual."""
    return graph.name_scope(scope + "/" if scope else "")


def append_infeed_element(args, element):
    """Unpack one infeed element into the body's arguments, after the loop-carried ones."""
    if isinstance(element, dict) and all(isinstance(k, str) for k in element):
        return args, dict(element)
    if isinstance(element, (tuple, list)):
        return args + list(element), {}
    return args + [element], {}


def dequeued_arguments(args, infeed_queue):
    """``(args, kwargs)`` of a loop body: ``args`` then the next element of ``infeed_queue``
    (an ``IPUInfeedQueue``; its ``_dequeue`` is what the SDK's loops call too)."""
    return append_infeed_element(args, infeed_queue._dequeue())  # pylint: disable=protected-access


__all__ = ["control_flow_of", "tf1_control_flow", "enclosing_name_scope",
           "append_infeed_element", "dequeued_arguments"]
