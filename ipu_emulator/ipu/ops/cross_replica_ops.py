"""Collectives between the replicas of a replicated program.

When a device has more IPUs than the program has shards, every replica runs the same program
on its own data (Graphcore's TensorFlow user guide on replication).  These ops combine a value across the replicas, e.g. to
average gradients so that the replicas' weights stay identical::

    total = ipu.cross_replica_ops.cross_replica_sum(local_count)
    mean_grad = ipu.cross_replica_ops.cross_replica_mean(grad)

With one replica they return their input.  ``replica_group_size=k`` reduces over groups of
``k`` consecutive replicas instead of all of them (``k`` must divide the replica count; the
program is refused at its first run otherwise).
"""
import tensorflow as tf

from ipu_emulator.runtime import replication


def cross_replica_sum(x, replica_group_size=None, name=None):
    """The sum of ``x`` over the replicas (same shape and dtype as ``x``)."""
    return replication.cross_replica(x, mean=False, replica_group_size=replica_group_size,
                                     name=name)


def cross_replica_mean(x, replica_group_size=None, name=None):
    """The mean of ``x`` over the replicas (same shape and dtype as ``x``)."""
    return replication.cross_replica(x, mean=True, replica_group_size=replica_group_size,
                                     name=name)


def assume_equal_across_replicas(tensors, inplace=False):
    """Mark ``tensors`` as equal on every replica (an identity: the emulator's replicas
    need no such hint).  Returns copies unless ``inplace``."""
    if inplace:
        return tensors
    return tf.nest.map_structure(tf.identity, tensors)
