"""``ipu.ops``: IPU-specific operations.

In the ``tensorflow.contrib.ipu`` era the device scope lived here (``ipu.ops.ipu_scope``);
it is re-exported so code from that era keeps working.
"""
from ipu_emulator.ipu.scopes import ipu_scope  # noqa: F401
