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
# 0.9.x module names of what later became ``ipu.ops.*`` (``ipu.poprand.dropout``...).
from ipu_emulator.ipu.ops import (  # noqa: F401
    embedding_ops as popnn_embedding, internal_ops as internal,
    normalization_ops as popnn_normalization, rand_ops as poprand, rnn_ops as popnn_rnn)
from ipu_emulator.ipu import autoshard, autoshard_cnn, sharded_optimizer, sharding  # noqa: F401

logging.getLogger("ipu_emulator").warning(
    "tensorflow.contrib.ipu has been moved to tensorflow.python.ipu.  This namespace will "
    "be removed in September 2019")


def __getattr__(name):
    # From 0.9.44 the package re-exported all of ``tensorflow.python.ipu``; names that
    # module does not have still raise AttributeError (ImportError for ``from ... import``).
    import ipu_emulator.ipu
    try:
        return getattr(ipu_emulator.ipu, name)
    except AttributeError:
        raise AttributeError("module %r has no attribute %r" % (__name__, name)) from None
