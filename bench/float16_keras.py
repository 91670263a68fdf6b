"""Host wall time of an IPU Keras model in mixed_float16 against the same model in float32
(TF2), in one run.

A small convolutional network (three 3x3 convolutions of 32, 64 and 128 filters with batch
norm and ReLU, global average pooling, a float32 dense layer) trains on 2,048 images of the
CIFAR-10 sample, batch 32, 16 steps per execution, in an ``IPUStrategy``: one copy built
under Keras's ``mixed_float16`` policy (float32 weights, float16 compute, loss scaling), one
in float32.  Their epochs run interleaved, round after round, so machine noise hits both
alike, and the median epoch times are compared.  The emulator computes the float16 steps in
float32 and rounds to float16 where the IPU stores float16 (runtime/float16.py); without it,
TensorFlow's CPU float16 kernels make the float16 copy several times slower.

Usage:  python bench/float16_keras.py [--rounds R]
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("IPU_EMULATOR_DATA", "sample")

import numpy as np  # noqa: E402

import ipu_emulator  # noqa: E402,F401  (legacy Keras switch before TensorFlow loads)
import tensorflow as tf  # noqa: E402

from ipu_emulator import ipu  # noqa: E402
from ipu_emulator.data import datasets  # noqa: E402

BATCH = 32
IMAGES = 2048


def build(policy):
    tf.keras.mixed_precision.set_global_policy(policy)
    try:
        inputs = tf.keras.Input((32, 32, 3), batch_size=BATCH)
        x = inputs
        for filters, stride in ((32, 1), (64, 2), (128, 2)):
            x = tf.keras.layers.Conv2D(filters, 3, strides=stride, padding="same")(x)
            x = tf.keras.layers.ReLU()(tf.keras.layers.BatchNormalization()(x))
        x = tf.keras.layers.GlobalAveragePooling2D()(x)
        model = tf.keras.Model(inputs, tf.keras.layers.Dense(10, dtype="float32")(x))
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), steps_per_execution=16,
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    (x_train, y_train), _ = datasets.cifar10.load_data()
    images = x_train[:IMAGES].astype(np.float32) / 255.0
    labels = y_train[:IMAGES].astype(np.int32)
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        models = {"float32": build("float32"), "mixed_float16": build("mixed_float16")}
        times = {name: [] for name in models}
        losses = {}
        for model in models.values():
            model.fit(images, labels, batch_size=BATCH, epochs=1, verbose=0)  # traces
        for _ in range(args.rounds):
            for name, model in models.items():
                start = time.perf_counter()
                history = model.fit(images, labels, batch_size=BATCH, epochs=1, verbose=0)
                times[name].append(time.perf_counter() - start)
                losses[name] = history.history["loss"][-1]
    for name in models:
        print("%-14s %6.2f s per epoch of %d steps  (loss of the last epoch %.3f)" % (
            name, statistics.median(times[name]), IMAGES // BATCH, losses[name]))
    print("mixed_float16 / float32: %.2fx" % (
        statistics.median(times["mixed_float16"]) / statistics.median(times["float32"])))


if __name__ == "__main__":
    main()
