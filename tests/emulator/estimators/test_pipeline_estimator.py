"""IPUPipelineEstimatorSpec and IPUPipelineEstimator (Graphcore's TensorFlow API reference,
``ipu.ipu_pipeline_estimator``)."""
import re

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import config as ipu_config
from ipu_emulator.ipu.ipu_estimator import ModeKeys
from ipu_emulator.ipu.ipu_pipeline_estimator import (IPUPipelineEstimator,
                                                     IPUPipelineEstimatorSpec)
from ipu_emulator.ipu.ipu_run_config import IPURunConfig, RunConfig
from ipu_emulator.ipu.ops import pipelining_ops
from tests.support.child_python import ROOT, run_emulator

TRUE_W = np.array([[1.0], [-2.0], [0.5]], np.float32)
RNG = np.random.RandomState(0)
X = RNG.randn(128, 3).astype(np.float32)
Y = (X @ TRUE_W + 0.3).astype(np.float32)
W1 = np.eye(3, 4, dtype=np.float32)  # stage 1: x -> [x, 0]
W2 = np.zeros((4, 1), np.float32)


def input_fn(repeat=True):
    def make():
        dataset = tf.data.Dataset.from_tensor_slices((X, Y))
        return (dataset.repeat() if repeat else dataset).batch(8, drop_remainder=True)
    return make


def two_stage_model_fn(mode, params):
    """A linear model split over two stages: h = x W1 on IPU 0, y = h W2 + b on IPU 1."""
    def stage1(x, y):
        w1 = tf.compat.v1.get_variable("w1", initializer=W1)
        return tf.matmul(x, w1), y

    def stage2(h, y):
        w2 = tf.compat.v1.get_variable("w2", initializer=W2)
        b = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
        prediction = tf.matmul(h, w2) + b
        if mode == ModeKeys.PREDICT:
            return {"y": prediction}
        loss = tf.reduce_mean(tf.square(prediction - y))
        if mode == ModeKeys.EVAL:
            return loss, prediction, y
        return loss

    def optimizer_function(loss):
        return pipelining_ops.OptimizerFunctionOutput(
            tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"]), loss)

    def eval_metrics_fn(loss, prediction, y):
        return {"loss": loss, "mae": tf.compat.v1.metrics.mean_absolute_error(y, prediction)}

    return IPUPipelineEstimatorSpec(
        mode, computational_stages=[stage1, stage2],
        gradient_accumulation_count=params.get("gac", 4), optimizer_function=optimizer_function,
        eval_metrics_fn=eval_metrics_fn)


def pipeline_config(tmp_path=None, iterations_per_loop=8, num_shards=2, **kwargs):
    cfg = ipu_config.IPUConfig()
    cfg.auto_select_ipus = num_shards
    return RunConfig(
        ipu_run_config=IPURunConfig(iterations_per_loop=iterations_per_loop,
                                    num_shards=num_shards, ipu_options=cfg),
        model_dir=str(tmp_path) if tmp_path is not None else None, **kwargs)


def make_estimator(tmp_path, learning_rate=0.05, model_fn=two_stage_model_fn, **kwargs):
    return IPUPipelineEstimator(model_fn, config=pipeline_config(tmp_path, **kwargs),
                                params={"learning_rate": learning_rate})


# --- the spec ------------------------------------------------------------------------------

def test_spec_fields_and_extra_pipeline_arguments():
    spec = IPUPipelineEstimatorSpec(ModeKeys.PREDICT, [len, len], gradient_accumulation_count=4,
                                    pipeline_schedule=pipelining_ops.PipelineSchedule.Interleaved)
    assert IPUPipelineEstimatorSpec._fields == (
        "mode", "computational_stages", "gradient_accumulation_count", "eval_metrics_fn",
        "optimizer_function", "device_mapping", "loss_accumulator_dtype", "training_hooks",
        "evaluation_hooks", "prediction_hooks", "reduction_method", "pipeline_op_kwargs")
    assert spec.pipeline_op_kwargs == {
        "pipeline_schedule": pipelining_ops.PipelineSchedule.Interleaved}
    assert spec.reduction_method == pipelining_ops.GradientAccumulationReductionMethod.SUM
    # SDK 1.x called the accumulation count ``pipeline_depth``.
    assert IPUPipelineEstimatorSpec(ModeKeys.PREDICT, [len, len],
                                    pipeline_depth=6).gradient_accumulation_count == 6


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": ModeKeys.PREDICT},
     "`IPUPipelineEstimatorSpec` must contain `gradient_accumulation_count`"),
    ({"mode": ModeKeys.PREDICT, "gradient_accumulation_count": 0},
     "`IPUPipelineEstimatorSpec` must contain `gradient_accumulation_count`"),
    ({"mode": ModeKeys.TRAIN, "gradient_accumulation_count": 4},
     "`IPUPipelineEstimatorSpec` must contain `optimizer_function` when training"),
    ({"mode": ModeKeys.EVAL, "gradient_accumulation_count": 4},
     "`IPUPipelineEstimatorSpec` must contain `eval_metrics_fn` when evaluating"),
    ({"mode": ModeKeys.PREDICT, "gradient_accumulation_count": 4, "accumulate_outfeed": True},
     "`accumulate_outfeed` cannot be set in `IPUPipelineEstimatorSpec`: the "
     "IPUPipelineEstimator sets it"),
])
def test_spec_checks(kwargs, message):
    with pytest.raises(ValueError) as info:
        IPUPipelineEstimatorSpec(computational_stages=[len, len], **kwargs)
    assert str(info.value) == message


