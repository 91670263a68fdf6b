"""Shared fixtures.

Most TensorFlow tests in this project are graph-mode TF1, so v2 behaviour is switched off
once, here, at import time (it is process-wide).  Modules marked ``pytest.mark.tf2`` (TF2
eager tests) run in a child process that keeps TF2 behaviour: see
``tests/support/tf2_isolation.py``.
``ipu_emulator`` is imported before TensorFlow so that ``TF_USE_LEGACY_KERAS=1`` is set
before Keras first loads.
"""
import ipu_emulator  # noqa: F401  (must come before tensorflow)

import pytest
import tensorflow as tf

from tests.support import tf2_isolation
from tests.support.ipu_systems import configure_ipus

if not tf2_isolation.in_tf2_child():
    tf.compat.v1.disable_v2_behavior()


def pytest_configure(config):
    config.addinivalue_line("markers", "tf2: TF2 eager test (runs in a child process)")


def pytest_collection_modifyitems(config, items):
    tf2_isolation.replace_tf2_items(config, items)


def pytest_runtest_logreport(report):
    tf2_isolation.report_to_parent(report)


@pytest.fixture
def fresh_ipu_system(monkeypatch):
    """No IPU system configured before or after the test, and no ``TF_POPLAR_FLAGS``."""
    from ipu_emulator.ipu import config
    monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)
    config.reset_ipu_configuration()
    yield
    config.reset_ipu_configuration()


@pytest.fixture
def two_ipus(fresh_ipu_system):
    """A configured system of two IPUs for the test."""
    configure_ipus(2)


@pytest.fixture
def graph():
    """A fresh default graph for one test (TF1 graph mode)."""
    g = tf.Graph()
    with g.as_default():
        yield g


@pytest.fixture
def sess(graph):
    """A session on the test's graph (ops built after it is opened are picked up on run)."""
    with tf.compat.v1.Session(graph=graph) as session:
        yield session


# --- a tiny linear regression, trained on the device loop and step by step -------------

class LinearRegression:
    """Same data, initial values and optimizer for every way of running it.

    ``model(x, y)`` builds one training step (MSE loss + plain SGD) with resource variables
    ``w`` and ``b`` created in the current variable scope.
    """

    batch = 4
    features = 3
    steps = 6
    learning_rate = 0.05

    def __init__(self):
        import numpy as np
        rng = np.random.RandomState(0)
        n = self.batch * self.steps
        self.x = rng.randn(n, self.features).astype(np.float32)
        true_w = np.array([[1.0], [-2.0], [0.5]], np.float32)
        self.y = (self.x @ true_w + 0.3 + 0.01 * rng.randn(n, 1)).astype(np.float32)
        self.w0 = np.linspace(-0.2, 0.2, self.features, dtype=np.float32).reshape(-1, 1)

    def batches(self):
        for i in range(self.steps):
            s = slice(i * self.batch, (i + 1) * self.batch)
            yield self.x[s], self.y[s]

    def dataset(self):
        return tf.data.Dataset.from_tensor_slices((self.x, self.y)).batch(
            self.batch, drop_remainder=True)

    def model(self, x, y):
        # Initialisers, not tensors: the variables may be created inside a loop body.
        w = tf.compat.v1.get_variable("w", shape=self.w0.shape, use_resource=True,
                                      initializer=tf.compat.v1.constant_initializer(self.w0))
        b = tf.compat.v1.get_variable("b", shape=[1], use_resource=True,
                                      initializer=tf.compat.v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        train = tf.compat.v1.train.GradientDescentOptimizer(self.learning_rate).minimize(loss)
        return loss, train

    @staticmethod
    def variables(graph):
        with graph.as_default():
            named = {v.op.name: v for v in tf.compat.v1.global_variables()}
        return named["w"], named["b"]

    def step_by_step(self):
        """Per-step losses and final (w, b), one ``sess.run`` per step, in a fresh graph."""
        from ipu_emulator.ipu import ipu_compiler, scopes
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [self.batch, self.features])
            y = tf.compat.v1.placeholder(tf.float32, [self.batch, 1])
            with scopes.ipu_scope("/device:IPU:0"):
                [loss] = ipu_compiler.compile(self.model, [x, y])
            w, b = self.variables(graph)
            with tf.compat.v1.Session(graph=graph) as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                losses = [sess.run(loss, {x: bx, y: by}) for bx, by in self.batches()]
                return losses, sess.run(w), sess.run(b)


@pytest.fixture
def regression():
    return LinearRegression()
