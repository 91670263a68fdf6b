"""MNIST with an IPUEstimator, written as for the TF1 SDK (run it through the emulator):

    python -m ipu_emulator run --tf1 examples/tf1_ipu_estimator.py --steps 200

The estimator builds the on-device loop, the infeed and the outfeed itself: each engine run
trains ``--iterations-per-loop`` steps.  ``tf.estimator.ModeKeys`` is the name SDK-era code
uses; TensorFlow 2.21 no longer has it, and the runner provides it.
"""
import argparse

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--iterations-per-loop", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--model-dir", default=None)
args = parser.parse_args()

(train_x, train_y), (test_x, test_y) = tf.keras.datasets.mnist.load_data()
train_x = (train_x / 255.0).astype(np.float32).reshape(-1, 784)
test_x = (test_x / 255.0).astype(np.float32).reshape(-1, 784)
train_y, test_y = train_y.astype(np.int32), test_y.astype(np.int32)


def train_input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices((train_x, train_y))
    return dataset.shuffle(len(train_x)).repeat().batch(params["batch_size"],
                                                         drop_remainder=True)


def eval_input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices((test_x, test_y))
    return dataset.batch(params["batch_size"], drop_remainder=True)


def model_fn(features, labels, mode, params):
    hidden = tf.layers.dense(features, 128, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 10)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return ipu.ipu_estimator.IPUEstimatorSpec(mode, predictions=tf.argmax(logits, 1))
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = tf.metrics.accuracy(labels, tf.argmax(logits, 1, output_type=tf.int32))
        return ipu.ipu_estimator.IPUEstimatorSpec(mode, loss=loss,
                                                  eval_metric_ops={"accuracy": accuracy})
    train_op = tf.train.GradientDescentOptimizer(params["learning_rate"]).minimize(loss)
    return ipu.ipu_estimator.IPUEstimatorSpec(mode, loss=loss, train_op=train_op)


ipu_options = ipu.config.IPUConfig()
ipu_options.auto_select_ipus = 1
config = ipu.ipu_run_config.RunConfig(
    ipu_run_config=ipu.ipu_run_config.IPURunConfig(
        iterations_per_loop=args.iterations_per_loop, ipu_options=ipu_options),
    model_dir=args.model_dir, log_step_count_steps=args.iterations_per_loop)
estimator = ipu.ipu_estimator.IPUEstimator(
    model_fn, config=config, params={"learning_rate": 0.1},
    train_batch_size=args.batch_size, eval_batch_size=args.batch_size)

estimator.train(train_input_fn, steps=args.steps)
eval_steps = (len(test_x) // args.batch_size) // args.iterations_per_loop * args.iterations_per_loop
metrics = estimator.evaluate(eval_input_fn, steps=eval_steps)
print("accuracy %.3f loss %.3f after %d steps" % (
    metrics["accuracy"], metrics["loss"], metrics["global_step"]))
