"""``tensorflow.contrib.ipu``: the 2019 home of the IPU API (SDK 0.9.x).

From SDK 0.9.44 it only re-exported ``tensorflow.python.ipu`` and logged that it had moved;
the emulator does the same, with the contrib-era names the tutorials use
(``ops.ipu_scope``, ``ipu_compiler``, ``loops``, ``ipu_infeed_queue``...).
"""
import logging

from ipu_emulator.ipu import (  # noqa: F401
    config, utils, scopes, ipu_compiler, loops, ipu_infeed_queue, ipu_outfeed_queue, ops)
# Contrib-era homes of the optimizers and the cross-replica sum (tutorial 4 names
# ``tensorflow.contrib.ipu.CrossReplicaOptimizer``).
from . import gradient_accumulation_optimizer, ipu_optimizer, popops_cross_replica_sum  # noqa: F401
from .ipu_optimizer import CrossReplicaOptimizer  # noqa: F401

logging.getLogger("ipu_emulator").warning(
    "tensorflow.contrib.ipu has been moved to tensorflow.python.ipu.  This namespace will "
    "be removed in September 2019")
