"""A TF1 IPU training script in the style of Graphcore's tutorial 1 (our own code).

One training step per ``sess.run``.  On an IPU system run it with ``python3``; here:

    python -m ipu_emulator run --tf1 examples/tf1_step_per_run.py --epochs 2
"""
import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

(images, labels), _ = tf.keras.datasets.fashion_mnist.load_data()
images = (images / 255.0).astype(np.float32)   # the IPU computes in float32, not uint8
labels = labels.astype(np.int32)
steps_per_epoch = len(images) // args.batch_size

data = tf.data.Dataset.from_tensor_slices((images, labels))
data = data.shuffle(len(images), seed=1).repeat().batch(args.batch_size, drop_remainder=True)
batches = tf.data.make_initializable_iterator(data)

classifier = tf.keras.Sequential([
    tf.keras.layers.Reshape((28, 28, 1)),
    tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10),
])


def train_step(pixels, digit):
    logits = classifier(pixels, training=True)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=digit, logits=logits)
    update = tf.train.AdamOptimizer(learning_rate=0.005).minimize(loss)
    return loss, update


config = ipu.utils.create_ipu_config()
config = ipu.utils.auto_select_ipus(config, num_ipus=1)
ipu.utils.configure_ipu_system(config)

pixels, digit = batches.get_next()
with ipu.scopes.ipu_scope("/device:IPU:0"):
    step_on_ipu = ipu.ipu_compiler.compile(train_step, inputs=[pixels, digit])

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(batches.initializer)
    for epoch in range(args.epochs):
        started = time.time()
        total = 0.0
        for _ in range(steps_per_epoch):
            total += sess.run(step_on_ipu)[0]
        print("epoch %d  mean loss %.4f  time %.2f s" % (epoch, total / steps_per_epoch,
                                                          time.time() - started))
