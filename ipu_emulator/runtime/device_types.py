"""Which tensor types may live on the IPU.

The IPU computes in float32, float16, int32 and bool (int64 is lowered to 32 bits).  An
infeed may carry uint8/int8 so data can cross the host link compactly, but such values must
be cast before any other op uses them.  A program that computes with another type fails when
the SDK compiles it, at its first run; the emulator raises at the same moment.

The SDK's own text for this case comes from XLA's kernel registry and is not recorded in our
sources, so this message is the emulator's own (same error type, same moment).
"""
import tensorflow as tf

from . import float16

_DEVICE_TYPES = {tf.float32, tf.float16, tf.int32, tf.int64, tf.bool}
_HANDLE_TYPES = {tf.resource, tf.variant, tf.string}
# Ops that only move or convert a value: narrow feed types may pass through them.
_PLUMBING = {"Cast", "Identity", "IteratorGetNext", "Enter", "Exit", "Switch", "Merge",
             "NextIteration", "Placeholder", "Const", "NoOp", "LoopCond"}


def unsupported_type_message(program):
    """The error text if data entering the program is computed on in a type the IPU lacks.

    Only ops the program's data flows through are checked (from its inputs and infeed
    elements onward); variable initialisers run on the host and are not part of the program.
    """
    for op in _data_path(program):
        if op.type in _PLUMBING or float16.is_marked(op) or float16.is_rounding(op):
            continue  # float16 arithmetic the emulator computes in float64 (runtime/float16.py)
        for tensor in list(op.inputs) + list(op.outputs):
            dtype = tensor.dtype.base_dtype
            if dtype in _DEVICE_TYPES or dtype in _HANDLE_TYPES:
                continue
            return ("Unsupported data type {dtype} in operation '{name}' ({type}) on "
                    "/device:IPU:{ordinal}. The IPU computes with float32, float16, int32 and "
                    "bool tensors: cast the data to one of these before it reaches the IPU, "
                    "for example with tf.data.Dataset.map() or numpy's astype().".format(
                        dtype=dtype.name, name=op.name, type=op.type,
                        ordinal=program.device_ordinal))
    return None


def _data_path(program):
    """Ops of the program reachable from its inputs and infeed elements, in graph order."""
    members = set(program.new_ops)
    frontier = [t.op for t in program.input_tensors]
    frontier += [op for op in program.new_ops if op.type == "IteratorGetNext"]
    reached = set()
    while frontier:
        op = frontier.pop()
        for tensor in op.outputs:
            for consumer in tensor.consumers():
                if consumer in members and consumer not in reached:
                    reached.add(consumer)
                    frontier.append(consumer)
    reached.update(op for op in frontier if op in members)
    return [op for op in program.new_ops if op in reached or op.type == "IteratorGetNext"]
