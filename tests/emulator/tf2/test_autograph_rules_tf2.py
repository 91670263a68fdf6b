"""TF2: AutoGraph calls the emulated SDK as it is, as it calls Graphcore's (part of the
``tensorflow`` package, on AutoGraph's do-not-convert list): ``runtime/autograph_rules.py``.
A loop body handed to ``loops.repeat`` is traced as plain Python, as the SDK's while loop
traces it; the learner's own ``tf.function`` is still converted."""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.impl import conversion

from ipu_emulator.code_exercises import nb03_feeds
from ipu_emulator.ipu import ipu_infeed_queue, ipu_strategy, loops
from ipu_emulator.runtime import tf2_feeds

pytestmark = pytest.mark.tf2


def test_the_sdk_modules_are_called_unconverted_and_the_reference_solutions_are_not():
    assert conversion.is_allowlisted(loops.repeat)
    assert conversion.is_allowlisted(ipu_strategy.IPUStrategyV1().run)
    assert conversion.is_allowlisted(tf2_feeds.infeed_dequeue)
    # Written as a learner writes, converted as the learner's code is.
    assert not conversion.is_allowlisted(nb03_feeds.loss_and_update)


def test_a_repeat_body_is_traced_as_plain_python():
    """A tensor-valued ``if`` in the body fails as it does in the SDK's loop, which traces
    the body unconverted: AutoGraph would have made it a ``tf.cond``."""
    infeed = ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.from_tensor_slices(np.arange(3, dtype=np.float32)))
    infeed.initializer  # pylint: disable=pointless-statement  (creates the iterator in TF2)

    def body(total, x):
        if x > 1.0:
            return total + x
        return total

    @tf.function
    def program():
        return loops.repeat(3, body, [0.0], infeed)

    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError, match="as a Python `bool`"):
        program()


def test_the_learners_function_is_still_converted():
    """A tensor-valued ``if`` in the learner's ``tf.function`` becomes a ``tf.cond``."""
    @tf.function
    def clipped(x):
        if tf.reduce_sum(x) > 1.0:
            x = x / tf.reduce_sum(x)
        return x

    np.testing.assert_allclose(clipped(tf.constant([2.0, 2.0])).numpy(), [0.5, 0.5])
    np.testing.assert_allclose(clipped(tf.constant([0.2, 0.3])).numpy(), [0.2, 0.3])
