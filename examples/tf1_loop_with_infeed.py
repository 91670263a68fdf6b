"""A TF1 IPU training script in the style of Graphcore's tutorial 2 (our own code).

A whole epoch runs on the device in one ``sess.run``: an ``ipu.loops.repeat`` loop whose
body takes each batch from an ``IPUInfeedQueue`` and sends each step's loss back through an
``IPUOutfeedQueue``.

    python -m ipu_emulator run --tf1 examples/tf1_loop_with_infeed.py --epochs 2
"""
import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_infeed_queue, ipu_outfeed_queue, loops

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

(images, labels), _ = tf.keras.datasets.fashion_mnist.load_data()
images = (images / 255.0).astype(np.float32)
labels = labels.astype(np.int32)
steps_per_epoch = len(images) // args.batch_size

data = tf.data.Dataset.from_tensor_slices((images, labels))
data = data.shuffle(len(images), seed=1).repeat().batch(args.batch_size, drop_remainder=True)
infeed = ipu_infeed_queue.IPUInfeedQueue(data)
step_losses = ipu_outfeed_queue.IPUOutfeedQueue()

classifier = tf.keras.Sequential([
    tf.keras.layers.Reshape((28, 28, 1)),
    tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10),
])


def train_step(running_total, pixels, digit):
    logits = classifier(pixels, training=True)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=digit, logits=logits)
    update = tf.train.AdamOptimizer(learning_rate=0.005).minimize(loss)
    return running_total + loss, step_losses.enqueue(loss), update


def one_epoch():
    return loops.repeat(steps_per_epoch, train_step, inputs=[0.0], infeed_queue=infeed)


config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()

with ipu.scopes.ipu_scope("/device:IPU:0"):
    epoch_on_ipu = ipu.ipu_compiler.compile(one_epoch)
read_losses = step_losses.dequeue()

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(infeed.initializer)
    for epoch in range(args.epochs):
        started = time.time()
        total = sess.run(epoch_on_ipu)[0]
        losses = sess.run(read_losses)
        print("epoch %d  mean loss %.4f  last step loss %.4f  (%d steps)  time %.2f s" % (
            epoch, total / steps_per_epoch, losses[-1], len(losses), time.time() - started))
