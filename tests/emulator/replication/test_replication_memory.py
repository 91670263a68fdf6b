"""A replicated program's graph is freed once nothing of the user's refers to it.

The replicas' variable copies are registered per graph (``replication._copies_in``).  Those
registries must go with their graph: a module-level ``WeakKeyDictionary`` keyed by the graph
kept it alive for ever (its values, the variables, refer to the graph), and with it every
dataset constant the graph holds, so a notebook that trains several replicated models in
turn grew by a graph each time.
"""
import gc
import weakref

import numpy as np
import pytest
from tests.support.ipu_systems import configure_ipus as configure
import tensorflow as tf

from ipu_emulator.ipu import (ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, loops,
                              optimizers, scopes)
from ipu_emulator.runtime import replication



def train_two_replicas():
    """Train a tiny replicated model in a graph of its own; return a weak reference to
    that graph and the first layer's weights on each replica."""
    configure(2)
    graph = tf.Graph()
    with graph.as_default():
        images = np.random.RandomState(0).rand(64, 8).astype(np.float32)
        labels = np.arange(64, dtype=np.int32) % 4
        data = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
            8, drop_remainder=True)
        infeed = ipu_infeed_queue.IPUInfeedQueue(data)
        losses = ipu_outfeed_queue.IPUOutfeedQueue()
        layer = tf.keras.layers.Dense(4)

        def step(x, y):
            loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(y, layer(x))
            optimizer = optimizers.CrossReplicaOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1))
            return losses.enqueue(loss), optimizer.minimize(loss)

        with scopes.ipu_scope("/device:IPU:0"):
            run = ipu_compiler.compile(lambda: loops.repeat(4, step, [], infeed))
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            sess.run(run)
            weights = replication.replica_values(sess, layer.kernel)
    return weakref.ref(graph), weights


def test_replicated_graph_is_freed_after_use():
    graph_ref, weights = train_two_replicas()
    assert len(weights) == 2 and np.array_equal(weights[0], weights[1])
    gc.collect()
    assert graph_ref() is None, "something still holds the replicated graph"
