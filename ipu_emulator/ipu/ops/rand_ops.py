"""``ipu.rand_ops``: the IPU's random operations (Poprand).

``dropout`` computes on CPU what the IPU op computes: each element of ``x`` is dropped with
probability ``rate`` and the kept ones are scaled by ``1 / (1 - rate)``.  The random bits
differ from an IPU's (the IPU Model does not reproduce them either).
"""
import tensorflow as tf


def dropout(x, seed=None, rate=0.5, seed_modifier=1, noise_shape=None, name=None, scale=None):
    """Drop elements of ``x`` with probability ``rate`` (SDK 3.4 signature).

    ``seed`` is an optional pair of integers; with it the result is repeatable.
    ``seed_modifier`` changes that seed as on the IPU.  ``scale`` (an SDK 1.x argument)
    replaces the ``1 / (1 - rate)`` factor applied to the kept elements.
    """
    if rate >= 1.0 or rate < 0.0:
        raise ValueError("The rate must be in the range [0, 1), but was %s" % rate)
    x = tf.convert_to_tensor(x)
    if seed is not None:
        seed = tf.convert_to_tensor(seed)
        if seed.shape != [2]:
            raise ValueError("Expected the seed to have a shape [2], but got %s." %
                             (str(seed.shape)))
    if noise_shape:
        x_shape = x.get_shape().as_list()
        if len(x_shape) != len(noise_shape):
            raise ValueError("The length of noise_shape must equal the rank of x.")
        for i, j in zip(x_shape, noise_shape):
            if j != 1 and i != j:
                raise ValueError("Dimension mismatch, %d != %d." % (i, j))
    with tf.name_scope(name or "dropout"):
        shape = noise_shape if noise_shape else tf.shape(x)
        if seed is None:
            uniform = tf.random.uniform(shape, dtype=x.dtype)
        else:
            stateless_seed = tf.cast(seed, tf.int32) + tf.constant([0, 1], tf.int32) * (
                seed_modifier - 1)
            uniform = tf.random.stateless_uniform(shape, seed=stateless_seed, dtype=x.dtype)
        keep = tf.cast(uniform >= rate, x.dtype)
        factor = (1.0 / (1.0 - rate)) if scale is None else scale
        return x * keep * tf.cast(factor, x.dtype)


__all__ = ["dropout"]
