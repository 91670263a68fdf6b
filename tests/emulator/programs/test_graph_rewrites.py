"""Sessions run the graph the learner built, without Grappler's rewrites
(``ipu_emulator.runtime.graph_rewrites``), unless the session's config says how to rewrite,
on thread pools that do not spin when idle (``ipu_emulator.runtime.thread_spinning``)."""
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from ipu_emulator.runtime.graph_rewrites import without_grappler
from ipu_emulator.runtime.thread_spinning import without_spinning


def ops_run(sess, fetch, feeds):
    """The kinds of op a run executed, and its result."""
    metadata = tf.compat.v1.RunMetadata()
    value = sess.run(fetch, feeds, options=tf.compat.v1.RunOptions(output_partition_graphs=True),
                     run_metadata=metadata)
    return {node.op for part in metadata.partition_graphs for node in part.node}, value


X = np.ones([2, 3], np.float32)


def dense_layer(graph):
    """A placeholder through a dense layer with a ReLU: Grappler fuses the three ops."""
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3])
        w = tf.constant(np.full([3, 4], 0.5, np.float32))
        return x, tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), tf.constant([1.0, -9.0, 1.0, 1.0])))


def fused(kinds):
    return {kind for kind in kinds if "Fused" in kind}


def test_a_session_runs_the_ops_as_written(graph):
    x, layer = dense_layer(graph)
    learners_config = tf.compat.v1.ConfigProto(device_count={"CPU": 1})
    with tf.compat.v1.Session(graph=graph, config=learners_config) as sess:
        kinds, value = ops_run(sess, layer, {x: X})
    assert not fused(kinds), kinds
    np.testing.assert_allclose(value, [[2.5, 0.0, 2.5, 2.5]] * 2)
    assert not learners_config.graph_options.HasField("rewrite_options"), "changed in place"


def test_a_config_that_says_how_to_rewrite_is_kept(graph):
    x, layer = dense_layer(graph)
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.ON
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        kinds, value = ops_run(sess, layer, {x: X})
    assert fused(kinds), kinds
    np.testing.assert_allclose(value, [[2.5, 0.0, 2.5, 2.5]] * 2)
    assert without_grappler(config) is config
    assert without_grappler(None).graph_options.rewrite_options.disable_meta_optimizer


def test_a_sessions_thread_pools_do_not_spin_and_the_learners_config_is_kept(graph):
    """Every session's config asks for thread pools that sleep when idle
    (``ipu_emulator.runtime.thread_spinning``), the learner's own settings with it."""
    x, layer = dense_layer(graph)
    learners_config = tf.compat.v1.ConfigProto(device_count={"CPU": 1},
                                               inter_op_parallelism_threads=2)
    with tf.compat.v1.Session(graph=graph, config=learners_config) as sess:
        _, value = ops_run(sess, layer, {x: X})
        given = sess._config   # pylint: disable=protected-access  (what TensorFlow was given)
    np.testing.assert_allclose(value, [[2.5, 0.0, 2.5, 2.5]] * 2)
    assert given.experimental.disable_thread_spinning
    assert given.inter_op_parallelism_threads == 2
    assert not learners_config.experimental.disable_thread_spinning, "changed in place"
    assert without_spinning(None).experimental.disable_thread_spinning
