"""Estimators as the SDK 1.2 and 3.4 user guides use them (issue 9).

Checkpoints keep the SDK's variable names (no ``while/`` from the on-device loop), so they
round-trip between train, evaluate and predict; logging hooks print tensors from inside the
loop; SDK 1.x ``pipeline_depth`` semantics; ``PRE_COMPILE`` returns zeros; and the layouts in
tests/layouts/ run through the runner in TF1 and TF2 mode on CIFAR-10-shaped data.
"""
import math
import re

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import config as ipu_config
from ipu_emulator.ipu import ipu_compiler, ipu_session_run_hooks, loops, scopes
from ipu_emulator.ipu.ipu_estimator import IPUEstimator, IPUEstimatorSpec, ModeKeys
from ipu_emulator.ipu.ipu_pipeline_estimator import (IPUPipelineEstimator,
                                                     IPUPipelineEstimatorSpec)
from ipu_emulator.ipu.ipu_run_config import IPURunConfig, RunConfig
from ipu_emulator.ipu.ops import pipelining_ops
from tests.support.child_python import ROOT, run_emulator

LAYOUTS = ROOT / "tests" / "layouts"
RNG = np.random.RandomState(0)
X = RNG.randn(128, 3).astype(np.float32)
Y = (X @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)


def input_fn(with_labels=True):
    def make():
        data = (X, Y) if with_labels else X
        return tf.data.Dataset.from_tensor_slices(data).repeat().batch(8, drop_remainder=True)
    return make


