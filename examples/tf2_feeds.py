"""Tutorial 3 style (TensorFlow 2): train an MNIST MLP with an IPUStrategy, taking batches
from an infeed and sending each step's loss back through an outfeed, several steps per
execution.  Written for an IPU system; runs unchanged through the emulator:

    python -m ipu_emulator run examples/tf2_feeds.py --steps 2000
    python -m ipu_emulator run examples/tf2_feeds.py --steps 2000 --without-feeds

With ``--without-feeds`` every step is its own ``strategy.run`` with a batch from a host
iterator, and the loss comes back as the function's result.
"""
import argparse
import time

import tensorflow as tf
from tensorflow import keras

from tensorflow.python.ipu import config
from tensorflow.python.ipu import ipu_outfeed_queue
from tensorflow.python.ipu import ipu_strategy

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--steps", type=int, default=10_000, help="training steps in all")
parser.add_argument("--steps-per-execution", type=int, default=10,
                    help="steps the IPU runs per engine run (with feeds)")
parser.add_argument("--without-feeds", action="store_true",
                    help="one strategy.run per step, batches from a host iterator")
args = parser.parse_args()


def mnist_batches(batch_size=32):
    (images, labels), _ = keras.datasets.mnist.load_data()
    data = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    data = data.shuffle(len(images)).batch(batch_size, drop_remainder=True)
    # The IPU computes in float32 and int32: convert on the host, in the pipeline.
    data = data.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)))
    return data.prefetch(tf.data.AUTOTUNE).repeat()


def mlp():
    return keras.Sequential([
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


def loss_and_update(model, optimizer, images, labels):
    with tf.GradientTape() as tape:
        probabilities = model(images, training=True)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, probabilities))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss


@tf.function(jit_compile=True)
def train_several_steps(batches, losses, model, optimizer, steps):
    for _ in tf.range(steps):
        images, labels = next(batches)                            # from the infeed
        losses.enqueue(loss_and_update(model, optimizer, images, labels))   # to the outfeed


@tf.function(jit_compile=True)
def train_one_step(images, labels, model, optimizer):
    return loss_and_update(model, optimizer, images, labels)


ipu_configuration = config.IPUConfig()
ipu_configuration.auto_select_ipus = 1
ipu_configuration.configure_ipu_system()

strategy = ipu_strategy.IPUStrategy()
# A host iterator must be made outside the strategy: inside it, iter() makes an infeed.
host_batches = iter(mnist_batches()) if args.without_feeds else None

with strategy.scope():
    model = mlp()
    optimizer = keras.optimizers.SGD(0.01)
    started = time.time()
    if args.without_feeds:
        step_losses = []
        for _ in range(args.steps):
            images, labels = next(host_batches)
            step_losses.append(strategy.run(train_one_step, args=[images, labels, model, optimizer]))
        first, last = float(step_losses[0]), float(step_losses[-1])
        label = "without infeed/outfeed"
    else:
        batches = iter(mnist_batches())                 # inside the strategy: an infeed
        losses = ipu_outfeed_queue.IPUOutfeedQueue()
        for _ in range(0, args.steps, args.steps_per_execution):
            strategy.run(train_several_steps,
                         args=[batches, losses, model, optimizer, args.steps_per_execution])
        all_losses = losses.dequeue()
        first, last = float(all_losses[0]), float(all_losses[-1])
        label = "with infeed/outfeed"
    print("Time taken %s: %.2f seconds" % (label, time.time() - started))
    print("loss of the first step %.4f, of the last step %.4f" % (first, last))
