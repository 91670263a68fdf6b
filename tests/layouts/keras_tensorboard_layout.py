"""An IPU Keras model that logs to TensorBoard, laid out as the SDK's TF2 TensorBoard tutorial
is (our own code): configure the system, build and compile the model in the strategy's scope
with ``steps_per_execution``, ask for asynchronous callbacks, and fit with Keras's
``TensorBoard`` callback (weight histograms every epoch) beside a callback that writes its own
``tf.summary.scalar`` values.

    --logdir DIR   where the event files go (default: ./logs)
    --epochs N     (default: 2)

It ends with the line ``Logged to {logdir}: loss {first epoch} -> {last epoch}``.
"""
import argparse
import os

import tensorflow as tf
from tensorflow import keras
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--logdir", default="logs")
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()

cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()


def create_dataset():
    (x_train, y_train), _ = keras.datasets.mnist.load_data()
    x_train = x_train[:2048] / 255.0
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train[:2048]))
    dataset = dataset.batch(64, drop_remainder=True)
    return dataset.map(lambda d, l: (tf.cast(d, tf.float32), tf.cast(l, tf.int32)))


class LearningRateLogger(keras.callbacks.Callback):
    """Writes the optimizer's learning rate and the batch loss with tf.summary.scalar."""

    def __init__(self, logdir, batches_per_epoch):
        super().__init__()
        self.writer = tf.summary.create_file_writer(os.path.join(logdir, "custom"))
        self.batches_per_epoch = batches_per_epoch
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        step = self.epoch * self.batches_per_epoch + batch + 1  # batches trained so far
        with self.writer.as_default():
            tf.summary.scalar("batch_loss", logs["loss"], step=step)

    def on_epoch_end(self, epoch, logs=None):
        with self.writer.as_default():
            rate = keras.backend.get_value(self.model.optimizer.learning_rate)
            tf.summary.scalar("learning_rate", rate, step=epoch)
        self.writer.flush()


strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    model = keras.Sequential([
        keras.layers.Flatten(input_shape=(28, 28)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=8)
    model.set_asynchronous_callbacks(True)
    callbacks = [keras.callbacks.TensorBoard(log_dir=args.logdir, histogram_freq=1),
                 LearningRateLogger(args.logdir, batches_per_epoch=32)]
    history = model.fit(create_dataset(), epochs=args.epochs, callbacks=callbacks)

losses = history.history["loss"]
print("Logged to %s: loss %.4f -> %.4f" % (args.logdir, losses[0], losses[-1]))
