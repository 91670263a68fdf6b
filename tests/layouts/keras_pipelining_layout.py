"""An MNIST classifier pipelined over two IPUs with IPU Keras, laid out as the SDK's TF2
user guide examples are (our own code): configure the system, build the model in the
strategy's scope, set the pipelining options, compile with ``steps_per_execution`` and fit.

    --sequential   a Sequential model split with ``set_pipeline_stage_assignment``
                   (default: a functional model built inside ``PipelineStage`` contexts)

It ends with the line ``Training finished: loss {first epoch} -> {last epoch}``.
"""
import argparse

import tensorflow as tf
from tensorflow import keras
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--sequential", action="store_true")
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()

# Configure the IPU system: two IPUs, one per pipeline stage.
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 2
cfg.configure_ipu_system()


def create_dataset():
    mnist = keras.datasets.mnist
    (x_train, y_train), _ = mnist.load_data()
    x_train = x_train / 255.0
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    dataset = dataset.shuffle(1000, seed=0).batch(32, drop_remainder=True)
    dataset = dataset.map(lambda d, l: (tf.cast(d, tf.float32), tf.cast(l, tf.int32)))
    return dataset.repeat()


def create_functional_model():
    inputs = keras.layers.Input((28, 28))
    with ipu.keras.PipelineStage(0):
        x = keras.layers.Flatten()(inputs)
        x = keras.layers.Dense(128, activation="relu")(x)
    with ipu.keras.PipelineStage(1):
        x = keras.layers.Dense(64, activation="relu")(x)
        x = keras.layers.Dense(10)(x)
    return keras.Model(inputs=inputs, outputs=x)


def create_sequential_model():
    model = keras.Sequential([
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10)])
    model.set_pipeline_stage_assignment([0, 0, 1, 1])
    return model


strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    model = create_sequential_model() if args.sequential else create_functional_model()
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=keras.optimizers.SGD(0.05), steps_per_execution=40)
    history = model.fit(create_dataset(), epochs=args.epochs, steps_per_epoch=120, verbose=2)
    losses = history.history["loss"]
    print("Training finished: loss {:.4f} -> {:.4f}".format(losses[0], losses[-1]))
