"""An MNIST classifier trained with IPU Keras on one IPU, laid out as Graphcore's TF2 Keras
tutorial steps are (our own code): load the data, trim it to whole batches, build the model in
an ``IPUStrategy`` scope, compile it with ``steps_per_execution`` derived from the data length
(a whole epoch per engine run), fit with ``batch_size``, then evaluate the same way.

    --functional   build the model with the functional API (default: Sequential)
    --epochs N     training epochs (default 2)

It ends with the line ``Finished: loss {first epoch} -> {last epoch}, test accuracy {acc}``.
"""
import argparse

import tensorflow as tf
from tensorflow import keras
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--functional", action="store_true")
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
keras.utils.set_random_seed(1)       # the same weights, data order and losses on every run

batch_size = 64


def make_divisible(number, divisor):
    return number - number % divisor


def load_data():
    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
    x_train, x_test = x_train.astype("float32") / 255, x_test.astype("float32") / 255
    # An IPU program has fixed shapes: keep whole batches only.
    train_length = make_divisible(len(x_train), batch_size)
    test_length = make_divisible(len(x_test), batch_size)
    return ((x_train[:train_length], y_train[:train_length].astype("int32")),
            (x_test[:test_length], y_test[:test_length].astype("int32")))


def sequential_model():
    return keras.Sequential([
        keras.layers.Flatten(input_shape=(28, 28)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax")])


def functional_model():
    inputs = keras.Input(shape=(28, 28))
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(64, activation="relu")(x)
    outputs = keras.layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs)


(x_train, y_train), (x_test, y_test) = load_data()
train_steps_per_execution = len(x_train) // batch_size   # the whole epoch in one engine run
test_steps_per_execution = len(x_test) // batch_size

config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()

strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    model = functional_model() if args.functional else sequential_model()
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(),
                  optimizer=keras.optimizers.RMSprop(learning_rate=0.001),
                  metrics=["accuracy"], steps_per_execution=train_steps_per_execution)
    print("Training: {} steps per execution".format(train_steps_per_execution))
    history = model.fit(x_train, y_train, epochs=args.epochs, batch_size=batch_size, verbose=2)

    # Evaluation runs the test split's batches, again in one engine run.
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(),
                  optimizer=keras.optimizers.RMSprop(learning_rate=0.001),
                  metrics=["accuracy"], steps_per_execution=test_steps_per_execution)
    print("Evaluating: {} steps per execution".format(test_steps_per_execution))
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=batch_size, verbose=2)

losses = history.history["loss"]
print("Finished: loss {:.4f} -> {:.4f}, test accuracy {:.3f}".format(losses[0], losses[-1],
                                                                       accuracy))
