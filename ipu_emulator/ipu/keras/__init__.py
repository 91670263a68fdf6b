"""IPU Keras: Keras models built inside an ``IPUStrategy`` scope gain the IPU extensions.

``extensions``    the methods added to those models (``set_gradient_accumulation_options``,
                  ``set_infeed_queue_options``, ...) and the rules ``compile``/``fit`` follow
``pipelining``    pipeline stages (``PipelineStage``, stage assignments) and the checks of
                  a pipelined model's options (the runtime's ``keras_stages`` plans and
                  costs its stages)
``data_adapter`` the checks the IPU makes on the data given to ``fit``/``evaluate``/``predict``
``layers``        the SDK 2.x ``ipu.keras.layers`` (``Dropout``, ``Embedding``, ``LayerNorm``
                  emulated; the rest are stubs)
``losses``, ``optimizers`` (SDK 2.x) are stub modules made by ``ipu._unemulated``.
"""
import importlib

from ipu_emulator.ipu import _unsupported
from . import data_adapter
from . import extensions

from .pipelining import (FunctionalLayerPipelineStageAssignment, PipelineStage,
                         SequentialLayerPipelineStageAssignment)

# The SDK's extension classes and the IPU model classes of SDK 2.0-2.1 are not emulated:
# Keras models built in an IPUStrategy scope gain the extensions (see ``extensions``).
_NOT_EMULATED = [
    "FunctionalExtension", "SequentialExtension", "Model", "Sequential",
    "PipelineModel", "PipelineSequential", "SequentialPipelineModel"]
globals().update(_unsupported.stubs("tensorflow.python.ipu.keras", _NOT_EMULATED))
CTCLoss = _unsupported.stub("tensorflow.python.ipu.keras.losses.CTCLoss",
                           "tensorflow.python.ipu.keras.losses.CTCLoss")

__all__ = ["data_adapter", "extensions", "pipelining", "layers", "CTCLoss", "PipelineStage",
           "FunctionalLayerPipelineStageAssignment",
           "SequentialLayerPipelineStageAssignment"] + _NOT_EMULATED


def __getattr__(name):
    # ``layers`` builds on tf.keras: loaded on first use, so importing the IPU API stays
    # as quick as it was for scripts that never touch IPU Keras layers.
    if name == "layers":
        return importlib.import_module(__name__ + ".layers")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
