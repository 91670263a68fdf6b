"""Host wall-time benchmark for tutorials 1-2: per-step runs vs an on-device loop.

Four programs train the tutorials' conv net (Reshape, Conv2D x2, Flatten, Dense;
batch 32, Adam) for the same number of steps, each in its own graph and session:

    emulator, per step   ipu_compiler.compile(step) run once per step         (tutorial 1)
    emulator, loop       loops.repeat(steps) + IPUInfeedQueue, one sess.run   (tutorial 2)
    plain TF, per step   the same step without the emulator, one sess.run per step
    plain TF, loop       a hand-written tf.while_loop calling iterator.get_next()

They run interleaved, round after round, so machine noise hits all of them alike; the
medians are compared as ratios.  Usage:  python bench/loops_vs_steps.py [--steps N] [--rounds R]
"""
import argparse
import statistics
import time

import numpy as np

import ipu_emulator  # noqa: F401  (legacy Keras switch before TensorFlow loads)
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
from ipu_emulator import ipu  # noqa: E402

BATCH = 32


def _data(steps):
    rng = np.random.default_rng(0)
    images = rng.random((steps * BATCH, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, steps * BATCH).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
        BATCH, drop_remainder=True)


def _model():
    return tf.keras.Sequential([
        tf.keras.layers.Reshape((28, 28, 1)),
        tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])


def _step(model, images, labels):
    logits = model(images, training=True)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    return loss, tf.train.AdamOptimizer(0.001).minimize(loss)


def build_emulator_per_step(steps):
    iterator = tf.data.make_initializable_iterator(_data(steps))
    model = _model()
    images, labels = iterator.get_next()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(lambda x, y: _step(model, x, y), [images, labels])
    return [iterator.initializer], lambda sess: [sess.run(program) for _ in range(steps)]


def build_emulator_loop(steps):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_data(steps))
    model = _model()

    def body(total, images, labels):
        loss, update = _step(model, images, labels)
        return total + loss, update

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, body, [0.0], infeed))
    return [infeed.initializer], lambda sess: sess.run(program)


def build_plain_per_step(steps):
    iterator = tf.data.make_initializable_iterator(_data(steps))
    model = _model()
    images, labels = iterator.get_next()
    loss, update = _step(model, images, labels)
    fetch = [loss, update]
    return [iterator.initializer], lambda sess: [sess.run(fetch) for _ in range(steps)]


def build_plain_loop(steps):
    iterator = tf.data.make_initializable_iterator(_data(steps))
    model = _model()

    def body(count, total):
        images, labels = iterator.get_next()
        loss, update = _step(model, images, labels)
        with tf.control_dependencies([update]):
            return count + 1, total + loss

    result = tf.while_loop(lambda count, total: count < steps, body, [0, 0.0],
                           parallel_iterations=1)
    return [iterator.initializer], lambda sess: sess.run(result)


VARIANTS = {
    "emulator, per step": build_emulator_per_step,
    "emulator, loop": build_emulator_loop,
    "plain TF, per step": build_plain_per_step,
    "plain TF, loop": build_plain_loop,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    sessions = {}
    for name, build in VARIANTS.items():
        graph = tf.Graph()
        with graph.as_default():
            tf.set_random_seed(1)
            initializers, run = build(args.steps)
            init = [tf.global_variables_initializer()] + initializers
        sess = tf.Session(graph=graph)
        sess.run(init)
        run(sess)  # warm-up: graph optimisation and first-run checks
        sessions[name] = (sess, run)

    seconds = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):
        for name, (sess, run) in sessions.items():
            started = time.perf_counter()
            run(sess)
            seconds[name].append(time.perf_counter() - started)

    median = {name: statistics.median(times) for name, times in seconds.items()}
    print("host wall time for %d training steps (median of %d interleaved rounds)"
          % (args.steps, args.rounds))
    for name, value in median.items():
        print("  %-20s %8.3f s  %7.0f steps/s" % (name, value, args.steps / value))
    print("ratios measured side by side in this run:")
    print("  loop speedup over per-step (emulator):   %.2fx"
          % (median["emulator, per step"] / median["emulator, loop"]))
    print("  loop speedup over per-step (plain TF):   %.2fx"
          % (median["plain TF, per step"] / median["plain TF, loop"]))
    print("  emulator overhead, loop (emulator/plain): %.3fx"
          % (median["emulator, loop"] / median["plain TF, loop"]))
    print("  emulator overhead, per step:              %.3fx"
          % (median["emulator, per step"] / median["plain TF, per step"]))
    for sess, _ in sessions.values():
        sess.close()


if __name__ == "__main__":
    main()
