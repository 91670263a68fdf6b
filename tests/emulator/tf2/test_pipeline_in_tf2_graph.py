"""A pipeline in a graph built by hand while TF2 behaviour is on (a TF1-style script run
without --tf1, or an estimator's own graph): it is a v1 while loop of that graph, so its
outfeed belongs to the graph and the losses come out."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from tests.support.ipu_systems import configure_ipus

pytestmark = pytest.mark.tf2


def test_a_pipeline_in_a_hand_built_graph_trains_in_tf2_mode():
    assert tf.executing_eagerly()  # TF2 behaviour outside the graph below
    x = np.random.RandomState(0).randn(32, 4).astype(np.float32)
    y = (x.sum(axis=1, keepdims=True) > 0).astype(np.float32)
    with tf.Graph().as_default():
        data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(4, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def first(features, labels):
            return tf.keras.layers.Dense(8, activation="relu")(features), labels

        def second(hidden, labels):
            return tf.reduce_mean(tf.square(tf.keras.layers.Dense(1)(hidden) - labels))

        def optimizer(loss):
            return ipu.pipelining_ops.OptimizerFunctionOutput(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), loss)

        def model():
            return ipu.pipelining_ops.pipeline(
                [first, second], 4, repeat_count=4, infeed_queue=infeed,
                outfeed_queue=outfeed, optimizer_function=optimizer, outfeed_loss=True)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            run = ipu.ipu_compiler.compile(model)
        read_losses = outfeed.dequeue()
        configure_ipus(2)
        names = sorted(v.op.name for v in tf.compat.v1.trainable_variables())
        with tf.compat.v1.Session() as sess:
            sess.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
            losses = []
            for _ in range(3):
                sess.run(run)
                losses.append(sess.run(read_losses).mean())
    assert names == ["dense/bias", "dense/kernel", "dense_1/bias", "dense_1/kernel"]
    assert losses[-1] < losses[0]
