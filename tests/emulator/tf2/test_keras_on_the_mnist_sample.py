"""IPU Keras (TF2) on the bundled MNIST sample at the scale of Graphcore's TF2 TensorBoard
tutorial: the training set split 80/20, validation for 128 steps of 32 images, with
steps_per_execution=128 (the SDK's data adapter needs 128 whole validation batches)."""
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.data.datasets import mnist
from ipu_emulator.ipu import ipu_strategy

pytestmark = pytest.mark.tf2

BATCH = 32
STEPS = 128


def batches(images, labels):
    data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(BATCH, drop_remainder=True)
    return data.map(lambda x, y: (tf.cast(x, tf.float32) / 255, tf.cast(y, tf.int32)))


def test_an_80_20_split_validates_for_128_steps_per_execution(monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_DATA", "sample")
    (x_train, y_train), _ = mnist.load_data()
    split = int(0.8 * len(x_train))
    with ipu_strategy.IPUStrategy().scope():
        model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                                     tf.keras.layers.Dense(10)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), steps_per_execution=STEPS,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        with record.capture() as runs:
            history = model.fit(batches(x_train[:split], y_train[:split]).repeat(),
                                steps_per_epoch=STEPS, epochs=1, verbose=0,
                                validation_data=batches(x_train[split:], y_train[split:]),
                                validation_steps=STEPS)
    # One engine run of 128 training steps, one of 128 validation steps; on 4,000 digits the
    # validation stopped: "... at least 128 batches (currently it can only generate 25 ...".
    assert [run.iterations for run in runs.runs] == [STEPS, STEPS]
    assert history.history["val_loss"][0] < 1.0
