"""``tensorflow.contrib.ipu.popops_cross_replica_sum`` (SDK 0.9.x): the cross-replica sum
before ``ipu.cross_replica_ops`` (which adds groups and a mean)."""
from ipu_emulator.ipu.ops.cross_replica_ops import cross_replica_sum  # noqa: F401
