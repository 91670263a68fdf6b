"""Shared fixtures of the API front's and runtime's tests, in folders by concept (api,
configuration, programs, feeds, replication, sharding, pipelining, estimators, data, tf2).

Every test starts and ends with no IPU system configured (``fresh_ipu_system``, autouse).
Most TensorFlow tests in this project are graph-mode TF1, so v2 behaviour is switched off
once, here, at import time (it is process-wide).  Modules marked ``pytest.mark.tf2`` (TF2
eager tests) run in a child process that keeps TF2 behaviour: see
``tests/support/tf2_isolation.py``.
``ipu_emulator`` is imported before TensorFlow so that ``TF_USE_LEGACY_KERAS=1`` is set
before Keras first loads.
"""
import ipu_emulator  # noqa: F401  (must come before tensorflow)

import logging
from pathlib import Path

import pytest
import tensorflow as tf

from tests.support import tf2_isolation
from tests.support.ipu_systems import configure_ipus

if not tf2_isolation.in_tf2_child():
    tf.compat.v1.disable_v2_behavior()


def pytest_configure(config):
    config.addinivalue_line("markers", "tf2: TF2 eager test (runs in a child process)")


TF2_FOLDER = Path(__file__).parent / "tf2"


def pytest_collection_modifyitems(config, items):
    # The root conftest hands the workers tf2/ as one unit, so the one child process that runs
    # the TF2 tests starts once: a TF2 module must live there, and only TF2 modules.
    misplaced = sorted({item.nodeid.split("::")[0] for item in items
                        if (tf2_isolation.is_tf2_item(item)
                            != (TF2_FOLDER in Path(item.path).parents))})
    if misplaced and not tf2_isolation.in_tf2_child():
        raise pytest.UsageError("TF2 test modules (pytestmark = pytest.mark.tf2) belong in "
                                f"tests/emulator/tf2/, and only they: {', '.join(misplaced)}")
    tf2_isolation.replace_tf2_items(config, items)


def pytest_runtest_logreport(report):
    tf2_isolation.report_to_parent(report)


@pytest.fixture(autouse=True)
def fresh_ipu_system(monkeypatch):
    """Every test starts and ends with no IPU system configured, and no ``TF_POPLAR_FLAGS``
    (so the "hardware" target, unless a test sets the flags)."""
    from ipu_emulator.ipu import config
    monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)
    config.reset_ipu_configuration()
    yield
    config.reset_ipu_configuration()


class LogLines(logging.Handler):
    """The messages TensorFlow's logger emitted while the ``tf_log`` fixture was active."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record_):
        self.lines.append(record_.getMessage())

    def losses(self):
        """The losses an estimator logged (``loss = 0.25, step = ...``), in order."""
        return [float(line.split("loss = ")[1].split(",")[0])
                for line in self.lines if line.startswith("loss = ")]


@pytest.fixture
def tf_log():
    """TensorFlow's log lines at INFO level and above, for the test."""
    logger = logging.getLogger("tensorflow")
    handler, level = LogLines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


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
