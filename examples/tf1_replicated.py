"""A replicated TF1 training script in the style of Graphcore's tutorial 4 (our own code).

Written against the 2019 ``tensorflow.contrib.ipu`` API: the feeds take a ``feed_name`` and
the ``replication_factor``, and ``CrossReplicaOptimizer`` averages the gradients so the
replicas' weights stay identical.  The device has two IPUs and the model uses one, so the
program runs as two replicas, each on its own half of every pair of batches.

    python -m ipu_emulator run --tf1 examples/tf1_replicated.py --epochs 2
"""
import argparse

import numpy as np
import tensorflow.compat.v1 as tf

from tensorflow.contrib.ipu import (CrossReplicaOptimizer, ipu_compiler, ipu_infeed_queue,
                                    ipu_outfeed_queue, loops, ops, utils)

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--replicas", type=int, default=2)
args = parser.parse_args()

# One IPU per replica: a 1-shard graph on this device is replicated automatically.
config = utils.create_ipu_config()
config = utils.auto_select_ipus(config, args.replicas)
utils.configure_ipu_system(config)

(images, labels), _ = tf.keras.datasets.mnist.load_data()
images = (images.reshape(-1, 784) / 255.0).astype(np.float32)
labels = labels.astype(np.int32)
steps = len(images) // (args.batch_size * args.replicas)  # per replica, per epoch

dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(images), seed=2)
dataset = dataset.repeat().batch(args.batch_size, drop_remainder=True)
infeed = ipu_infeed_queue.IPUInfeedQueue(dataset, feed_name="train_infeed",
                                         replication_factor=args.replicas)
outfeed = ipu_outfeed_queue.IPUOutfeedQueue(feed_name="train_outfeed",
                                            replication_factor=args.replicas)


classifier = tf.keras.Sequential([
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10),
])


def train_step(pixels, digits):
    logits = classifier(pixels)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=digits, logits=logits)
    optimizer = CrossReplicaOptimizer(tf.train.GradientDescentOptimizer(0.1))
    return outfeed.enqueue(loss), optimizer.minimize(loss)


def epoch():
    return loops.repeat(steps, train_step, [], infeed)


with ops.ipu_scope("/device:IPU:0"):
    train_epoch = ipu_compiler.compile(epoch, inputs=[])
losses = outfeed.dequeue()

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(infeed.initializer)
    for number in range(args.epochs):
        sess.run(train_epoch)
        per_replica = sess.run(losses)
        print("epoch %d  mean loss %.4f  outfeed shape %s" % (
            number, per_replica.mean(), per_replica.shape))
