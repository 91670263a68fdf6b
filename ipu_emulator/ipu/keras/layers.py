"""``ipu.keras.layers`` (SDK 2.x): Keras layers specialised for the IPU.

``Dropout``, ``Embedding`` and ``LayerNorm`` compute what Keras's own layers compute (the IPU
versions are faster kernels; ``serialization_factor`` only saves IPU memory), so they are
Keras's layers here.  The Popnn RNNs, group/instance norm layers and CTC layers are not
emulated: they import, and raise ``NotImplementedError`` when created.
"""
import tensorflow as tf

from ipu_emulator.ipu import _unsupported
from ipu_emulator.ipu.ops.math_ops import check_serialization_factor

_SDK = "tensorflow.python.ipu.keras.layers"

Dropout = tf.keras.layers.Dropout


class Embedding(tf.keras.layers.Embedding):
    """Keras ``Embedding`` accepting the IPU's ``serialization_factor``."""

    def __init__(self, input_dim, output_dim, serialization_factor=1, **kwargs):
        check_serialization_factor(serialization_factor)
        super().__init__(input_dim, output_dim, **kwargs)


class LayerNorm(tf.keras.layers.LayerNormalization):
    """Keras ``LayerNormalization`` under the IPU layer's name."""


globals().update(_unsupported.stubs(_SDK, [
    "GroupNorm", "InstanceNorm", "PopnnLSTM", "LSTM", "PopnnGRU", "GRU", "SerialDense",
    "CTCInferenceLayer", "CTCPredictionsLayer", "RecomputationCheckpoint",
    "AssumeEqualAcrossReplicas", "EffectiveTransformer"]))

__all__ = ["Dropout", "Embedding", "LayerNorm", "GroupNorm", "InstanceNorm", "PopnnLSTM",
           "LSTM", "PopnnGRU", "GRU", "SerialDense", "CTCInferenceLayer",
           "CTCPredictionsLayer", "RecomputationCheckpoint", "AssumeEqualAcrossReplicas",
           "EffectiveTransformer"]
