"""``ipu.math_ops``: ``serialized_matmul``, a matmul the IPU computes in slices to save
memory.  Slicing does not change the product, so the emulator computes ``tf.matmul``."""
import tensorflow as tf


def check_serialization_factor(serialization_factor):
    """The slices an op is serialized into (``serialized_matmul``, embedding lookups and
    layers): at least 1."""
    if serialization_factor < 1:
        raise ValueError("serialization_factor has to be at least 1, but was {}.".format(
            serialization_factor))


def serialized_matmul(a, b, serialization_factor, serialization_dimension,
                      transpose_a=False, transpose_b=False, name=None):
    """``a @ b`` (after the transposes); ``serialization_dimension`` is checked as the SDK
    does and otherwise only affects memory on the IPU."""
    dimensions = ("a_columns", "a_rows_b_columns", "b_rows")
    if serialization_dimension not in dimensions:
        raise ValueError("Invalid serialization_dimension={}, expected one of: {}".format(
            serialization_dimension, ", ".join(dimensions)))
    check_serialization_factor(serialization_factor)
    return tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)


__all__ = ["serialized_matmul"]
