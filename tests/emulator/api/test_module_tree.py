"""The SDK's public module tree (SDK 0.9 to 3.4) resolves, and its names behave as they should.

* every mapped module imports through the runner's import machinery (checked in the runner
  process of the TF2 script below: one child for both),
* names the emulator does not emulate import, and raise NotImplementedError naming the
  feature only when used; misspelt names still fail to import,
* the ops in the tutorials' scope compute real results (dropout, replication_index, group
  norm, gelu...),
* end to end: a TF2 script written against ``tensorflow.python.keras`` and a TF1 script
  written against ``tensorflow.contrib.ipu`` run through ``python -m ipu_emulator run``.
"""
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import ipu_emulator.ipu as ipu
from ipu_emulator.cli import import_aliases
from ipu_emulator.ipu import _unemulated as unemulated
from ipu_emulator.ipu import ipu_compiler, ipu_outfeed_queue, loops, scopes
from ipu_emulator.ipu.ops import (embedding_ops, functional_ops, math_ops, nn_ops,
                                  normalization_ops, rand_ops, replication_ops)
from tests.support.child_python import run_emulator
from tests.support.ipu_systems import configure_ipus

SDK = "tensorflow.python.ipu."

# Modules with (at least partly) emulated contents, by their SDK names.
EMULATED_MODULES = [
    "rand_ops", "replication_ops", "nn_ops", "normalization_ops", "embedding_ops", "math_ops",
    "functional_ops", "internal_ops", "cross_replica_ops", "pipelining_ops", "sharding",
    "cross_replica_optimizer", "sharded_optimizer", "gradient_accumulation_optimizer",
    "ipu_optimizer", "map_gradient_optimizer", "optimizers.sharded_optimizer",
    "optimizers.map_gradient_optimizer", "ops.rand_ops", "ops.replication_ops",
    "ops.normalization_ops", "ops.functional_ops", "keras.layers", "ipu_estimator",
    "ipu_pipeline_estimator", "ipu_run_config", "gradient_accumulation",
    "ipu_session_run_hooks"]
CONTRIB_MODULES = [
    "ipu_compiler", "loops", "ipu_infeed_queue", "ipu_outfeed_queue", "utils", "ops", "scopes",
    "sharding", "sharded_optimizer", "ipu_optimizer", "gradient_accumulation_optimizer",
    "popops_cross_replica_sum", "poprand", "popnn_normalization", "popnn_embedding",
    "popnn_rnn", "internal", "autoshard", "autoshard_cnn", "ipu_estimator"]
KERAS_MODULES = [
    "", ".layers", ".datasets", ".datasets.mnist", ".datasets.fashion_mnist", ".optimizers",
    ".losses", ".models", ".backend", ".callbacks", ".metrics", ".utils", ".activations",
    ".initializers", ".regularizers", ".engine", ".engine.training", ".engine.sequential",
    ".layers.core", ".optimizer_v2", ".optimizer_v2.gradient_descent", ".optimizer_v2.adam",
    ".optimizer_v2.optimizer_v2", ".optimizer_v2.learning_rate_schedule"]
GEN_OPS = ["gen_ipu_ops", "gen_poputil_ops", "gen_popnn_ops", "gen_popops_ops",
           "gen_pop_datastream_ops", "gen_poprand_ops", "gen_functional_ops"]


def all_mapped_module_names():
    names = ["tensorflow.python.ipu"]
    names += [SDK + name for name in EMULATED_MODULES + sorted(unemulated.MODULES)]
    names += ["tensorflow.contrib", "tensorflow.contrib.ipu"]
    names += ["tensorflow.contrib.ipu." + name for name in CONTRIB_MODULES]
    names += ["tensorflow.python.keras" + suffix for suffix in KERAS_MODULES]
    names += ["tensorflow.compiler.plugin.poplar.ops." + name for name in GEN_OPS]
    return names


