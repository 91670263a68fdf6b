"""Host wall time of float16 training against the same model in float32, in one run.

A ResNet-8 (a 3x3 convolution, three residual blocks of two 3x3 convolutions with batch
norm, global average pooling, a dense layer) trains on the CIFAR-10 sample, batch 32, in an
on-device loop (``loops.repeat`` + ``IPUInfeedQueue``), twice: once computing in float16
(float32 master weights cast to float16 by a custom getter, the loss scaled by 128), once in
float32.  The two run interleaved, round after round, so machine noise hits both alike, and
the median times per step are compared as a ratio; a third copy runs in float16 computed in
float32 (``IPU_EMULATOR_FLOAT16=fast``), a fourth with
stochastic rounding on (``floating_point_behaviour.esr``).  Stock TensorFlow's CPU kernels for
float16 are many times slower than float32; the emulator computes float16 programs in
float64 (the same bits on every host), or in float32 where asked, and rounds to float16
where the IPU stores float16 (runtime/float16.py).

Usage:  python bench/float16.py [--steps N] [--rounds R] [--raw]
(--raw: also time the float16 model on TensorFlow's own float16 kernels, not rewritten.)
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("IPU_EMULATOR_DATA", "sample")

import numpy as np  # noqa: E402

import ipu_emulator  # noqa: E402,F401  (legacy Keras switch before TensorFlow loads)
import tensorflow.compat.v1 as tf  # noqa: E402

tf.disable_v2_behavior()
from ipu_emulator import ipu  # noqa: E402
from ipu_emulator.data import datasets  # noqa: E402
from ipu_emulator.runtime import float16 as float16_compute  # noqa: E402

BATCH = 32
LOSS_SCALING = 128.0


def _dataset():
    (x_train, y_train), _ = datasets.cifar10.load_data()
    images = x_train.astype(np.float32) / 255.0
    labels = y_train.reshape(-1).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
        BATCH, drop_remainder=True)


def _master_weights(getter, name, *args, dtype=None, **kwargs):
    """Variables are float32; a float16 model reads them cast to float16."""
    variable = getter(name, *args, dtype=tf.float32, **kwargs)
    return tf.cast(variable, dtype) if dtype != tf.float32 else variable


def _conv(x, channels, kernel, stride, name):
    with tf.variable_scope(name):
        weights = tf.get_variable(
            "kernel", [kernel, kernel, x.shape[-1], channels], dtype=x.dtype,
            initializer=tf.glorot_uniform_initializer())
        return tf.nn.conv2d(x, weights, [1, stride, stride, 1], "SAME")


def _norm(x, name):
    with tf.variable_scope(name):
        channels = x.shape[-1]
        scale = tf.get_variable("gamma", [channels], tf.float32, tf.ones_initializer())
        offset = tf.get_variable("beta", [channels], tf.float32, tf.zeros_initializer())
        return tf.nn.fused_batch_norm(x, scale, offset, is_training=True)[0]


def _block(x, channels, stride, name):
    with tf.variable_scope(name):
        shortcut = x
        if stride != 1 or x.shape[-1] != channels:
            shortcut = _conv(x, channels, 1, stride, "shortcut")
        y = tf.nn.relu(_norm(_conv(x, channels, 3, stride, "conv1"), "norm1"))
        y = _norm(_conv(y, channels, 3, 1, "conv2"), "norm2")
        return tf.nn.relu(y + shortcut)


def resnet8(images, dtype):
    x = tf.cast(images, dtype)
    x = tf.nn.relu(_norm(_conv(x, 16, 3, 1, "stem"), "stem_norm"))
    for i, (channels, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
        x = _block(x, channels, stride, "block%d" % i)
    x = tf.reduce_mean(x, axis=[1, 2])
    weights = tf.get_variable("dense", [x.shape[-1], 10], dtype=dtype)
    return tf.cast(tf.matmul(x, weights), tf.float32)


def build(dtype, steps):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_dataset())

    def body(total, images, labels):
        with tf.variable_scope("model", custom_getter=_master_weights, reuse=tf.AUTO_REUSE):
            logits = resnet8(images, dtype)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        optimizer = tf.train.MomentumOptimizer(0.01, 0.9)
        grads = optimizer.compute_gradients(loss * LOSS_SCALING)
        grads = [(g / LOSS_SCALING, v) for g, v in grads]
        return total + loss, optimizer.apply_gradients(grads)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, body, [0.0], infeed))
    return [infeed.initializer], program


def _session(dtype, steps):
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(1)
        initializers, program = build(dtype, steps)
        init = [tf.global_variables_initializer()] + initializers
    sess = tf.Session(graph=graph)
    sess.run(init)
    return sess, program


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--raw", action="store_true")
    args = parser.parse_args()
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()

    variants = {"float32": _session(tf.float32, args.steps),
                "float16": _session(tf.float16, args.steps)}
    # Built with IPU_EMULATOR_FLOAT16=fast: computed in float32 by TensorFlow's kernels.
    os.environ[float16_compute.SPEED_SETTING] = "fast"
    try:
        variants["float16, IPU_EMULATOR_FLOAT16=fast"] = _session(tf.float16, args.steps)
    finally:
        os.environ.pop(float16_compute.SPEED_SETTING)
    cfg.floating_point_behaviour.esr = ipu.config.StochasticRoundingBehaviour.ON
    cfg.configure_ipu_system()
    variants["float16, stochastic rounding"] = _session(tf.float16, args.steps)
    if args.raw:
        with float16_compute.disabled():
            variants["float16, TF's own kernels"] = _session(tf.float16, args.steps)
    times = {name: [] for name in variants}
    losses = {}
    for name, (sess, program) in variants.items():
        sess.run(program)  # warm-up: first run's allocations
    for _ in range(args.rounds):
        for name, (sess, program) in variants.items():
            start = time.perf_counter()
            [total] = sess.run(program)
            times[name].append(time.perf_counter() - start)
            losses[name] = total / args.steps
    for name in variants:
        per_step = statistics.median(times[name]) / args.steps
        print("%-28s %7.1f ms per step  (mean loss of the last run %.3f)" % (
            name, 1e3 * per_step, losses[name]))
    base = statistics.median(times["float32"])
    for name in variants:
        if name != "float32":
            print("%s / float32: %.2fx" % (name, statistics.median(times[name]) / base))


if __name__ == "__main__":
    main()
