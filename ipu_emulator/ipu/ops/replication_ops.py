"""``ipu.replication_ops``: which replica is running.

The emulator builds each replica of a replicated program separately (see
``ipu_emulator.runtime.replication``), so the index is a constant of the copy being built:
0 outside replication or in replica 0, ``r`` while replica ``r`` is built.
"""
import tensorflow as tf

from ipu_emulator.runtime import replication


def replication_index(name=None):
    """An int32 scalar holding the index of the replica that runs it."""
    _, replica = replication._active()  # pylint: disable=protected-access
    return tf.constant(replica or 0, dtype=tf.int32, name=name or "ReplicationIndex")


__all__ = ["replication_index"]
