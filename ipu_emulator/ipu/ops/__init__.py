"""``ipu.ops``: IPU-specific operations.

In the ``tensorflow.contrib.ipu`` era the device scopes lived here (``ipu.ops.ipu_scope``,
``ipu.ops.ipu_shard``); they are re-exported so code from that era keeps working.  The
submodule ``ipu.ops.pipelining_ops`` is also reachable as ``ipu.pipelining_ops``.
"""
from ipu_emulator.ipu.scopes import ipu_scope, ipu_shard  # noqa: F401
