"""An IPUPipelineEstimator with a LoggingTensorHook, laid out as the SDK user guides' pipeline
estimator examples are: model_fn(mode, params) returns the stages, and the hook logs a
tensor the last stage names.

    python -m ipu_emulator run [--tf1] tests/layouts/pipeline_estimator_logging_hook_layout.py
"""
import argparse

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--iterations-per-loop", type=int, default=8)
args = parser.parse_args()

tf.logging.set_verbosity(tf.logging.INFO)
rng = np.random.RandomState(0)
features = rng.rand(64, 4).astype(np.float32)
labels = (features.sum(axis=1) > 2).astype(np.int32)


def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return dataset.repeat().batch(8, drop_remainder=True)


def model_fn(mode, params):
    def stage1(x, y):
        return tf.layers.dense(x, 8, activation=tf.nn.relu), y

    def stage2(hidden, y):
        logits = tf.layers.dense(hidden, 2)
        loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
        return tf.identity(loss, name="stage_loss")

    def optimizer_function(loss):
        optimizer = tf.train.GradientDescentOptimizer(params["learning_rate"])
        return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    hook = tf.estimator.LoggingTensorHook({"stage loss": "stage_loss"}, every_n_iter=1)
    return ipu.ipu_pipeline_estimator.IPUPipelineEstimatorSpec(
        mode, computational_stages=[stage1, stage2], gradient_accumulation_count=4,
        optimizer_function=optimizer_function, training_hooks=[hook])


ipu_options = ipu.config.IPUConfig()
ipu_options.auto_select_ipus = 2
config = ipu.ipu_run_config.RunConfig(
    ipu_run_config=ipu.ipu_run_config.IPURunConfig(
        iterations_per_loop=args.iterations_per_loop, num_shards=2, ipu_options=ipu_options))
estimator = ipu.ipu_pipeline_estimator.IPUPipelineEstimator(
    model_fn=model_fn, config=config, params={"learning_rate": 0.1})
estimator.train(input_fn=input_fn, steps=args.steps)
print("final: global_step %d" % estimator.get_variable_value("global_step"))
