"""The emulated ``tensorflow.python.ipu`` package.

Same module tree and names as Graphcore's, so ``from tensorflow.python import ipu`` code
runs unchanged (through ``python -m ipu_emulator run``) and notebooks can write:

    from ipu_emulator import ipu
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
"""
import ipu_emulator  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads Keras)

from ipu_emulator.runtime import autograph_rules as _autograph_rules
from ipu_emulator.runtime import graph_rewrites as _graph_rewrites
from ipu_emulator.runtime import session_run as _session_run
from ipu_emulator.runtime import shards as _shards

from . import config
from . import utils
from . import scopes
from . import sharding
from . import ipu_compiler
from . import loops
from . import ipu_infeed_queue
from . import ipu_outfeed_queue
from . import ops
from .ops import pipelining_ops  # ``ipu.pipelining_ops``, re-exported from ``ipu.ops`` as in the SDK
from .ops import cross_replica_ops  # ``ipu.cross_replica_ops``, likewise
from . import gradient_accumulation
from . import optimizers
from . import ipu_run_config
from . import ipu_estimator
from . import ipu_pipeline_estimator
from . import ipu_session_run_hooks
from . import ipu_strategy
from . import keras
from . import _unemulated

# The SDK's ``ipu.ops`` modules are also attributes of ``ipu`` (``ipu.rand_ops.dropout``),
# and so are the optimizer modules (SDK 1.x kept them there: ``ipu.sharded_optimizer``).
from .ops import (  # noqa: E402
    embedding_ops, functional_ops, internal_ops, math_ops, nn_ops, normalization_ops,
    rand_ops, replication_ops)
from .ops.functional_ops import outlined_function  # noqa: E402
from .optimizers import (  # noqa: E402
    cross_replica_optimizer, gradient_accumulation_optimizer, ipu_optimizer,
    map_gradient_optimizer, sharded_optimizer)

# Stub-only SDK modules (horovod, serving, f8_ops...): created here, bound on their packages;
# those under ``ops`` and ``optimizers`` are re-exported on ``ipu`` like the real ones.
_unemulated.register()
for _name in _unemulated.MODULES:
    _package, _, _module = _name.rpartition(".")
    if _package in ("ops", "optimizers"):
        globals()[_module] = getattr(globals()[_package], _module)
del _name, _package, _module

_session_run.install()
_shards.install()  # sessions get one CPU device per configured IPU (real shard placement)
_graph_rewrites.install()  # tf.functions run without Grappler's rewrites, as sessions do
_autograph_rules.install()  # AutoGraph calls the SDK's modules unconverted, as TensorFlow's own

__all__ = ["config", "utils", "scopes", "sharding", "ipu_compiler", "loops", "ipu_infeed_queue",
           "ipu_outfeed_queue", "ops", "pipelining_ops", "ipu_run_config", "ipu_estimator",
           "ipu_pipeline_estimator", "ipu_session_run_hooks", "ipu_strategy", "keras",
           "cross_replica_ops", "gradient_accumulation", "optimizers", "embedding_ops",
           "functional_ops", "internal_ops", "math_ops", "nn_ops", "normalization_ops",
           "rand_ops", "replication_ops", "outlined_function", "cross_replica_optimizer",
           "gradient_accumulation_optimizer", "ipu_optimizer", "map_gradient_optimizer",
           "sharded_optimizer"] + sorted(
               {name.rpartition(".")[2] for name in _unemulated.MODULES
                if name.count(".") == 0 or name.startswith(("ops.", "optimizers."))})
