"""``tensorflow.contrib.ipu.ipu_optimizer`` (SDK 0.9.x): where ``CrossReplicaOptimizer``
lived before ``ipu.optimizers``."""
from ipu_emulator.ipu.optimizers import CrossReplicaOptimizer  # noqa: F401
