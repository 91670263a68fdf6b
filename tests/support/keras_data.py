"""Test helper: a small linear-regression data set for the IPU Keras (TF2) tests, whose
batches of ``BATCH`` four-feature rows a two-layer model learns within a few steps."""
import numpy as np
import tensorflow as tf

BATCH = 8


def arrays(batches=16, seed=0):
    """``batches * BATCH`` rows ``x`` and their targets ``y``, a fixed linear map of ``x``."""
    rng = np.random.default_rng(seed)
    x = rng.random((batches * BATCH, 4), dtype=np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    return x, y


def dataset(batches=16, seed=0):
    """The same rows as a dataset of whole batches."""
    return tf.data.Dataset.from_tensor_slices(arrays(batches, seed)).batch(
        BATCH, drop_remainder=True)
