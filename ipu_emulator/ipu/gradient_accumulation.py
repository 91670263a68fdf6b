"""``GradientAccumulationReductionMethod``: how accumulated gradients are combined.

Shared by the gradient-accumulation optimizers and pipelines (as ``ipu.gradient_accumulation``
in the SDK, re-exported by ``ipu.optimizers``).

* ``SUM`` adds the raw gradients of the mini-batches.
* ``MEAN`` scales each gradient by ``1 / count`` before adding, giving their mean.
* ``RUNNING_MEAN`` keeps a running mean: ``acc = acc * n / (n + 1) + g / (n + 1)``.
"""
import enum

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
    if method == GradientAccumulationReductionMethod.RUNNING_MEAN:
        n = tf.cast(seen, grad.dtype)
        return accumulator.assign(accumulator.read_value() * (n / (n + 1)) + grad / (n + 1))
    if method == GradientAccumulationReductionMethod.MEAN:
        grad = grad / tf.cast(count, grad.dtype)
    if in_place:
        return accumulator.assign_add(grad)
    return accumulator.assign(accumulator + grad)


class GradientAccumulationReductionMethod(enum.Enum):
    SUM = 0
    MEAN = 1
    RUNNING_MEAN = 2

    @classmethod
    def parse(cls, value):
        """The member for ``value``: a member, or its name in any letter case."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            for member in cls:
                if member.name == value.upper():
                    return member
        raise ValueError(
            "Cannot parse {} as one of GradientAccumulationReductionMethod. Valid values are: "
            "{}.".format(value, ", ".join(member.name for member in cls)))
