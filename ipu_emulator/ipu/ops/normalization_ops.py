"""``ipu.normalization_ops``: group, layer and instance normalisation (TF1 style: they
create ``beta``/``gamma`` variables in a variable scope, as the SDK's do).

All three normalise each example over groups of channels: ``group_norm`` uses ``groups``
groups, ``layer_norm`` one group of all channels, ``instance_norm`` one group per channel.
With ``strided_channel_grouping`` (the SDK default) channel ``c`` belongs to group
``c % groups``; otherwise groups are contiguous blocks of channels.
"""
import tensorflow as tf


def _norm(inputs, groups, channels_axis, center, scale, epsilon, param_initializers, reuse,
          variables_collections, trainable, scope, default_scope, strided):
    inputs = tf.convert_to_tensor(inputs)
    rank = inputs.shape.rank
    if rank is None or rank < 2:
        raise ValueError("Inputs %s must have a known rank of at least 2." % inputs.name)
    axis = channels_axis % rank
    channels = inputs.shape[axis]
    if channels is None:
        raise ValueError("Inputs %s has undefined channel dimension: %d." % (
            inputs.name, channels_axis))
    groups = channels if groups is None else groups
    if channels % groups != 0:
        raise ValueError("%d channels is not commensurate with %d groups." % (channels, groups))
    initializers = param_initializers or {}
    with tf.compat.v1.variable_scope(scope, default_scope, [inputs], reuse=reuse):
        # Channels last, then split them into (group, member) axes.
        perm = [i for i in range(rank) if i != axis] + [axis]
        x = tf.transpose(inputs, perm)
        batch_and_spatial = tf.shape(x)[:-1]
        if strided:
            grouped_shape = [channels // groups, groups]
            group_axis = rank
        else:
            grouped_shape = [groups, channels // groups]
            group_axis = rank - 1
        x = tf.reshape(x, tf.concat([batch_and_spatial, grouped_shape], 0))
        reduce_axes = [i for i in range(1, rank + 1) if i != group_axis]
        mean, variance = tf.nn.moments(x, reduce_axes, keepdims=True)
        x = (x - mean) * tf.math.rsqrt(variance + epsilon)
        x = tf.reshape(x, tf.concat([batch_and_spatial, [channels]], 0))
        collections = variables_collections or None
        if scale:
            gamma = tf.compat.v1.get_variable(
                "gamma", [channels], inputs.dtype, trainable=trainable,
                initializer=initializers.get("gamma", tf.compat.v1.ones_initializer()),
                collections=collections)
            x = x * gamma
        if center:
            beta = tf.compat.v1.get_variable(
                "beta", [channels], inputs.dtype, trainable=trainable,
                initializer=initializers.get("beta", tf.compat.v1.zeros_initializer()),
                collections=collections)
            x = x + beta
        inverse = [0] * rank
        for position, source in enumerate(perm):
            inverse[source] = position
        return tf.transpose(x, inverse)


def group_norm(inputs, groups=2, channels_axis=-1, center=True, scale=True, epsilon=1.53e-5,
               param_initializers=None, reuse=None, variables_collections=None, training=True,
               trainable=True, scope=None, norm_type=None, strided_channel_grouping=True):
    """Group normalisation over ``groups`` groups of channels."""
    del training, norm_type  # no running statistics: the same computation either way
    return _norm(inputs, groups, channels_axis, center, scale, epsilon, param_initializers,
                 reuse, variables_collections, trainable, scope, "GroupNorm",
                 strided_channel_grouping)


def layer_norm(inputs, channels_axis=-1, center=True, scale=True, epsilon=1.53e-5,
               param_initializers=None, reuse=None, variables_collections=None, training=True,
               trainable=True, scope=None):
    """Layer normalisation: one group holding every channel."""
    del training
    return _norm(inputs, 1, channels_axis, center, scale, epsilon, param_initializers, reuse,
                 variables_collections, trainable, scope, "LayerNorm", True)


def instance_norm(inputs, channels_axis=-1, center=True, scale=True, epsilon=1.53e-5,
                  param_initializers=None, reuse=None, variables_collections=None,
                  training=True, trainable=True, scope=None):
    """Instance normalisation: one group per channel."""
    del training
    return _norm(inputs, None, channels_axis, center, scale, epsilon, param_initializers,
                 reuse, variables_collections, trainable, scope, "InstanceNorm", True)


__all__ = ["group_norm", "layer_norm", "instance_norm"]
