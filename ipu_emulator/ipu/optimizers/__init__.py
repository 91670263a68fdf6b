"""``ipu.optimizers``: wrappers that change how a TF1 optimizer's gradients are combined.

* ``CrossReplicaOptimizer`` averages gradients over the replicas (data parallelism).
* ``GradientAccumulationOptimizerV2`` applies one update per ``num_mini_batches`` steps.
* ``CrossReplicaGradientAccumulationOptimizerV2`` does both, averaging only at the update.
"""
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod  # noqa: F401
from .ipu_optimizer import IpuOptimizer  # noqa: F401
from .cross_replica_optimizer import CrossReplicaOptimizer  # noqa: F401
from .gradient_accumulation_optimizer import (  # noqa: F401
    CrossReplicaGradientAccumulationOptimizer,
    CrossReplicaGradientAccumulationOptimizerV2,
    GradientAccumulationOptimizer,
    GradientAccumulationOptimizerV2,
)
