"""TF2: a ``tf.function`` runs the ops it was traced with, without Grappler's rewrites
(``runtime/graph_rewrites.py``), until the program sets optimizer options of its own."""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager import context

import ipu_emulator.ipu  # noqa: F401  (installs the rewrites' setting, as any program's import)

pytestmark = pytest.mark.tf2


def ops_after_optimization():
    """The kinds of op a fresh dense layer's tf.function ran, after the optimizer, and its
    result (a matmul, its bias and ReLU: Grappler's remapper fuses the three)."""
    w = tf.constant(np.full([3, 4], 0.5, np.float32))
    bias = tf.constant([1.0, -9.0, 1.0, 1.0])

    @tf.function
    def layer(x):
        return tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), bias))

    context.context().enable_run_metadata()
    try:
        value = layer(tf.ones([2, 3])).numpy()
        metadata = context.context().export_run_metadata()
    finally:
        context.context().disable_run_metadata()
    kinds = {node.op for graph in metadata.function_graphs
             for node in graph.post_optimization_graph.node}
    np.testing.assert_allclose(value, [[2.5, 0.0, 2.5, 2.5]] * 2)
    return kinds


def fused(kinds):
    return {kind for kind in kinds if "Fused" in kind}


@pytest.fixture
def options_restored():
    state = context.context()
    # pylint: disable=protected-access
    kept = (dict(state._optimizer_experimental_options),
            getattr(state, "_ipu_emulator_rewrites_off", False))
    yield
    state._optimizer_experimental_options.clear()
    state._optimizer_experimental_options.update(kept[0])
    state._ipu_emulator_rewrites_off = kept[1]
    state._thread_local_data.function_call_options = None


def test_a_function_runs_the_ops_as_traced(options_restored):
    kinds = ops_after_optimization()
    assert {"BiasAdd", "Relu"} <= kinds and not fused(kinds), kinds


def test_the_programs_own_options_apply_alone(options_restored):
    tf.config.optimizer.set_experimental_options({"remapping": True})
    assert tf.config.optimizer.get_experimental_options()["disable_meta_optimizer"] is False
    kinds = ops_after_optimization()
    assert fused(kinds), kinds