# --- the estimator's checks -------------------------------------------------------------------

def test_model_fn_must_not_take_features_or_labels():
    def model_fn(features, mode):
        return None

    with pytest.raises(ValueError) as info:
        IPUPipelineEstimator(model_fn, config=pipeline_config())
    assert str(info.value) == (
        "The `model_fn` used with `IPUPipelineEstimator` must not have `features` or `labels` "
        "arguments. They are instead passed to the first pipeline stage function.")


def test_config_must_be_a_run_config():
    with pytest.raises(ValueError, match="^`config` must be provided with type "
                                         "`ipu_run_config.RunConfig`$"):
        IPUPipelineEstimator(two_stage_model_fn, params={})


def test_model_fn_must_return_a_pipeline_spec(tmp_path):
    def model_fn(mode):
        return {"stages": []}

    estimator = IPUPipelineEstimator(model_fn, config=pipeline_config(tmp_path))
    with pytest.raises(TypeError, match="^`model_fn` must return IPUPipelineEstimatorSpec$"):
        estimator.train(input_fn(), steps=8)


@pytest.mark.parametrize("iterations_per_loop, gac, message", [
    (2, 4, "`IPURunConfig.iterations_per_loop` (got 2) cannot be less than "
           "`gradient_accumulation_count` (got 4)"),
    (6, 4, "`IPURunConfig.iterations_per_loop` (got 6) must be divisible by "
           "`gradient_accumulation_count` (got 4)"),
])
def test_iterations_per_loop_against_accumulation_count(tmp_path, iterations_per_loop, gac,
                                                        message):
    estimator = IPUPipelineEstimator(
        two_stage_model_fn, config=pipeline_config(tmp_path, iterations_per_loop),
        params={"learning_rate": 0.1, "gac": gac})
    with pytest.raises(ValueError) as info:
        estimator.train(input_fn(), steps=iterations_per_loop)
    assert str(info.value) == message


@pytest.mark.parametrize("num_shards, stages, mapping, needed", [
    (2, 3, None, 3),      # more stages than shards
    (8, 2, None, 2),      # so few that half the shards would idle
    (4, 4, [0, 1, 1, 0], 2),  # devices counted from the mapping, not the stages
])
def test_pipeline_devices_must_fit_the_shards(tmp_path, num_shards, stages, mapping, needed):
    def model_fn(mode):
        def stage(*args):
            return args
        return IPUPipelineEstimatorSpec(
            mode, [stage] * stages, gradient_accumulation_count=8, device_mapping=mapping,
            optimizer_function=lambda loss: None)

    estimator = IPUPipelineEstimator(model_fn, config=pipeline_config(tmp_path, 8, num_shards))
    with pytest.raises(ValueError) as info:
        estimator.train(input_fn(), steps=8)
    assert str(info.value) == (
        "This pipeline requires {} devices, but `IPURunConfig.num_shards` was set to {} "
        "(num_shards/2 < pipeline_devices <= num_shards).".format(needed, num_shards))


def test_steps_must_be_a_multiple_of_iterations_per_loop(tmp_path):
    with pytest.raises(ValueError, match=r"^steps \(12\) must be a multiple of "
                                         r"iterations_per_loop \(8\)$"):
        make_estimator(tmp_path).train(input_fn(), steps=12)


# --- running the pipeline -----------------------------------------------------------------------

def batch_losses(first, count, w2=W2, b=0.0):
    """Per-micro-batch MSE of the two-stage model with the given last-stage weights."""
    losses = []
    for i in range(first, first + count):
        x, y = X[i * 8:(i + 1) * 8], Y[i * 8:(i + 1) * 8]
        losses.append(np.mean(np.square(x @ W1 @ w2 + b - y)))
    return losses


