"""Gradient accumulators: how one mini-batch's gradient is added to its running sum.

The gradient-accumulation optimizers and the pipelines (``pipeline_builder``) keep one
accumulator variable per trained variable; these two functions say what type it has and how
a gradient is added to it, for every ``GradientAccumulationReductionMethod`` (the SDK's enum,
defined by the API front in ``ipu.gradient_accumulation``; read here by its members' names).
"""
import tensorflow as tf


def accumulator_dtype(dtype, variable):
    """The accumulator type for ``variable`` when asked for ``dtype`` (the optimizers' and
    pipelines' ``dtype``/``gradient_accumulation_dtype``): None means the variable's own
    type; otherwise a type (DType, NumPy type, name) or a function of the variable."""
    if dtype is None:
        return variable.dtype.base_dtype
    # NumPy scalar types are callable too: try the value as a type before calling it.
    try:
        return tf.as_dtype(dtype)
    except TypeError:
        if not callable(dtype):
            raise
    return tf.as_dtype(dtype(variable))


def accumulate(accumulator, grad, method, count, seen, in_place=False):
    """The assignment adding one mini-batch's gradient ``grad`` to ``accumulator`` (a
    variable, whose type ``grad`` is cast to) by ``method``, a
    ``GradientAccumulationReductionMethod``: ``count`` mini-batches make one weight update
    and ``seen`` of them were added before this one (numbers or tensors).

    ``SUM`` and ``MEAN`` add (``MEAN`` adds ``grad / count``): with ``in_place`` by
    ``assign_add`` (the pipelines' accumulators), otherwise by assigning the sum (the
    optimizers'), an addition the graph costs count as backward work.  ``RUNNING_MEAN``
    assigns ``acc * n / (n + 1) + grad / (n + 1)``, ``n`` being ``seen``.
    """
    grad = tf.cast(tf.convert_to_tensor(grad), accumulator.dtype.base_dtype)
    if method.name == "RUNNING_MEAN":
        n = tf.cast(seen, grad.dtype)
        return accumulator.assign(accumulator.read_value() * (n / (n + 1)) + grad / (n + 1))
    if method.name == "MEAN":
        grad = grad / tf.cast(count, grad.dtype)
    if in_place:
        return accumulator.assign_add(grad)
    return accumulator.assign(accumulator + grad)


__all__ = ["accumulator_dtype", "accumulate"]
