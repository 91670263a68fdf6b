"""Half-precision training in TF1, laid out as Graphcore's half-precision tutorial describes
it: a float16 convolutional model whose parameters are stored and updated in float32 (a
custom getter casts them to float16 for the model), a scaled loss, stochastic rounding and
float16 partials set in the IPUConfig, an on-device loop over an infeed; then an
IPUEstimator whose model_fn casts its features to float16.

    IPU_EMULATOR_DATA=sample python -m ipu_emulator run --tf1 \\
        tests/layouts/half_precision_layout.py [--dtype float16|float32] [--steps N]

Prints the mean loss of each engine run, the dtypes that reached the loss, the estimator's
final loss, and a last line the tests read.
"""
import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

parser = argparse.ArgumentParser()
parser.add_argument("--dtype", choices=["float16", "float32"], default="float16")
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--runs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--loss-scaling", type=float, default=256.0)
parser.add_argument("--stochastic-rounding", action="store_true")
args = parser.parse_args()
dtype = tf.float16 if args.dtype == "float16" else tf.float32

(x_train, y_train), _ = tf.keras.datasets.cifar10.load_data()
x_train = x_train.astype(np.float32) / 255.0
y_train = y_train.reshape(-1).astype(np.int32)

cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.floating_point_behaviour.inv = True
cfg.floating_point_behaviour.div0 = True
cfg.floating_point_behaviour.nanoo = True
if args.stochastic_rounding:
    cfg.floating_point_behaviour.esr = ipu.config.StochasticRoundingBehaviour.ON
cfg.convolutions.poplar_options = {"partialsType": "half"}
cfg.matmuls.poplar_options = {"partialsType": "half"}
cfg.configure_ipu_system()


def float32_parameters(getter, name, *a, dtype=None, **kw):
    """Store every trainable parameter in float32; hand the model a float16 copy."""
    variable = getter(name, *a, dtype=tf.float32, **kw)
    return tf.cast(variable, dtype) if dtype != tf.float32 else variable


def conv_bn_relu(x, filters, stride, name):
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [3, 3, x.shape[-1], filters], dtype=x.dtype,
                                 initializer=tf.glorot_uniform_initializer())
        x = tf.nn.conv2d(x, kernel, [1, stride, stride, 1], "SAME")
        gamma = tf.get_variable("gamma", [filters], tf.float32, tf.ones_initializer())
        beta = tf.get_variable("beta", [filters], tf.float32, tf.zeros_initializer())
        x = tf.nn.fused_batch_norm(x, gamma, beta, is_training=True)[0]
        return tf.nn.relu(x)


def model(images):
    x = tf.cast(images, dtype)
    x = conv_bn_relu(x, 8, 1, "conv1")
    x = x + conv_bn_relu(x, 8, 1, "conv2")
    x = conv_bn_relu(x, 16, 2, "conv3")
    x = tf.reduce_mean(x, axis=[1, 2])
    weights = tf.get_variable("dense", [16, 10], dtype=dtype)
    return tf.matmul(x, weights)


dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat().batch(
    args.batch_size, drop_remainder=True)
infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
seen_dtypes = []


def training_step(total, images, labels):
    with tf.variable_scope("resnet", custom_getter=float32_parameters, use_resource=True):
        logits = model(images)
    seen_dtypes.append(logits.dtype.name)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)))
    optimizer = tf.train.MomentumOptimizer(0.05, 0.9)
    # Scale the loss so small float16 gradients do not flush to zero, unscale before use.
    grads_and_vars = optimizer.compute_gradients(loss * args.loss_scaling)
    grads_and_vars = [(g / args.loss_scaling, v) for g, v in grads_and_vars]
    return total + loss, optimizer.apply_gradients(grads_and_vars)


with ipu.scopes.ipu_scope("/device:IPU:0"):
    train = ipu.ipu_compiler.compile(
        lambda: ipu.loops.repeat(args.steps, training_step, [0.0], infeed))

with tf.Session() as sess:
    sess.run([tf.global_variables_initializer(), infeed.initializer])
    start = time.time()
    losses = []
    for run in range(args.runs):
        [total] = sess.run(train)
        losses.append(total / args.steps)
        print("run %d: mean loss %.4f" % (run, losses[-1]))
    elapsed = time.time() - start
    parameters = sorted({v.dtype.base_dtype.name for v in tf.global_variables()})
print("logits dtype:", seen_dtypes[0], "parameters:", ",".join(parameters))


# --- an IPUEstimator whose model_fn computes in float16 ---------------------------------

def input_fn(mode, params):
    return tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat().batch(
        params["batch_size"], drop_remainder=True)


def model_fn(features, labels, mode, params):
    features = tf.cast(features, tf.float16)
    with tf.variable_scope("estimator", custom_getter=float32_parameters):
        x = conv_bn_relu(features, 8, 2, "conv")
        x = tf.reduce_mean(x, axis=[1, 2])
        logits = tf.matmul(x, tf.get_variable("dense", [8, 10], dtype=tf.float16))
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)))
    train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
    return ipu.ipu_estimator.IPUEstimatorSpec(mode, loss=loss, train_op=train_op)


config = ipu.ipu_run_config.RunConfig(
    ipu_run_config=ipu.ipu_run_config.IPURunConfig(iterations_per_loop=4, ipu_options=cfg))
estimator = ipu.ipu_estimator.IPUEstimator(
    model_fn, config=config, params={}, train_batch_size=args.batch_size)
estimator.train(input_fn, steps=8)
print("estimator: global_step %d" % estimator.get_variable_value("global_step"))
print("final: first %.4f last %.4f seconds %.2f" % (losses[0], losses[-1], elapsed))
