"""``ipu.nn_ops``: Popnn activations and related ops, computed with stock TensorFlow.

The IPU versions are faster kernels of the same functions; the emulator computes the values
(``gelu`` uses the tanh approximation, as Popnn does).  ``multi_conv`` only schedules
convolutions in parallel on the IPU, so it leaves the function unchanged here.
"""
import tensorflow as tf

from ipu_emulator.ipu import _unsupported

_SDK = "tensorflow.python.ipu.nn_ops"


def gelu(x, name=None):
    """GELU (tanh approximation)."""
    return tf.nn.gelu(x, approximate=True, name=name)


def hard_sigmoid(x, name=None):
    """``max(0, min(1, 0.2 * x + 0.5))``."""
    with tf.name_scope(name or "hard_sigmoid"):
        x = tf.convert_to_tensor(x)
        return tf.clip_by_value(0.2 * x + 0.5, 0.0, 1.0)


def swish(x, name=None):
    """``x * sigmoid(x)``."""
    with tf.name_scope(name or "swish"):
        return tf.nn.silu(x)


def multi_conv(func=None, options=None):
    """Decorator running the convolutions in ``func`` in parallel on the IPU: the results
    are those of ``func``, so here it checks ``options`` and returns ``func``."""
    def decorated(inner_func):
        def multi_conv_wrapper(*args):
            if options is not None and not isinstance(options, dict):
                raise TypeError("Expected the multi_conv `options` to be a `dict`, but got %s "
                                "instead." % (str(options)))
            return inner_func(*args)
        return multi_conv_wrapper

    return decorated(func) if func is not None else decorated


globals().update(_unsupported.stubs(_SDK, [
    "ctc_loss_v2", "ctc_loss_with_logits", "ctc_beam_search_decoder",
    "ctc_beam_search_decoder_with_log_probs", "sampled_softmax_loss", "nce_loss"]))

__all__ = ["gelu", "hard_sigmoid", "swish", "multi_conv", "ctc_loss_v2",
           "ctc_loss_with_logits", "ctc_beam_search_decoder",
           "ctc_beam_search_decoder_with_log_probs", "sampled_softmax_loss", "nce_loss"]
