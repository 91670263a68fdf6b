"""The pipelining tutorial's MLP, trained with an IPUPipelineEstimator over two IPUs.

Written as for the TF1 SDK; run it through the emulator:

    python -m ipu_emulator run --tf1 examples/tf1_ipu_pipeline_estimator.py --steps 160

``model_fn(mode, params)`` takes no features: the infeed's (images, labels) go to the first
stage.  Each engine run is ``--iterations-per-loop`` micro-batches, i.e.
iterations / accumulation-count pipeline passes, each ending in a weight update.  The
pipeline adds up its micro-batches' gradients (the SDK's default reduction, SUM), so an update
is accumulation-count times a mean step: hence a learning rate of 0.01, where 0.05 made the
losses jump about.
"""
import argparse

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=160)
parser.add_argument("--iterations-per-loop", type=int, default=16)
parser.add_argument("--gradient-accumulation-count", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--learning-rate", type=float, default=0.01)
parser.add_argument("--model-dir", default=None)
args = parser.parse_args()

(train_x, train_y), _ = tf.keras.datasets.mnist.load_data()
train_x = (train_x / 255.0).astype(np.float32)
train_y = train_y.astype(np.int32)


def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices((train_x, train_y))
    return dataset.shuffle(len(train_x)).repeat().batch(args.batch_size, drop_remainder=True)


def model_fn(mode, params):
    if mode != tf.estimator.ModeKeys.TRAIN:
        raise NotImplementedError(mode)

    def stage1(images, labels):  # IPU 0: the wide layers
        hidden = tf.layers.dense(tf.layers.flatten(images), 256, activation=tf.nn.relu)
        hidden = tf.layers.dense(hidden, 128, activation=tf.nn.relu)
        return hidden, labels

    def stage2(hidden, labels):  # IPU 1: the narrow layers and the loss
        hidden = tf.layers.dense(hidden, 64, activation=tf.nn.relu)
        logits = tf.layers.dense(hidden, 10)
        return tf.losses.sparse_softmax_cross_entropy(labels, logits)

    def optimizer_function(loss):
        optimizer = tf.train.GradientDescentOptimizer(params["learning_rate"])
        return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    return ipu.ipu_pipeline_estimator.IPUPipelineEstimatorSpec(
        mode, computational_stages=[stage1, stage2], optimizer_function=optimizer_function,
        gradient_accumulation_count=params["gradient_accumulation_count"])


ipu_options = ipu.config.IPUConfig()
ipu_options.auto_select_ipus = 2
config = ipu.ipu_run_config.RunConfig(
    ipu_run_config=ipu.ipu_run_config.IPURunConfig(
        iterations_per_loop=args.iterations_per_loop, num_shards=2, ipu_options=ipu_options),
    model_dir=args.model_dir, log_step_count_steps=args.iterations_per_loop)
estimator = ipu.ipu_pipeline_estimator.IPUPipelineEstimator(
    model_fn=model_fn, config=config,
    params={"learning_rate": args.learning_rate,
            "gradient_accumulation_count": args.gradient_accumulation_count})

tf.logging.set_verbosity(tf.logging.INFO)
estimator.train(input_fn=input_fn, steps=args.steps)
