"""``ipu.optimizers``: wrappers that change how a TF1 optimizer's gradients are combined.

* ``CrossReplicaOptimizer`` averages gradients over the replicas (data parallelism).
* ``GradientAccumulationOptimizerV2`` applies one update per ``num_mini_batches`` steps.
* ``CrossReplicaGradientAccumulationOptimizerV2`` does both, averaging only at the update.
* ``ShardedOptimizer`` and ``MapGradientOptimizer`` (colocated gradients; mapped gradients).

The submodules are also the SDK's ``ipu.cross_replica_optimizer``, ``ipu.sharded_optimizer``...
(``tensorflow.python.ipu/__init__`` re-exports them, and SDK 1.x kept them at the top).
"""
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod  # noqa: F401
from . import (  # noqa: F401
    cross_replica_optimizer, gradient_accumulation_optimizer, ipu_optimizer,
    map_gradient_optimizer, sharded_optimizer)
from .ipu_optimizer import IpuOptimizer  # noqa: F401
from .map_gradient_optimizer import MapGradientOptimizer  # noqa: F401
from .sharded_optimizer import ShardedOptimizer  # noqa: F401
from .cross_replica_optimizer import CrossReplicaOptimizer  # noqa: F401
from .gradient_accumulation_optimizer import (  # noqa: F401
    CrossReplicaGradientAccumulationOptimizer,
    CrossReplicaGradientAccumulationOptimizerV2,
    GradientAccumulationOptimizer,
    GradientAccumulationOptimizerV2,
)
