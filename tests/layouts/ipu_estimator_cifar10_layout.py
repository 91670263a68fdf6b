"""An IPUEstimator on CIFAR-10, laid out as the SDK user guides' estimator examples are.

Run through the emulator, with or without --tf1 (the estimator builds its own graph and
session either way):

    python -m ipu_emulator run [--tf1] tests/layouts/ipu_estimator_cifar10_layout.py

Trains, evaluates and predicts with one model_dir, so the checkpoint round-trips between the
three modes; prints the checkpoint's variable names and a final line the tests read.
"""
import argparse

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import ipu_session_run_hooks

parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", default=None)
parser.add_argument("--iterations-per-loop", type=int, default=4)
parser.add_argument("--train-steps", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=16)
args = parser.parse_args()
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

(x_train, y_train), (x_test, y_test) = tf.keras.datasets.cifar10.load_data()
x_train, x_test = x_train.astype(np.float32) / 255.0, x_test.astype(np.float32) / 255.0
y_train, y_test = y_train.astype(np.int32), y_test.astype(np.int32)


def input_fn(mode, params):
    if mode == tf.estimator.ModeKeys.TRAIN:
        dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat()
    else:
        dataset = tf.data.Dataset.from_tensor_slices((x_test, y_test))
    return dataset.batch(params["batch_size"], drop_remainder=True)


def model_fn(features, labels, mode, params):
    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(8, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10),
    ])
    logits = model(features, training=mode == tf.estimator.ModeKeys.TRAIN)
    predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return ipu.ipu_estimator.IPUEstimatorSpec(mode, predictions={"class": predictions})
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
        labels, logits, from_logits=True))
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = tf.compat.v1.metrics.accuracy(labels, predictions)
        return ipu.ipu_estimator.IPUEstimatorSpec(mode, loss=loss,
                                                  eval_metric_ops={"accuracy": accuracy})
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss)
    # The loss of each engine run's last step, sent to the host through an outfeed.
    hook = ipu_session_run_hooks.IPULoggingTensorHook(every_n_iter=1)
    log_op = hook.log({"ipu loss": loss})
    return ipu.ipu_estimator.IPUEstimatorSpec(mode, loss=loss,
                                              train_op=tf.group(train_op, log_op),
                                              training_hooks=[hook])


ipu_options = ipu.config.IPUConfig()
ipu_options.auto_select_ipus = 1
config = ipu.ipu_run_config.RunConfig(
    ipu_run_config=ipu.ipu_run_config.IPURunConfig(
        iterations_per_loop=args.iterations_per_loop, ipu_options=ipu_options),
    model_dir=args.model_dir, log_step_count_steps=args.iterations_per_loop)
estimator = ipu.ipu_estimator.IPUEstimator(
    model_fn, config=config, params={"learning_rate": 0.05},
    train_batch_size=args.batch_size, eval_batch_size=args.batch_size,
    predict_batch_size=args.batch_size)

estimator.train(input_fn, steps=args.train_steps)
metrics = estimator.evaluate(input_fn, steps=args.iterations_per_loop)
predictions = list(estimator.predict(input_fn, num_predictions=10))
print("variables:", " ".join(sorted(estimator.get_variable_names())))
print("final: loss %.4f accuracy %.3f global_step %d predictions %d" % (
    metrics["loss"], metrics["accuracy"], metrics["global_step"], len(predictions)))
