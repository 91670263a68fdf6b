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

_state = threading.local()

# All emulated IPU devices execute on the host's first CPU device.
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


@contextlib.contextmanager
def ipu_scope(device):
    """Place the ops created in this context on ``device`` (e.g. ``"/device:IPU:0"``).

    New variables are resource variables, as on the IPU.
    """
    ordinal = _ipu_ordinal(device)
    placement = EXECUTION_DEVICE if ordinal is not None else device
    stack = getattr(_state, "ordinals", None)
    if stack is None:
        stack = _state.ordinals = []
    stack.append(ordinal)
    try:
        with tf.compat.v1.variable_scope("", use_resource=True) as scope:
            with tf.device(placement):
                yield scope
    finally:
        stack.pop()
