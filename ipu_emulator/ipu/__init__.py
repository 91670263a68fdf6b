"""The emulated ``tensorflow.python.ipu`` package.

Same module tree and names as Graphcore's, so ``from tensorflow.python import ipu`` code
runs unchanged (through ``python -m ipu_emulator run``) and notebooks can write:

    from ipu_emulator import ipu
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
"""
import ipu_emulator  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads Keras)

from ipu_emulator.runtime import session_hook as _session_hook

from . import config
from . import utils
from . import scopes
from . import ipu_compiler
from . import loops
from . import ipu_infeed_queue
from . import ipu_outfeed_queue
from . import ops

_session_hook.install()

__all__ = ["config", "utils", "scopes", "ipu_compiler", "loops", "ipu_infeed_queue",
           "ipu_outfeed_queue", "ops"]