def keras_model_fn(features, labels, mode, params):
    """A Keras layer: its variables are named after the name scope it is built in."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="zeros")])
    prediction = model(features)
    tf.identity(tf.reduce_sum(features), name="batch_sum")  # for the logging hook tests
    if mode == ModeKeys.PREDICT:
        return IPUEstimatorSpec(mode, predictions=prediction)
    loss = tf.reduce_mean(tf.square(prediction - labels))
    hooks = [tf.compat.v1.train.LoggingTensorHook(params["log"], every_n_iter=1)] \
        if params.get("log") else []
    if mode == ModeKeys.EVAL:
        return IPUEstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": tf.compat.v1.metrics.mean_absolute_error(labels, prediction)},
            evaluation_hooks=hooks)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return IPUEstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=hooks)


def estimator(tmp_path, iterations_per_loop, params=None, ipu_options=None):
    config = RunConfig(ipu_run_config=IPURunConfig(iterations_per_loop=iterations_per_loop,
                                                   ipu_options=ipu_options),
                       model_dir=str(tmp_path), log_step_count_steps=iterations_per_loop)
    return IPUEstimator(keras_model_fn, config=config, params=dict(params or {}))


# --- checkpoints keep the SDK's names ----------------------------------------------------------

def test_unlooped_training_checkpoint_restores_into_looped_evaluate_and_predict(tmp_path):
    # iterations_per_loop=1 trains without a loop; evaluate and predict always loop.
    trained = estimator(tmp_path, iterations_per_loop=1).train(input_fn(), steps=3)
    names = set(trained.get_variable_names())
    assert names == {"global_step", "sequential/dense/kernel", "sequential/dense/bias"}
    kernel = trained.get_variable_value("sequential/dense/kernel")
    looped = estimator(tmp_path, iterations_per_loop=4)
    results = looped.evaluate(input_fn(), steps=4)
    assert results["global_step"] == 3
    bias = trained.get_variable_value("sequential/dense/bias")
    expected = np.mean(np.square(X[:32] @ kernel + bias - Y[:32]))
    assert results["loss"] == pytest.approx(expected, rel=1e-5)
    predictions = np.stack(list(looped.predict(input_fn(False), num_predictions=8)))
    np.testing.assert_allclose(predictions, X[:8] @ kernel + bias, rtol=1e-5)
    # Looped training continues from the same checkpoint under the same names.
    looped.train(input_fn(), steps=4)
    assert set(looped.get_variable_names()) == names
    assert looped.get_variable_value("global_step") == 7


def test_loop_body_variables_keep_the_enclosing_names(graph):
    def body(total, x):
        dense = tf.keras.layers.Dense(1, kernel_initializer="ones", name="keras_dense")
        with tf.compat.v1.variable_scope("scoped"):
            w = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.ones_initializer())
        return total + tf.reduce_sum(dense(x)) * w

    infeed_data = tf.data.Dataset.from_tensors(tf.ones([2, 3])).repeat()
    from ipu_emulator.ipu import ipu_infeed_queue
    infeed = ipu_infeed_queue.IPUInfeedQueue(infeed_data)
    with tf.name_scope("outer"), scopes.ipu_scope("/device:IPU:0"):
        [total] = ipu_compiler.compile(lambda: loops.repeat(3, body, [0.0], infeed), [])
    names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    assert names == ["outer/keras_dense/bias", "outer/keras_dense/kernel", "scoped/w"]
    assert not any("while" in op.name.split("/") for op in graph.get_operations()
                   if op.type == "VarHandleOp")
    with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
        assert session.run(total) == pytest.approx(3 * 6.0)  # 3 iterations of sum(ones @ 1)


# --- logging hooks -------------------------------------------------------------------------

def logged_values(lines, tag):
    pattern = re.compile(r"^%s = (\S+)" % re.escape(tag))
    return [float(m.group(1)) for m in map(pattern.match, lines) if m]


def test_logging_tensor_hook_prints_the_last_iteration_of_each_engine_run(tmp_path, tf_log):
    # Each engine run is 4 steps of batch 8; the hook sees the last step's batch.
    estimator(tmp_path, 4, params={"log": {"batch sum": "batch_sum"}}).train(
        input_fn(), steps=8)
    expected = [X[24:32].sum(), X[56:64].sum()]
    np.testing.assert_allclose(logged_values(tf_log.lines, "batch sum"), expected, rtol=1e-5)


def test_logging_tensor_hook_in_evaluation(tmp_path, tf_log):
    est = estimator(tmp_path, 4, params={"log": {"batch sum": "batch_sum"}})
    est.evaluate(input_fn(), steps=8)
    np.testing.assert_allclose(logged_values(tf_log.lines, "batch sum"),
                               [X[24:32].sum(), X[56:64].sum()], rtol=1e-5)


# --- PRE_COMPILE ----------------------------------------------------------------------------

def pre_compile_options():
    options = ipu_config.IPUConfig()
    options.device_connection.type = ipu_config.DeviceConnectionType.PRE_COMPILE
    options.device_connection.version = "ipu2"
    return options


def test_pre_compile_returns_zeros_and_leaves_the_weights(tmp_path, tf_log):
    est = estimator(tmp_path, 4, ipu_options=pre_compile_options())
    with record.capture() as runs:
        est.train(input_fn(), steps=8)
    assert runs.runs == []  # nothing executed on a device
    losses = [float(line.split("loss = ")[1].split(",")[0])
              for line in tf_log.lines if line.startswith("loss = ")]
    assert losses == [0.0, 0.0]
    assert est.get_variable_value("global_step") == 8
    np.testing.assert_array_equal(est.get_variable_value("sequential/dense/kernel"),
                                  np.zeros((3, 1), np.float32))
    results = est.evaluate(input_fn(), steps=4)
    assert results["loss"] == 0.0 and results["mae"] == 0.0
    predictions = list(est.predict(input_fn(False), num_predictions=5))
    assert len(predictions) == 5
    for prediction in predictions:
        np.testing.assert_array_equal(prediction, np.zeros(1, np.float32))


def test_without_pre_compile_the_same_estimator_trains(tmp_path, tf_log):
    est = estimator(tmp_path, 4)
    est.train(input_fn(), steps=8)
    assert np.any(est.get_variable_value("sequential/dense/kernel") != 0)


# --- SDK 1.x pipeline_depth -------------------------------------------------------------------

def pipeline_model_fn(mode, params):
    def stage1(x, y):
        return tf.compat.v1.layers.dense(x, 4, use_bias=False), y

    def stage2(hidden, y):
        prediction = tf.compat.v1.layers.dense(hidden, 1, use_bias=False)
        return tf.reduce_mean(tf.square(prediction - y))

    def optimizer_function(loss):
        return pipelining_ops.OptimizerFunctionOutput(
            tf.compat.v1.train.GradientDescentOptimizer(0.01), loss)

    return IPUPipelineEstimatorSpec(mode, [stage1, stage2], optimizer_function=optimizer_function,
                                    **params["depth"])


def pipeline_estimator(tmp_path, iterations_per_loop, depth):
    options = ipu_config.IPUConfig()
    options.auto_select_ipus = 2
    config = RunConfig(ipu_run_config=IPURunConfig(iterations_per_loop=iterations_per_loop,
                                                   num_shards=2, ipu_options=options),
                       model_dir=str(tmp_path))
    return IPUPipelineEstimator(pipeline_model_fn, config=config, params={"depth": depth})


def test_pipeline_depth_counts_pipeline_runs_per_engine_run(tmp_path):
    # SDK 1.2: iterations_per_loop=3 with pipeline_depth=4 is 3 pipeline runs of 4 batches.
    est = pipeline_estimator(tmp_path, 3, {"pipeline_depth": 4})
    with record.capture() as runs:
        est.train(input_fn(), steps=6)
    assert [run.iterations for run in runs.runs] == [12, 12]
    assert est.get_variable_value("global_step") == 6


def test_gradient_accumulation_count_keeps_the_sdk_3_rule(tmp_path):
    est = pipeline_estimator(tmp_path, 3, {"gradient_accumulation_count": 4})
    with pytest.raises(ValueError, match=r"^`IPURunConfig.iterations_per_loop` \(got 3\) "
                                         r"cannot be less than"):
        est.train(input_fn(), steps=6)
    est = pipeline_estimator(tmp_path, 8, {"gradient_accumulation_count": 4})
    with record.capture() as runs:
        est.train(input_fn(), steps=8)
    assert [run.iterations for run in runs.runs] == [8]


def test_pipeline_depth_is_the_accumulation_count():
    spec = IPUPipelineEstimatorSpec(ModeKeys.PREDICT, [lambda x: x], pipeline_depth=6)
    assert spec.gradient_accumulation_count == spec.pipeline_depth == 6
    assert spec.iterations_count_pipeline_runs
    spec = IPUPipelineEstimatorSpec(ModeKeys.PREDICT, [lambda x: x],
                                    gradient_accumulation_count=6)
    assert not spec.iterations_count_pipeline_runs


# --- through the runner, TF1 and TF2 mode ------------------------------------------------------

def run_layout(name, *args, tf1, cwd):
    return run_emulator("run", *(["--tf1"] if tf1 else []), LAYOUTS / name, *args, cwd=cwd)


@pytest.mark.parametrize("tf1", [True, False], ids=["tf1", "tf2"])
def test_cifar10_estimator_trains_evaluates_and_predicts(tmp_path, tf1):
    result = run_layout("ipu_estimator_cifar10_layout.py", "--model-dir", str(tmp_path / "m"),
                        tf1=tf1, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    final = re.match(r"final: loss (\S+) accuracy (\S+) global_step 8 predictions 10$",
                     lines[-1])
    assert final, result.stdout
    assert math.isfinite(float(final.group(1))) and 0.0 <= float(final.group(2)) <= 1.0
    assert lines[-2] == ("variables: global_step sequential/conv2d/bias sequential/conv2d/kernel "
                         "sequential/dense/bias sequential/dense/kernel")
    assert "generated CIFAR-10-shaped stand-in" in result.stderr  # offline data announced
    # The IPULoggingTensorHook printed the loss of each training engine run's last step.
    logged = re.findall(r"INFO:tensorflow:ipu loss = ([0-9.e+-]+)", result.stderr)
    assert len(logged) == 2 and all(math.isfinite(float(value)) for value in logged)


@pytest.mark.parametrize("tf1", [True, False], ids=["tf1", "tf2"])
def test_pipeline_estimator_logging_hook_prints_the_stage_tensor(tmp_path, tf1):
    result = run_layout("pipeline_estimator_logging_hook_layout.py", tf1=tf1, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "final: global_step 16"
    logged = re.findall(r"INFO:tensorflow:stage loss = ([0-9.e+-]+)", result.stderr)
    assert len(logged) == 2  # once per engine run (2 runs of 8 micro-batches)
    assert all(0.0 < float(value) < 5.0 for value in logged)


# --- IPULoggingTensorHook -----------------------------------------------------------------------

def ipu_hook_model_fn(features, labels, mode, params):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="zeros")])
    loss = tf.reduce_mean(tf.square(model(features) - labels))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    hook = params["hook"]
    log_op = hook.log({"batch sum": tf.reduce_sum(features)})
    return IPUEstimatorSpec(mode, loss=loss, train_op=tf.group(train_op, log_op),
                            training_hooks=[hook])


def train_with_ipu_hook(tmp_path, **hook_kwargs):
    hook = ipu_session_run_hooks.IPULoggingTensorHook(**hook_kwargs)
    config = RunConfig(ipu_run_config=IPURunConfig(iterations_per_loop=4),
                       model_dir=str(tmp_path))
    IPUEstimator(ipu_hook_model_fn, config=config, params={"hook": hook}).train(
        input_fn(), steps=12)


def test_ipu_logging_tensor_hook_logs_the_last_iteration(tmp_path, tf_log):
    train_with_ipu_hook(tmp_path, every_n_iter=2)
    # Runs 0 and 2 are logged (every 2nd), each with its last batch (steps 3 and 11).
    np.testing.assert_allclose(logged_values(tf_log.lines, "batch sum"),
                               [X[24:32].sum(), X[88:96].sum()], rtol=1e-5)


def test_ipu_logging_tensor_hook_all_mode_and_at_end(tmp_path, tf_log):
    train_with_ipu_hook(
        tmp_path, at_end=True,
        logging_mode=ipu_session_run_hooks.IPULoggingTensorHook.LoggingMode.ALL)
    lines = [line for line in tf_log.lines if line.startswith("batch sum = ")]
    assert len(lines) == 1  # only at the end: everything outfed since the start
    values = np.array(lines[0][len("batch sum = "):].strip("[]").split(), np.float32)
    np.testing.assert_allclose(values, [X[i * 8:(i + 1) * 8].sum() for i in range(12)],
                               rtol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    ({}, "Either every_n_iter or every_n_secs should be provided (but not both), or at_end "
         "should be True."),
    ({"every_n_iter": 1, "every_n_secs": 1}, "Either every_n_iter or every_n_secs"),
    ({"every_n_iter": 0}, "Invalid every_n_iter=0."),
])
def test_ipu_logging_tensor_hook_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ipu_session_run_hooks.IPULoggingTensorHook(**kwargs)


GRAPH_SCRIPT = """
import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

with tf.Graph().as_default():
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(16, dtype=np.float32))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(2, drop_remainder=True))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed.enqueue(tf.reduce_sum(x))

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(4, body, infeed_queue=infeed))
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session() as session:
        session.run(infeed.initializer)
        session.run(run)
        print("outfed", session.run(dequeue).tolist())
"""


def test_loops_in_a_hand_built_graph_work_in_tf2_mode(tmp_path):
    # Without --tf1 TensorFlow would build a v2 while loop, whose body is a function graph
    # of its own; the loop must stay a loop of the graph, so its outfeed can be dequeued.
    script = tmp_path / "graph_script.py"
    script.write_text(GRAPH_SCRIPT)
    result = run_emulator("run", script, cwd=tmp_path).check()
    assert result.stdout.strip().splitlines()[-1] == "outfed [1.0, 5.0, 9.0, 13.0]"
