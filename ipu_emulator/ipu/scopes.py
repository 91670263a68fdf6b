"""Device scopes: where the ops of an IPU program are placed.

On an IPU system ``ipu_scope("/device:IPU:0")`` places ops on the TensorFlow device that
stands for a group of IPUs and marks them for XLA compilation.  In the emulator the ops run
on the host CPU (that is what makes the numerics real); the scope remembers which IPU device
was meant, so ``ipu_compiler.compile`` can check placement and the simulator knows how many
IPUs the program had.

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(model_fn, inputs=[x])
"""
import contextlib
import re
import threading

import tensorflow as tf

from ipu_emulator.runtime import float16, shards

_state = threading.local()

# Unsharded ops of /device:IPU:0 execute on the host's first CPU device.
EXECUTION_DEVICE = "/device:CPU:0"

_IPU_DEVICE = re.compile(r"^(?:/job:[^/]+)?(?:/replica:\d+)?(?:/task:\d+)?/?(?:device:)?IPU:(\d+)$",
                         re.IGNORECASE)


def _ipu_ordinal(device):
    """The N of '/device:IPU:N', or None for a non-IPU device string."""
    if not isinstance(device, str):
        return None
    match = _IPU_DEVICE.match(device.strip())
    return int(match.group(1)) if match else None


def current_ipu_ordinal():
    """Ordinal of the innermost enclosing ``ipu_scope``, or None outside any."""
    stack = getattr(_state, "ordinals", [])
    return stack[-1] if stack else None


def device_scope_ordinal():
    """The N of a plain ``tf.device("/device:IPU:N")`` scope around the code being built, or
    None when the innermost device scope that names a device type names another one (or
    there is none).

    ``ipu_compiler.compile`` accepts any IPU device scope, not only ``ipu_scope``: the SDK
    checks that the ops it built were placed on a device of type ``IPU`` (Graphcore's
    TensorFlow source, ``tensorflow/python/ipu/ipu_compiler.py``, ``compile``; its
    ``pipelining_ops.pipeline`` docstring compiles under ``ops.device("/device:IPU:0")``).
    As TensorFlow merges nested device scopes, the innermost one that sets a device type
    decides; a device function (no string to read) ends the search.
    """
    if tf.executing_eagerly():
        return None
    graph = tf.compat.v1.get_default_graph()
    for spec in graph._device_function_stack.peek_objs():  # pylint: disable=protected-access
        if spec.is_null_merge:
            continue
        if spec.raw_string is None:  # tf.device(None) or a device function
            return None
        parsed = tf.DeviceSpec.from_string(spec.raw_string)
        if parsed.device_type is None:
            continue
        if parsed.device_type.upper() != "IPU":
            return None
        return parsed.device_index or 0
    return None


@contextlib.contextmanager
def placed_on_ipu(ordinal):
    """Place the ops created in this context on the CPU device(s) standing for
    ``/device:IPU:{ordinal}``, and remember that IPU device (``current_ipu_ordinal``)."""
    # IPU ops run on the host CPU device(s) that stand for this IPU device: one CPU device
    # per IPU, so shards (``ipu_shard``) really run on separate devices.
    # Eager code has no graph to place op by op: it runs on the first CPU device.
    placement = (EXECUTION_DEVICE if tf.executing_eagerly()
                 else shards.device_function(ordinal))
    with _ordinal_pushed(ordinal), tf.compat.v1.device(placement):
        yield


@contextlib.contextmanager
def _ordinal_pushed(ordinal):
    stack = getattr(_state, "ordinals", None)
    if stack is None:
        stack = _state.ordinals = []
    stack.append(ordinal)
    try:
        yield
    finally:
        stack.pop()


@contextlib.contextmanager
def ipu_scope(device):
    """Place the ops created in this context on ``device`` (e.g. ``"/device:IPU:0"``).

    New variables are resource variables, as on the IPU.
    """
    ordinal = _ipu_ordinal(device)
    with tf.compat.v1.variable_scope("", use_resource=True) as scope:
        if ordinal is None:
            with _ordinal_pushed(None), tf.compat.v1.device(device):
                yield scope
        else:
            with placed_on_ipu(ordinal):
                yield scope


@contextlib.contextmanager
def ipu_shard(index):
    """Run the ops created in this context on IPU ``index`` of the current IPU device.

    ``index`` is an int or a list of ints.  The ops are tagged with an XLA ``OpSharding``
    attribute (``_XlaSharding``), as in the SDK.  As in the SDK, the scope decides for
    gradient ops too: ``minimize`` called inside ``ipu_shard(1)`` computes every gradient on
    shard 1, unless it is given ``colocate_gradients_with_ops=True`` (each gradient then runs
    with its forward op); gradients built outside every shard scope follow their forward
    ops.  There is no bounds check here: the number of shards is checked against the device's
    IPUs when the program first runs (the next power of two above the highest index used
    must divide the number of IPUs; the rest is replication).

        with ipu.scopes.ipu_shard(0):
            hidden = layers.Dense(256)(images)
        with ipu.scopes.ipu_shard(1):
            logits = layers.Dense(10)(hidden)
    """
    indices = shards.normalise_indices(index)
    graph = tf.compat.v1.get_default_graph()
    # The attribute scope tags every op, also those outside an ipu_scope or colocated with
    # a variable; the ipu_scope's device function places them.  (Gradient ops TensorFlow
    # colocates with their forward ops are re-tagged when the program is compiled:
    # ``shards.settle_gradient_tags``.)
    with shards.shard_context(indices), graph._attr_scope(  # pylint: disable=protected-access
            {shards.SHARDING_ATTR: shards.sharding_attr(indices)}):
        yield


@contextlib.contextmanager
def stochastic_rounding(override):
    """Stochastic rounding on (``True``) or off (``False``) for the ops created in this
    context, whatever ``floating_point_behaviour.esr`` says for the rest of the program.
    The emulator rounds those ops' float16 results as the IPU would (runtime/float16.py)."""
    from tensorflow.core.framework import attr_value_pb2
    graph = tf.compat.v1.get_default_graph()
    with graph._attr_scope({  # pylint: disable=protected-access
            float16.STOCHASTIC_ROUNDING_ATTR: attr_value_pb2.AttrValue(b=bool(override))}):
        yield


@contextlib.contextmanager
def partials_type(override_type):
    """The type of the partial sums of the convolutions and matmuls created in this context
    (``np.float16`` or ``np.float32``).  The emulator accepts both and always accumulates in
    float32, as the IPU does with float32 partials (see docs/fidelity.md)."""
    import numpy as np
    if override_type not in [np.float16, np.float32]:
        raise ValueError("Only support float16, float32, provided %s" % override_type)
    yield
