"""An MNIST classifier pipelined over four IPUs as two replicas of two stages with IPU Keras,
laid out as Graphcore's TF2 Keras tutorial's last step is (our own code): four IPUs, a model in
two pipeline stages (so the IPU system holds two replicas of it), the pipelining options with a
schedule, ``steps_per_execution`` sized from the data length as
``len(data) // (batch_size x replicas)`` rounded down to a multiple of the gradient accumulation
count, asynchronous callbacks, ``fit`` and ``evaluate`` with ``batch_size``.

    --functional   a functional model split with ``PipelineStage`` contexts (default: a
                   Sequential model split with ``set_pipeline_stage_assignment``)
    --schedule S   Grouped (default), Interleaved or Sequential
    --epochs N     training epochs (default 2)

Callbacks: a custom one that evaluates the model on a few test batches at the end of every
epoch, one that renders the convolution's 3x3 filters every 8 steps and saves the last
rendering as ``filters.png`` (matplotlib), and Keras's own ``CSVLogger``. It ends with the line
``Finished: loss {first} -> {last}, test accuracy {acc}, steps per execution {train}/{test}``.
"""
import argparse
import os

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--functional", action="store_true")
parser.add_argument("--schedule", default="Grouped")
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
keras.utils.set_random_seed(1)       # the same weights, data order and losses on every run

batch_size = 64
num_ipus = 4
num_replicas = 2                      # 4 IPUs / 2 pipeline stages
gradient_accumulation_steps_per_replica = 8


def steps_for(length):
    """Batches per replica, rounded down to a multiple of the accumulation count."""
    steps = length // (batch_size * num_replicas)
    return steps // gradient_accumulation_steps_per_replica * gradient_accumulation_steps_per_replica


(x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
x_train, x_test = x_train.astype("float32") / 255, x_test.astype("float32") / 255
y_train, y_test = y_train.astype("int32"), y_test.astype("int32")

train_steps = steps_for(len(x_train))
test_steps = steps_for(len(x_test))
x_train = x_train[:train_steps * batch_size * num_replicas]
y_train = y_train[:train_steps * batch_size * num_replicas]
x_test = x_test[:test_steps * batch_size * num_replicas]
y_test = y_test[:test_steps * batch_size * num_replicas]


def sequential_model():
    model = keras.Sequential([
        keras.layers.Reshape((28, 28, 1), input_shape=(28, 28)),
        keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(10, activation="softmax")])
    model.set_pipeline_stage_assignment([0, 0, 0, 1, 1])
    return model


def functional_model():
    inputs = keras.Input(shape=(28, 28))
    with ipu.keras.PipelineStage(0):
        x = keras.layers.Reshape((28, 28, 1))(inputs)
        x = keras.layers.Conv2D(8, 3, strides=2, activation="relu")(x)
        x = keras.layers.Flatten()(x)
    with ipu.keras.PipelineStage(1):
        x = keras.layers.Dense(32, activation="relu")(x)
        outputs = keras.layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs)


class EvaluateEveryEpoch(keras.callbacks.Callback):
    """Evaluates the model being trained on a few test batches after each epoch."""

    def __init__(self, x, y):
        super().__init__()
        self.x, self.y, self.accuracies = x, y, []

    def on_epoch_end(self, epoch, logs=None):
        _, accuracy = self.model.evaluate(self.x, self.y, batch_size=batch_size, verbose=0)
        self.accuracies.append(accuracy)
        print("  epoch {}: held-out accuracy {:.3f}".format(epoch + 1, accuracy))


class RenderFilters(keras.callbacks.Callback):
    """Renders the convolution's filters side by side, every few steps; saves the last."""

    def __init__(self, every_n_batches, path):
        super().__init__()
        self.every_n_batches, self.path, self.pictures = every_n_batches, path, []

    def on_train_batch_end(self, batch, logs=None):
        if batch % self.every_n_batches:
            return
        conv = [layer for layer in self.model.layers if isinstance(layer, keras.layers.Conv2D)][0]
        kernel = conv.get_weights()[0]                      # (3, 3, 1, filters)
        filters = np.transpose(kernel[:, :, 0, :], (2, 0, 1))
        low, high = filters.min(), filters.max()
        tiles = ((filters - low) / (high - low + 1e-9) * 255).astype(np.uint8)
        self.pictures.append(np.concatenate(list(tiles), axis=1))      # one 3 x 24 strip

    def on_train_end(self, logs=None):
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
        plt.imsave(self.path, self.pictures[-1], cmap="gray")


config = ipu.config.IPUConfig()
config.auto_select_ipus = num_ipus
config.configure_ipu_system()

strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    model = functional_model() if args.functional else sequential_model()
    model.set_pipelining_options(
        gradient_accumulation_steps_per_replica=gradient_accumulation_steps_per_replica,
        pipeline_schedule=getattr(ipu.ops.pipelining_ops.PipelineSchedule, args.schedule))
    model.set_asynchronous_callbacks(True)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(),
                  optimizer=keras.optimizers.SGD(learning_rate=0.02),
                  metrics=["accuracy"], steps_per_execution=train_steps)
    print("Training: {} steps per execution per replica".format(train_steps))
    evaluate_callback = EvaluateEveryEpoch(x_test[:batch_size * num_replicas * 8],
                                           y_test[:batch_size * num_replicas * 8])
    filters_callback = RenderFilters(every_n_batches=8, path="filters.png")
    history = model.fit(x_train, y_train, epochs=args.epochs, batch_size=batch_size, verbose=2,
                        callbacks=[evaluate_callback, filters_callback,
                                   keras.callbacks.CSVLogger("training_log.csv")])

    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(),
                  optimizer=keras.optimizers.SGD(learning_rate=0.02),
                  metrics=["accuracy"], steps_per_execution=test_steps)
    print("Evaluating: {} steps per execution per replica".format(test_steps))
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=batch_size, verbose=2)

print("Filter pictures rendered: {} of shape {}".format(
    len(filters_callback.pictures),
    filters_callback.pictures[0].shape if filters_callback.pictures else None))
print("Held-out accuracy after each epoch: {}".format(
    " ".join("{:.3f}".format(a) for a in evaluate_callback.accuracies)))
print("Log lines: {}".format(len(open("training_log.csv").read().splitlines())))
losses = history.history["loss"]
print("Finished: loss {:.4f} -> {:.4f}, test accuracy {:.3f}, steps per execution {}/{}".format(
    losses[0], losses[-1], accuracy, train_steps, test_steps))
