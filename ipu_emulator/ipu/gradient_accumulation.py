"""``GradientAccumulationReductionMethod``: how accumulated gradients are combined.

Shared by the gradient-accumulation optimizers and pipelines (as ``ipu.gradient_accumulation``
in the SDK, re-exported by ``ipu.optimizers``); the accumulators themselves are the
runtime's (``ipu_emulator.runtime.gradient_accumulators``).

* ``SUM`` adds the raw gradients of the mini-batches.
* ``MEAN`` scales each gradient by ``1 / count`` before adding, giving their mean.
* ``RUNNING_MEAN`` keeps a running mean: ``acc = acc * n / (n + 1) + g / (n + 1)``.
"""
import enum


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
