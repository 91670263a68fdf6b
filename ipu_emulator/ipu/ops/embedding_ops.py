"""``ipu.embedding_ops``: embedding lookups.

``embedding_lookup`` is a gather (the IPU splits the table over tiles, ``serialization_factor``
splits the work in time; neither changes the result).  Host embeddings, tables kept in host
memory and streamed to the IPU, are not emulated.
"""
import tensorflow as tf

from ipu_emulator.ipu import _unsupported
from .math_ops import check_serialization_factor

_SDK = "tensorflow.python.ipu.embedding_ops"


def embedding_lookup(params, ids, name=None, serialization_factor=1):
    """Rows ``ids`` of ``params`` (``tf.gather`` on axis 0)."""
    check_serialization_factor(serialization_factor)
    return tf.gather(params, ids, name=name)


globals().update(_unsupported.stubs(_SDK, [
    "HostEmbedding", "HostEmbeddingOptimizerSpec", "SGDHostEmbeddingOptimizerSpec",
    "AdamHostEmbeddingOptimizerSpec", "HostEmbeddingScope", "create_host_embedding"],
    feature="host embeddings (%s)" % _SDK))

__all__ = ["embedding_lookup", "HostEmbedding", "HostEmbeddingOptimizerSpec",
           "SGDHostEmbeddingOptimizerSpec", "AdamHostEmbeddingOptimizerSpec",
           "HostEmbeddingScope", "create_host_embedding"]
