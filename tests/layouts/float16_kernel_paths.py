"""A float16 training program whose every value is reported as a digest, run by
tests/emulator/programs/test_float16_hosts.py once with oneDNN's kernels and once with
Eigen's (``TF_ENABLE_ONEDNN_OPTS``), the two CPU kernel paths a host may take.

    python tests/layouts/float16_kernel_paths.py tf1|tf2

It trains a small convolutional classifier on random data: a convolution, a batch norm, a
max pool, a dense layer, a loss that sums three terms (AddN), a mean and a sum; in TF1 its
float16 variables are updated by momentum and by Adam through float16 gradient
accumulators, and a float16 running total adds each step's loss; in TF2 a step traced by
``IPUStrategy.run`` applies the gradients by SGD.  It trains in float16 and then in float32
and prints, for each, ``<dtype> finite True`` when every value is finite and ``<dtype> digest
<hex>`` of the losses and every variable after training, after ``onednn True`` or ``onednn
False``: the kernel path TensorFlow took.  The float32 run shows that the two kernel paths
really compute differently.
"""
import hashlib
import sys

import ipu_emulator  # noqa: F401  (before TensorFlow: the legacy Keras switch)
import numpy as np
from tensorflow.python.util import _pywrap_util_port   # which CPU kernel path TF took

MODE = sys.argv[1]
rng = np.random.default_rng(0)
IMAGES = rng.normal(size=(64, 16, 16, 8))
LABELS = rng.integers(0, 10, size=64).astype(np.int32)
BATCH = 16


def model(tf, images, labels, variable):
    """The classifier's loss; ``variable(name, shape, init)`` makes its parameters."""
    kernel = variable("kernel", [3, 3, 8, 32], 0.1)
    scale, offset = variable("scale", [32], 1.0), variable("offset", [32], 0.0)
    hidden = tf.nn.conv2d(images, kernel, 1, "SAME")
    hidden = tf.compat.v1.nn.fused_batch_norm(hidden, tf.cast(scale, tf.float32),
                                              tf.cast(offset, tf.float32), is_training=True)[0]
    hidden = tf.nn.max_pool2d(tf.nn.relu(hidden), 2, 2, "VALID")
    weights = variable("weights", [8 * 8 * 32, 10], 0.02)
    logits = tf.matmul(tf.reshape(hidden, [BATCH, -1]), weights)
    cross_entropy = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    penalty = tf.add_n([tf.reduce_sum(tf.square(weights)), tf.reduce_sum(tf.square(kernel)),
                        tf.reduce_mean(tf.abs(logits))])
    return cross_entropy + tf.cast(1e-3, images.dtype) * penalty


def digest(values):
    hashed = hashlib.sha256()
    for value in values:
        hashed.update(np.ascontiguousarray(value).tobytes())
    return hashed.hexdigest()


def tf1(dtype):
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    with tf.Graph().as_default():
        return tf1_training(tf, dtype)


def tf1_training(tf, dtype):
    from ipu_emulator import ipu

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    dataset = tf.data.Dataset.from_tensor_slices((IMAGES.astype(dtype), LABELS)).repeat().batch(
        BATCH, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def variable(name, shape, init):
        initializer = (tf.random_normal_initializer(stddev=init, seed=len(name)) if init < 1
                       else tf.constant_initializer(init))
        return tf.get_variable(name, shape, dtype, initializer)

    def body(total, images, labels):
        loss = model(tf, images, labels, variable)
        momentum = ipu.optimizers.GradientAccumulationOptimizerV2(
            tf.train.MomentumOptimizer(0.01, 0.9), num_mini_batches=2, dtype=dtype)
        adam = tf.train.AdamOptimizer(1e-3, epsilon=1e-3)
        weights = [v for v in tf.trainable_variables() if v.op.name == "weights"]
        others = [v for v in tf.trainable_variables() if v.op.name != "weights"]
        train = tf.group(momentum.minimize(loss, var_list=others),
                         adam.minimize(loss, var_list=weights))
        with tf.control_dependencies([train]):
            return total + loss, outfeed.enqueue(loss)

    def loop():
        return ipu.loops.repeat(8, body, [tf.constant(0, dtype)], infeed_queue=infeed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(loop)
    losses = outfeed.dequeue()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(infeed.initializer)
        values = []
        for _ in range(3):
            values += sess.run(run) + [sess.run(losses)]
        values += sess.run(tf.global_variables())
    return values


def tf2(dtype):
    import tensorflow as tf
    from ipu_emulator import ipu

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        variables = {}

        def variable(name, shape, init):
            if name not in variables:
                start = (np.random.default_rng(len(name)).normal(size=shape) * init if init < 1
                         else np.full(shape, init))
                variables[name] = tf.Variable(start.astype(dtype), name=name)
            return variables[name]

        def step(images, labels):
            with tf.GradientTape() as tape:
                loss = model(tf, images, labels, variable)
            for v, grad in zip(variables.values(), tape.gradient(loss, list(variables.values()))):
                v.assign_sub(tf.cast(0.01, v.dtype) * grad)
            return loss

        @tf.function
        def program(images, labels):
            return strategy.run(step, args=(images, labels))

        images = IMAGES.astype(dtype)
        losses = [program(images[i:i + BATCH], LABELS[i:i + BATCH]).numpy()
                  for _ in range(3) for i in range(0, len(IMAGES), BATCH)]
    return losses + [v.numpy() for v in variables.values()]


print("onednn", _pywrap_util_port.IsMklEnabled())
for DTYPE in ("float16", "float32"):
    VALUES = tf1(DTYPE) if MODE == "tf1" else tf2(DTYPE)
    print(DTYPE, "finite", all(np.all(np.isfinite(v)) for v in VALUES))
    print(DTYPE, "digest", digest(VALUES))
