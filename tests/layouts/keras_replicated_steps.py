"""An MNIST classifier on two IPUs as two replicas with IPU Keras, laid out as the replicated
(not pipelined) IPU path of Graphcore's TF2 Keras tutorial's completed example is (our own
code): two IPUs from ``IPUConfig().auto_select_ipus``, an ``IPUStrategy``, a functional model
compiled with ``steps_per_execution = training batches // 2``, ``fit`` of a repeated dataset
for ``steps_per_epoch = training batches``, then ``evaluate`` and ``predict`` of the test set
with ``steps = test batches``.  The SDK's Keras data adapter takes those steps for both
replicas together (each runs half), so the script runs to completion; an odd number of test
batches leaves one over, which the SDK drops with a warning.

    --epochs N     training epochs (default 2)
    --batch-size B batch size (default 80, the tutorial's)

It prints the steps it asks for, and ends with the line
``Finished: loss {first} -> {last}, test accuracy {acc}, predictions {rows}``.
"""
import argparse

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=80)
args = parser.parse_args()
keras.utils.set_random_seed(1)       # the same weights, data order and losses on every run

num_classes = 10
num_ipus = 2


def load_data(batch_size):
    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
    x_train = np.expand_dims(x_train.astype("float32") / 255, -1)
    x_test = np.expand_dims(x_test.astype("float32") / 255, -1)
    y_train = keras.utils.to_categorical(y_train, num_classes)
    y_test = keras.utils.to_categorical(y_test, num_classes)
    train = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    train = train.batch(batch_size, drop_remainder=True).repeat()
    test = tf.data.Dataset.from_tensor_slices((x_test, y_test))
    test = test.batch(batch_size, drop_remainder=True)
    return (train, test, x_test), (len(x_train), len(x_test))


def model_fn():
    inputs = keras.Input(shape=(28, 28, 1))
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(64, activation="relu")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax")(x)
    return inputs, outputs


(train_dataset, test_dataset, test_images), (train_data_len, test_data_len) = \
    load_data(args.batch_size)

ipu_config = ipu.config.IPUConfig()
ipu_config.auto_select_ipus = num_ipus
ipu_config.configure_ipu_system()

strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    model = keras.Model(*model_fn())
    steps_per_execution = train_data_len // args.batch_size // num_ipus
    steps_per_epoch = train_data_len // args.batch_size
    evaluation_steps = test_data_len // args.batch_size
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05),
                  loss="categorical_crossentropy", metrics=["accuracy"],
                  steps_per_execution=steps_per_execution)
    print("Training: {} steps per execution, {} steps per epoch".format(
        steps_per_execution, steps_per_epoch))
    history = model.fit(train_dataset, epochs=args.epochs, steps_per_epoch=steps_per_epoch,
                        verbose=2)

    print("Evaluation: {} steps".format(evaluation_steps))
    loss, accuracy = model.evaluate(test_dataset, steps=evaluation_steps, verbose=2)

    images = tf.data.Dataset.from_tensor_slices(test_images).batch(args.batch_size,
                                                                   drop_remainder=True)
    predictions = model.predict(images, steps=evaluation_steps, verbose=0)
    print("Predictions: {} rows of {}".format(*predictions.shape))

losses = history.history["loss"]
print("Finished: loss {:.4f} -> {:.4f}, test accuracy {:.3f}, predictions {}".format(
    losses[0], losses[-1], accuracy, len(predictions)))