# Appended to the TF2 script below, so the runner's TF2 process that runs the script (after
# runner.prepare(), as for any script) then imports every mapped module: one child for both.
MAPPED_MODULES_CHECK = textwrap.dedent("""
    import importlib as _importlib, sys as _sys
    _failed = []
    for _name in %r:
        try:
            _module = _importlib.import_module(_name)
            assert _sys.modules[_name] is _module
        except Exception as _error:
            _failed.append("%%s: %%r" %% (_name, _error))
    from tensorflow.python import keras as _keras
    import tf_keras as _tf_keras
    assert _keras is _tf_keras, _keras
    print("FAILED", _failed)
""") % (all_mapped_module_names(),)


@pytest.fixture(scope="module")
def tf2_runner_child(tmp_path_factory):
    """The TF2 script below and then MAPPED_MODULES_CHECK, in one runner process."""
    workdir = tmp_path_factory.mktemp("tf2_script")
    (workdir / "script.py").write_text(TF2_KERAS_SCRIPT + MAPPED_MODULES_CHECK)
    return run_emulator("run", workdir / "script.py", cwd=workdir)


def test_every_mapped_module_imports_under_the_runner_machinery(tf2_runner_child):
    result = tf2_runner_child.check()
    assert "FAILED []" in result.stdout.splitlines(), result.stdout[-3000:]


# --- names outside the emulated scope -------------------------------------------------

@pytest.mark.parametrize("module, name, feature", [
    (ipu.horovod, "init", "tensorflow.python.ipu.horovod"),
    (ipu.ipu_multi_worker_strategy, "IPUMultiWorkerStrategyV1",
     "tensorflow.python.ipu.ipu_multi_worker_strategy"),
    (ipu.serving, "export_keras", "tensorflow.python.ipu.serving"),
    (ipu.f8_ops, "convert_to_f8", "tensorflow.python.ipu.ops.f8_ops"),
    (ipu.rnn_ops, "PopnnLSTM", "tensorflow.python.ipu.ops.rnn_ops"),
    (nn_ops, "ctc_loss_v2", "tensorflow.python.ipu.nn_ops.ctc_loss_v2"),
    (embedding_ops, "create_host_embedding", "host embeddings"),
    (ipu.keras.layers, "GroupNorm", "tensorflow.python.ipu.keras.layers.GroupNorm"),
    (ipu.keras, "PipelineModel", "tensorflow.python.ipu.keras.PipelineModel"),
    (ipu.keras, "Sequential", "tensorflow.python.ipu.keras.Sequential"),
    (ipu.utils, "get_memory_size_from_events",
     "tensorflow.python.ipu.utils.get_memory_size_from_events"),
])
def test_unemulated_names_import_and_raise_only_when_used(module, name, feature):
    stub = getattr(module, name)
    with pytest.raises(NotImplementedError) as raised:
        stub(1, key="value")
    text = str(raised.value)
    assert text.startswith("ipu_emulator does not emulate " + feature)
    assert name in text


def test_a_stub_class_can_be_subclassed_but_not_instantiated():
    class MyStrategy(ipu.ipu_multi_worker_strategy.IPUMultiWorkerStrategyV1):
        pass
    with pytest.raises(NotImplementedError, match="ipu_multi_worker_strategy"):
        MyStrategy(cluster_resolver=None)


def test_misspelt_names_still_fail_to_import():
    with pytest.raises(ImportError):
        from ipu_emulator.ipu.horovod import inti  # noqa: F401
    with pytest.raises(AttributeError):
        ipu.rand_ops.drop_out  # noqa: B018
    with pytest.raises(AttributeError):
        ipu.no_such_module  # noqa: B018


@pytest.fixture
def installed():
    import_aliases.install()
    try:
        yield
    finally:
        import_aliases.uninstall()


def test_generated_op_modules_import_and_their_ops_are_stubs(installed):
    from tensorflow.compiler.plugin.poplar.ops import gen_ipu_ops, gen_poputil_ops
    with pytest.raises(NotImplementedError, match="gen_ipu_ops.ipu_configure_hardware"):
        gen_ipu_ops.ipu_configure_hardware(config="")
    assert gen_poputil_ops.replication_index is replication_ops.replication_index
    with pytest.raises(ImportError):
        from tensorflow.compiler.plugin.poplar.ops import gen_no_such_ops  # noqa: F401


