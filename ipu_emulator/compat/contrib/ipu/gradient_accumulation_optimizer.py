"""``tensorflow.contrib.ipu.gradient_accumulation_optimizer`` (SDK 0.9.x): the first
gradient accumulation optimizers, now in ``ipu.optimizers``."""
from ipu_emulator.ipu.optimizers import (  # noqa: F401
    CrossReplicaGradientAccumulationOptimizer,
    GradientAccumulationOptimizer,
)
