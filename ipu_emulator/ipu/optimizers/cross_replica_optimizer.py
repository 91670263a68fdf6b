"""``CrossReplicaOptimizer``: keep the replicas of a replicated program in sync.

Each replica computes gradients on its own mini-batch.  Before the weight update this
wrapper replaces every gradient by its mean over the replicas, so every replica applies the
same update and their weights stay identical (data parallelism)::

    opt = ipu.optimizers.CrossReplicaOptimizer(tf.train.GradientDescentOptimizer(0.01))
    train = opt.minimize(loss)

With one replica it changes nothing.
"""
import tensorflow as tf

from ipu_emulator.ipu.ops import cross_replica_ops
from .ipu_optimizer import IpuOptimizer


class CrossReplicaOptimizer(IpuOptimizer):
    """Averages gradients across replicas, then applies them with ``opt``."""

    def __init__(self, opt, name="CrossReplicaOptimizer"):
        super().__init__(opt, name=name)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        averaged = []
        for grad, var in grads_and_vars:
            if grad is not None:
                if isinstance(grad, tf.IndexedSlices):
                    grad = tf.convert_to_tensor(grad)
                grad = cross_replica_ops.cross_replica_mean(grad)
            averaged.append((grad, var))
        return self._opt.apply_gradients(averaged, global_step, name)