def test_reported_loss_is_the_mean_loss_per_micro_batch(tmp_path, tf_log):
    """Training outfeeds the loss summed over each pass of 4 micro-batches; the estimator
    reports the mean per micro-batch (learning rate 0 keeps the weights fixed)."""
    estimator = make_estimator(tmp_path, learning_rate=0.0, log_step_count_steps=8)
    with record.capture() as runs:
        estimator.train(input_fn(), steps=16)
    assert runs.engine_runs == 2
    # Each run is recorded as a pipeline: 2 passes of 4 micro-batches over IPUs 0 and 1.
    pipeline = runs.runs[0].pipeline
    assert (pipeline.gradient_accumulation_count, pipeline.repeat_count,
            pipeline.device_mapping, pipeline.training) == (4, 2, (0, 1), True)
    assert len(runs.runs[0].stages) == 2
    assert estimator.get_variable_value("global_step") == 16
    assert tf_log.losses() == [pytest.approx(np.mean(batch_losses(0, 8)), rel=1e-5),
                               pytest.approx(np.mean(batch_losses(8, 8)), rel=1e-5)]


def test_training_lowers_the_loss_and_resumes_from_checkpoints(tmp_path):
    estimator = make_estimator(tmp_path)
    before = estimator.evaluate(input_fn(), steps=8)["loss"]
    estimator.train(input_fn(), steps=64)
    after = estimator.evaluate(input_fn(), steps=8)["loss"]
    assert after < before / 5
    trained_w2 = estimator.get_variable_value("w2")
    frozen = make_estimator(tmp_path, learning_rate=0.0)
    frozen.train(input_fn(), steps=8)
    np.testing.assert_array_equal(frozen.get_variable_value("w2"), trained_w2)
    assert frozen.get_variable_value("global_step") == 72


def test_evaluate_runs_eval_metrics_fn_on_the_host(tmp_path):
    estimator = make_estimator(tmp_path)
    estimator.train(input_fn(), steps=16)
    w2, b = estimator.get_variable_value("w2"), estimator.get_variable_value("b")
    w1 = estimator.get_variable_value("w1")
    results = estimator.evaluate(input_fn(), steps=16)
    predictions = X[:128] @ w1 @ w2 + b
    expected_losses = [np.mean(np.square(predictions[i * 8:(i + 1) * 8] - Y[i * 8:(i + 1) * 8]))
                       for i in range(16)]
    assert set(results) == {"loss", "mae", "global_step"}
    assert results["global_step"] == 16
    assert results["loss"] == pytest.approx(np.mean(expected_losses), rel=1e-4)
    assert results["mae"] == pytest.approx(np.mean(np.abs(predictions - Y)), rel=1e-4)


def test_eval_metrics_fn_must_return_the_loss(tmp_path):
    def model_fn(mode, params):
        spec = two_stage_model_fn(mode, params)
        return spec._replace(eval_metrics_fn=lambda loss, prediction, y: {"mse": loss})

    estimator = IPUPipelineEstimator(model_fn, config=pipeline_config(tmp_path),
                                     params={"learning_rate": 0.1})
    with pytest.raises(ValueError, match="^`eval_metrics_fn` must return a dict containing "
                                         "\"loss\""):
        estimator.evaluate(input_fn(), steps=8)


def test_predict(tmp_path):
    estimator = make_estimator(tmp_path)
    estimator.train(input_fn(), steps=16)
    w1, w2 = estimator.get_variable_value("w1"), estimator.get_variable_value("w2")
    b = estimator.get_variable_value("b")
    predictions = list(estimator.predict(input_fn(), num_predictions=20))
    assert len(predictions) == 20
    np.testing.assert_allclose(np.stack([p["y"] for p in predictions]),
                               X[:20] @ w1 @ w2 + b, rtol=1e-5)


def test_predict_needs_a_tensor_or_dict_from_the_last_stage(tmp_path):
    def model_fn(mode, params):
        spec = two_stage_model_fn(mode, params)
        stage1, _ = spec.computational_stages
        return spec._replace(computational_stages=[stage1, lambda h, y: (h, y)])

    estimator = IPUPipelineEstimator(model_fn, config=pipeline_config(tmp_path),
                                     params={"learning_rate": 0.1})
    with pytest.raises(ValueError, match="^The last computational stage must return a single "
                                         "tensor or a dict of tensors when predicting"):
        next(estimator.predict(input_fn()))


def test_tutorial_style_script_runs_through_the_runner(tmp_path):
    """The pipelining tutorial's estimator example: SDK imports, tf.estimator.ModeKeys."""
    result = run_emulator("run", "--tf1", "--seed", "1",
                          ROOT / "examples" / "tf1_ipu_pipeline_estimator.py", "--steps", "160",
                          "--model-dir", tmp_path, cwd=tmp_path).check()
    assert "ipu_emulator: 10 engine runs, 160 loop iterations" in result.stderr
    losses = [float(x) for x in re.findall(r"loss = ([0-9.]+), step", result.stderr)]
    assert len(losses) == 10
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