def test_contrib_and_top_level_homes_are_the_same_objects(installed):
    from tensorflow.contrib.ipu import poprand, popnn_normalization, sharded_optimizer
    from tensorflow.python.ipu import cross_replica_optimizer, rand_ops as sdk_rand_ops
    from tensorflow.python.ipu.ops import rand_ops as ops_rand_ops
    import tensorflow.python.ipu.pipelining_ops as pipelining_ops

    assert poprand is sdk_rand_ops is ops_rand_ops is rand_ops
    assert popnn_normalization is normalization_ops
    assert sharded_optimizer.ShardedOptimizer is ipu.optimizers.ShardedOptimizer
    assert cross_replica_optimizer.CrossReplicaOptimizer is ipu.optimizers.CrossReplicaOptimizer
    assert pipelining_ops is ipu.pipelining_ops
    assert ipu.outlined_function is functional_ops.outlined_function


# --- emulated ops compute real results --------------------------------------------------

def test_dropout_drops_the_rate_and_rescales_the_rest(sess):
    x = tf.ones([20000])
    dropped = rand_ops.dropout(x, rate=0.25)
    seeded = rand_ops.dropout(x, seed=[3, 4], rate=0.5)
    values, first, second = sess.run([dropped, seeded, seeded])
    assert set(np.unique(values)) <= {0.0, np.float32(1 / 0.75)}
    assert abs(np.mean(values == 0) - 0.25) < 0.02
    np.testing.assert_array_equal(first, second)  # a seed makes it repeatable
    with pytest.raises(ValueError, match=r"The rate must be in the range \[0, 1\)"):
        rand_ops.dropout(x, rate=1.0)
    with pytest.raises(ValueError, match="Expected the seed to have a shape"):
        rand_ops.dropout(x, seed=[1, 2, 3])


def test_dropout_gradient_passes_only_through_kept_elements(sess):
    x = tf.constant(np.arange(1.0, 101.0, dtype=np.float32))
    y = rand_ops.dropout(x, seed=[1, 1], rate=0.5)
    [grad] = tf.gradients(tf.reduce_sum(y), [x])
    values, grads = sess.run([y, grad])
    np.testing.assert_allclose(grads, np.where(values != 0, 2.0, 0.0))


def test_replication_index_is_each_replicas_own_index(graph, fresh_ipu_system):
    configure_ipus(2)
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue()

    def body():
        return outfeed.enqueue(replication_ops.replication_index())

    with scopes.ipu_scope("/device:IPU:0"):
        run = ipu_compiler.compile(lambda: loops.repeat(3, body), inputs=[])
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(run)
        np.testing.assert_array_equal(session.run(dequeue), [[0, 1]] * 3)


def test_replication_index_outside_replication_is_zero(sess):
    index = replication_ops.replication_index()
    assert index.dtype == tf.int32
    assert sess.run(index) == 0


