"""``ipu.ops``: IPU-specific operations (the SDK's ``ipu.ops.*`` modules; the package
``ipu`` re-exports each as ``ipu.rand_ops``, ``ipu.nn_ops``...).

In the ``tensorflow.contrib.ipu`` era the device scopes lived here (``ipu.ops.ipu_scope``,
``ipu.ops.ipu_shard``); they are re-exported so code from that era keeps working.  The
submodule ``ipu.ops.pipelining_ops`` is also reachable as ``ipu.pipelining_ops``.
"""
from ipu_emulator.ipu.scopes import ipu_scope, ipu_shard  # noqa: F401
from . import (  # noqa: F401,E402
    cross_replica_ops, embedding_ops, functional_ops, internal_ops, math_ops, nn_ops,
    normalization_ops, rand_ops, replication_ops)
