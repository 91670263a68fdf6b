"""``ipu.internal_ops``: ops that steer Poplar (tensor layout, printing from the device).

``remap``/``remap_deduce`` only change a tensor's tile layout, so they are identities here;
``print_tensor`` prints as ``tf.print`` does.  ``fifo`` and the iteration counter depend on
the IPU's execution scheme and are not emulated.
"""
import tensorflow as tf

from ipu_emulator.ipu import _unsupported

_SDK = "tensorflow.python.ipu.internal_ops"


def remap(x, name=None):
    """Identity (on the IPU: spread ``x`` over the tiles)."""
    return tf.identity(x, name=name)


def remap_deduce(x, name=None):
    """Identity (on the IPU: give ``x`` a layout deduced from its inputs)."""
    return tf.identity(x, name=name)


def print_tensor(input, name="", print_gradient=False, name_ref=None):  # pylint: disable=redefined-builtin
    """Print ``input`` when the op runs; returns the print operation."""
    del print_gradient, name_ref
    return tf.print(name, input) if name else tf.print(input)


globals().update(_unsupported.stubs(_SDK, ["fifo", "get_current_iteration_counter"]))

__all__ = ["remap", "remap_deduce", "print_tensor", "fifo", "get_current_iteration_counter"]