def test_group_norm_normalises_each_group_of_channels(sess):
    rng = np.random.RandomState(0)
    x = rng.normal(3.0, 2.0, size=(2, 5, 4)).astype(np.float32)
    strided = normalization_ops.group_norm(tf.constant(x), groups=2, scope="strided")
    blocks = normalization_ops.group_norm(tf.constant(x), groups=2, scope="blocks",
                                          strided_channel_grouping=False)
    layer = normalization_ops.layer_norm(tf.constant(x), scope="layer")
    sess.run(tf.compat.v1.global_variables_initializer())
    strided, blocks, layer = sess.run([strided, blocks, layer])

    def expected(groups_of_channels):
        out = np.empty_like(x)
        for channels in groups_of_channels:
            part = x[:, :, channels]
            mean = part.mean(axis=(1, 2), keepdims=True)
            var = part.var(axis=(1, 2), keepdims=True)
            out[:, :, channels] = (part - mean) / np.sqrt(var + 1.53e-5)
        return out

    np.testing.assert_allclose(strided, expected([[0, 2], [1, 3]]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(blocks, expected([[0, 1], [2, 3]]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer, expected([[0, 1, 2, 3]]), rtol=1e-4, atol=1e-4)
    names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    assert "strided/gamma" in names and "strided/beta" in names
    with pytest.raises(ValueError, match="not commensurate"):
        normalization_ops.group_norm(tf.constant(x), groups=3)


def test_activations_lookup_and_matmul_match_their_formulas(sess):
    x = np.linspace(-4, 4, 9).astype(np.float32)
    params = np.arange(12, dtype=np.float32).reshape(4, 3)
    a, b = np.ones((2, 3), np.float32), np.ones((3, 5), np.float32)
    gelu, swish, hard, rows, product = sess.run([
        nn_ops.gelu(x), nn_ops.swish(x), nn_ops.hard_sigmoid(x),
        embedding_ops.embedding_lookup(params, [3, 0], serialization_factor=2),
        math_ops.serialized_matmul(a, b, 2, "a_columns")])
    tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(gelu, tanh_gelu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(swish, x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hard, np.clip(0.2 * x + 0.5, 0, 1))
    np.testing.assert_array_equal(rows, params[[3, 0]])
    np.testing.assert_array_equal(product, np.full((2, 5), 3.0))
    with pytest.raises(ValueError, match="Invalid serialization_dimension"):
        math_ops.serialized_matmul(a, b, 2, "rows")


def test_outlined_function_and_multi_conv_return_the_functions_values(sess):
    @functional_ops.outlined_function
    def double(t):
        return 2 * t

    @nn_ops.multi_conv(options={"perConvReservedTiles": "50"})
    def add(t, u):
        return t + u

    assert sess.run([double(tf.constant(3.0)), add(tf.constant(1.0), tf.constant(2.0))]) == [
        6.0, 3.0]


def test_ipu_keras_layers_are_keras_layers_with_the_sdk_arguments(sess):
    embedding = ipu.keras.layers.Embedding(4, 2, serialization_factor=2,
                                           embeddings_initializer="ones")
    normalised = ipu.keras.layers.LayerNorm(epsilon=1e-3)(tf.constant([[1.0, 3.0]]))
    assert isinstance(embedding, tf.keras.layers.Embedding)
    assert ipu.keras.layers.Dropout is tf.keras.layers.Dropout
    looked_up = embedding(tf.constant([1, 3]))
    sess.run(tf.compat.v1.global_variables_initializer())
    np.testing.assert_array_equal(sess.run(looked_up), np.ones((2, 2)))
    np.testing.assert_allclose(sess.run(normalised), [[-1.0, 1.0]], atol=1e-3)


def test_map_gradient_and_sharded_optimizers_train(sess):
    w = tf.compat.v1.get_variable("w", initializer=1.0, use_resource=True)
    loss = 3.0 * w
    sgd = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    mapped = ipu.optimizers.MapGradientOptimizer(sgd, lambda grad, var: grad + var)
    step = mapped.minimize(loss)
    sharded_step = ipu.optimizers.ShardedOptimizer(sgd).minimize(loss)
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(step)  # gradient 3 + w (1.0) = 4 -> w = 1 - 0.4
    assert sess.run(w) == pytest.approx(0.6)
    sess.run(sharded_step)  # plain gradient 3 -> w = 0.6 - 0.3
    assert sess.run(w) == pytest.approx(0.3)


# --- end to end through the runner --------------------------------------------------------

TF2_KERAS_SCRIPT = '''
import numpy as np
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python import keras
from tensorflow.python.keras import layers
from tensorflow.python.keras.datasets import mnist
from tensorflow.python.keras.optimizer_v2.gradient_descent import SGD

(x_train, y_train), _ = mnist.load_data()
x_train = (x_train[:512] / 255.0).astype(np.float32)
y_train = y_train[:512].astype(np.int32)
dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(32, drop_remainder=True)

cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()
strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    model = keras.Sequential([layers.Flatten(), layers.Dense(32, activation="relu"),
                              layers.Dropout(0.1), layers.Dense(10)])
    model.compile(optimizer=SGD(0.05), steps_per_execution=16,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(dataset, epochs=2, verbose=0)
losses = history.history["loss"]
assert losses[1] < losses[0], losses
print("final loss %.4f" % losses[-1])
print("TF2 keras script done")
'''

# The contrib era's layout: ``import tensorflow as tf`` with TF 1.x names (``tf.Session``,
# ``tf.get_variable``, ``tf.nn.dropout(x, keep_prob)``), which ``--tf1`` provides.
TF1_CONTRIB_SCRIPT = '''
import numpy as np
import tensorflow as tf
from tensorflow.contrib import ipu
from tensorflow.contrib.ipu import ipu_compiler, ipu_infeed_queue, loops, utils
from tensorflow.contrib.ipu.ops import ipu_scope

features = np.random.RandomState(0).rand(64, 4).astype(np.float32)
targets = features.sum(axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((features, targets)).repeat().batch(
    8, drop_remainder=True)
infeed = ipu_infeed_queue.IPUInfeedQueue(dataset, feed_name="infeed")

def body(loss, x, y):
    w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
    h = tf.nn.dropout(ipu.poprand.dropout(x, rate=0.0), 1.0)  # TF1: keep_prob 1.0
    loss = tf.reduce_mean(tf.square(tf.matmul(h, w) - y))
    with tf.control_dependencies([tf.train.GradientDescentOptimizer(0.1).minimize(loss)]):
        return tf.identity(loss)

def training_loop():
    return loops.repeat(20, body, [0.0], infeed)

with ipu_scope("/device:IPU:0"):
    [loss] = ipu_compiler.compile(training_loop, inputs=[])

cfg = utils.create_ipu_config()
cfg = utils.auto_select_ipus(cfg, 1)
utils.configure_ipu_system(cfg)

with tf.Session() as sess:
    sess.run(infeed.initializer)
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss)
    for _ in range(3):
        last = sess.run(loss)
assert last < first, (first, last)
print("TF1 contrib script done, loss %.4f" % last)
'''


@pytest.mark.parametrize("script, flags, final_line", [
    pytest.param(TF2_KERAS_SCRIPT, [], "TF2 keras script done"),
    (TF1_CONTRIB_SCRIPT, ["--tf1"], "TF1 contrib script done"),
], ids=["tf2-tensorflow.python.keras", "tf1-tensorflow.contrib.ipu"])
def test_sdk_era_scripts_run_through_the_runner(request, tmp_path, script, flags, final_line):
    if script is TF2_KERAS_SCRIPT:  # the runner process shared with the mapped-modules check
        result = request.getfixturevalue("tf2_runner_child").check()
    else:
        path = tmp_path / "script.py"
        path.write_text(script)
        result = run_emulator("run", *flags, path, cwd=tmp_path).check()
    script_output = [line for line in result.stdout.strip().splitlines()
                     if not line.startswith("FAILED ")]  # not MAPPED_MODULES_CHECK's line
    assert script_output[-1].startswith(final_line), result.stdout


def test_a_module_written_for_real_wins_over_its_stub(tmp_path, monkeypatch):
    from ipu_emulator.ipu import _unsupported as unsupported
    package = tmp_path / "fake_sdk_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "real_one.py").write_text("def feature():\n    return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        real = unsupported.stub_module("fake_sdk_pkg.real_one", "sdk.real_one", ["feature"], "")
        stubbed = unsupported.stub_module("fake_sdk_pkg.stubbed", "sdk.stubbed", ["feature"], "")
        assert real.feature() == 42
        with pytest.raises(NotImplementedError, match="does not emulate sdk.stubbed"):
            stubbed.feature()
        import fake_sdk_pkg
        assert fake_sdk_pkg.stubbed is stubbed
    finally:
        for name in [n for n in sys.modules if n.startswith("fake_sdk_pkg")]:
            del sys.modules[name]
