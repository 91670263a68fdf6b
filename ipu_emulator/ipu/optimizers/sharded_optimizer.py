"""``ShardedOptimizer``: for a model split over IPUs with ``ipu_shard``, computes each
gradient on the shard of the op it differentiates (``colocate_gradients_with_ops``).
SDK 1.x scripts import it as ``ipu.sharded_optimizer`` (0.9.x: contrib's)."""
from .ipu_optimizer import IpuOptimizer


class ShardedOptimizer(IpuOptimizer):
    """Wraps ``optimizer``; gradients are colocated with the ops they belong to."""

    def __init__(self, optimizer, name="ShardedOptimizer"):
        super().__init__(optimizer, name=name)

    def compute_gradients(self, loss, var_list=None, **kwargs):  # pylint: disable=arguments-differ
        kwargs["colocate_gradients_with_ops"] = True
        return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)
