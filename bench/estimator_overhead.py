"""Host wall time of ``IPUEstimator.train`` against the same training written by hand.

An estimator call does more than run the device loop: it builds a fresh graph, opens a
session, restores the last checkpoint and saves a new one.  Three variants train the same
MLP (784-256-128-10, batch 32, SGD) for the same number of steps in runs of
``iterations_per_loop`` steps:

    estimator.train      one IPUEstimator.train(steps=N) call (continues from its checkpoint)
    hand loop + build    a new graph: infeed + loops.repeat + compile, session, init, N steps
    hand loop, run only  the engine runs alone, in a session built once beforehand

They run interleaved, round after round; medians are compared as ratios.  The estimator's
own engine runs are also timed (from the program record) to show where its time goes.
Usage:  python bench/estimator_overhead.py [--steps N] [--iterations-per-loop I] [--rounds R]
"""
import argparse
import logging
import shutil
import statistics
import tempfile
import time

import numpy as np

import ipu_emulator  # noqa: F401  (legacy Keras switch before TensorFlow loads)
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
from ipu_emulator import ipu, record  # noqa: E402

BATCH = 32


def input_fn():
    rng = np.random.default_rng(0)
    images = rng.random((64 * BATCH, 784), dtype=np.float32)
    labels = rng.integers(0, 10, 64 * BATCH).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
        BATCH, drop_remainder=True)


def step(images, labels):
    hidden = tf.layers.dense(images, 256, activation=tf.nn.relu)
    hidden = tf.layers.dense(hidden, 128, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return loss, tf.train.GradientDescentOptimizer(0.01).minimize(loss)


def model_fn(features, labels, mode):
    loss, train_op = step(features, labels)
    return ipu.ipu_estimator.IPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def build_hand_loop(iterations):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(input_fn())

    def body(total, images, labels):
        loss, train_op = step(images, labels)
        return total + loss, train_op

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(iterations, body, [0.0], infeed))
    session = tf.Session()
    session.run([tf.global_variables_initializer(), infeed.initializer])
    return session, program


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--iterations-per-loop", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs_per_call = args.steps // args.iterations_per_loop
    logging.getLogger("tensorflow").setLevel(logging.ERROR)

    model_dir = tempfile.mkdtemp()
    estimator = ipu.ipu_estimator.IPUEstimator(model_fn, config=ipu.ipu_run_config.RunConfig(
        ipu_run_config=ipu.ipu_run_config.IPURunConfig(
            iterations_per_loop=args.iterations_per_loop), model_dir=model_dir))

    def estimator_train():
        with record.capture() as runs:
            estimator.train(input_fn, steps=args.steps)
        engine_seconds.append(runs.host_seconds)

    def hand_loop_with_build():
        with tf.Graph().as_default():
            session, program = build_hand_loop(args.iterations_per_loop)
            with session:
                for _ in range(runs_per_call):
                    session.run(program)

    prebuilt_graph = tf.Graph()
    with prebuilt_graph.as_default():
        prebuilt_session, prebuilt_program = build_hand_loop(args.iterations_per_loop)

    def hand_loop_run_only():
        for _ in range(runs_per_call):
            prebuilt_session.run(prebuilt_program)

    variants = {"estimator.train": estimator_train,
                "hand loop + build": hand_loop_with_build,
                "hand loop, run only": hand_loop_run_only}
    engine_seconds = []
    for run in variants.values():  # warm-up
        run()
    engine_seconds.clear()
    seconds = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, run in variants.items():
            started = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - started)
    prebuilt_session.close()
    shutil.rmtree(model_dir, ignore_errors=True)

    median = {name: statistics.median(times) for name, times in seconds.items()}
    print("host wall time for %d training steps in engine runs of %d (median of %d "
          "interleaved rounds)" % (args.steps, args.iterations_per_loop, args.rounds))
    for name, value in median.items():
        print("  %-20s %8.3f s" % (name, value))
    print("  %-20s %8.3f s  (the estimator's engine runs alone)"
          % ("  of which running", statistics.median(engine_seconds)))
    print("ratios measured side by side in this run:")
    print("  estimator / hand loop + build:  %.2fx"
          % (median["estimator.train"] / median["hand loop + build"]))
    print("  estimator / hand loop run only: %.2fx"
          % (median["estimator.train"] / median["hand loop, run only"]))
    print("  estimator's fixed cost per train call: %.3f s"
          % (median["estimator.train"] - statistics.median(engine_seconds)))


if __name__ == "__main__":
    main()
