"""IPURunConfig, RunConfig, IPUEstimatorSpec and IPUEstimator (Graphcore's TensorFlow API reference,
``ipu.ipu_run_config`` and ``ipu.ipu_estimator``)."""
import os

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.runtime import configured_system
from ipu_emulator.ipu import _estimator_compat as estimator_compat
from ipu_emulator.ipu import config as ipu_config
from ipu_emulator.ipu import ipu_compiler, scopes, utils
from ipu_emulator.ipu.ipu_estimator import IPUEstimator, IPUEstimatorSpec, ModeKeys
from ipu_emulator.ipu.ipu_run_config import IPURunConfig, RunConfig
from tests.support.child_python import ROOT, run_emulator

TRUE_W = np.array([[1.0], [-2.0], [0.5]], np.float32)
TRUE_B = 0.3


def regression_data(n=128, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 3).astype(np.float32)
    return x, (x @ TRUE_W + TRUE_B).astype(np.float32)


X, Y = regression_data()


def input_fn(batch=8, repeat=True, with_labels=True, count=None):
    def make():
        data = (X[:count], Y[:count]) if with_labels else X[:count]
        dataset = tf.data.Dataset.from_tensor_slices(data)
        if repeat:
            dataset = dataset.repeat()
        return dataset.batch(batch, drop_remainder=True)
    return make


def linear_model_fn(features, labels, mode, params):
    """y = x w + b with MSE loss; plain SGD at ``params['learning_rate']``."""
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
    b = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
    prediction = tf.matmul(features, w) + b
    if mode == ModeKeys.PREDICT:
        return IPUEstimatorSpec(mode, predictions={"y": prediction, "twice": 2 * prediction})
    loss = tf.reduce_mean(tf.square(prediction - labels))
    if mode == ModeKeys.EVAL:
        if params.get("host_metrics"):
            def metric_fn(labels, prediction):
                return {"mae": tf.compat.v1.metrics.mean_absolute_error(labels, prediction)}
            return IPUEstimatorSpec(mode, loss=loss, eval_metrics=(
                metric_fn, {"labels": labels, "prediction": prediction}))
        return IPUEstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": tf.compat.v1.metrics.mean_absolute_error(labels, prediction)})
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"])
    return IPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss))


def run_config(tmp_path=None, iterations_per_loop=10, **kwargs):
    return RunConfig(ipu_run_config=IPURunConfig(iterations_per_loop=iterations_per_loop),
                     model_dir=str(tmp_path) if tmp_path is not None else None, **kwargs)


def make_estimator(tmp_path, learning_rate=0.1, model_fn=linear_model_fn, params=None,
                   **config_kwargs):
    params = dict({"learning_rate": learning_rate}, **(params or {}))
    return IPUEstimator(model_fn, config=run_config(tmp_path, **config_kwargs), params=params)


# --- IPURunConfig ------------------------------------------------------------------------

def test_ipu_run_config_fields_and_defaults():
    cfg = IPURunConfig()
    assert IPURunConfig._fields == ("iterations_per_loop", "ipu_options", "num_replicas",
                                    "num_shards", "ordinal", "prefetch_depth")
    assert tuple(cfg) == (1, None, 1, 1, 0, None)
    # SDK 2.0-2.3 keywords are still accepted.
    assert IPURunConfig(iterations_per_loop=4, compile_summary=True).iterations_per_loop == 4


def test_more_than_one_device_needs_ipu_options():
    with pytest.raises(ValueError) as info:
        IPURunConfig(num_shards=2)
    assert str(info.value) == ("IPU configuration requires more than one device, but "
                               "`ipu_options` is None")


def test_ipu_options_must_be_an_ipu_config():
    with pytest.raises(TypeError, match=r"^ipu_options must be an IPUConfig instance\.$"):
        IPURunConfig(ipu_options={"auto_select_ipus": 1})


def test_ordinal_must_name_a_configured_device():
    cfg = ipu_config.IPUConfig()
    cfg.auto_select_ipus = [1, 1]
    with pytest.raises(ValueError) as info:
        IPURunConfig(ipu_options=cfg, ordinal=2)
    assert str(info.value) == ("Only 2 device(s) available to choose from. You tried to pick "
                               "a device at ordinal 2")
    assert IPURunConfig(ipu_options=cfg, ordinal=1).ordinal == 1


def test_device_size_must_equal_replicas_times_shards():
    cfg = ipu_config.IPUConfig()
    cfg.auto_select_ipus = 4
    with pytest.raises(ValueError) as info:
        IPURunConfig(ipu_options=cfg, num_shards=2)
    assert str(info.value) == ("`IPURunConfig` configured with 2 devices (1 replicas times 2 "
                               "shards), but `ipu_options` configured with 4 devices")
    IPURunConfig(ipu_options=cfg, num_shards=2, num_replicas=2)
    by_id = ipu_config.IPUConfig()
    by_id.select_ipus = [16]  # a gc-info pair
    IPURunConfig(ipu_options=by_id, num_shards=2)


def test_old_ipu_options_record_uses_the_sdk_2_0_wording():
    opts = utils.create_ipu_config()
    opts = utils.auto_select_ipus(opts, 2)
    with pytest.raises(ValueError) as info:
        IPURunConfig(ipu_options=opts, num_shards=4)
    assert str(info.value) == ("`IPURunConfig` configured with 4 devices (1 num_replicas "
                               "times 4 num_shards), but `IpuOptions` configured with 2 "
                               "devices")
    assert IPURunConfig(ipu_options=opts, num_replicas=2).num_replicas == 2


@pytest.mark.parametrize("bad", [0, -1, 2.0])
def test_iterations_per_loop_must_be_positive(bad):
    with pytest.raises(ValueError, match="^iterations_per_loop must be a positive integer"):
        IPURunConfig(iterations_per_loop=bad)


# --- RunConfig ---------------------------------------------------------------------------------

def test_run_config_defaults_match_the_estimator():
    cfg = RunConfig()
    assert cfg.ipu_run_config == IPURunConfig()
    assert (cfg.save_checkpoints_secs, cfg.save_checkpoints_steps) == (600, None)
    assert (cfg.keep_checkpoint_max, cfg.log_step_count_steps, cfg.save_summary_steps) == (
        5, 100, 100)
    assert cfg.model_dir is None and cfg.tf_random_seed is None and cfg.master == ""
    assert cfg.session_config.allow_soft_placement
    assert (cfg.num_worker_replicas, cfg.is_chief) == (1, True)
    steps = RunConfig(save_checkpoints_steps=50)
    assert (steps.save_checkpoints_secs, steps.save_checkpoints_steps) == (None, 50)


def test_run_config_carries_the_ipu_run_config():
    ipu = IPURunConfig(iterations_per_loop=25)
    cfg = RunConfig(ipu_run_config=ipu, model_dir="/tmp/x", tf_random_seed=3, master="grpc")
    assert cfg.ipu_run_config is ipu
    assert (cfg.model_dir, cfg.tf_random_seed, cfg.master) == ("/tmp/x", 3, "grpc")


def test_checkpoint_steps_and_secs_are_exclusive():
    with pytest.raises(ValueError) as info:
        RunConfig(save_checkpoints_steps=10, save_checkpoints_secs=10)
    assert str(info.value) == ("save_checkpoints_steps and save_checkpoints_secs cannot be "
                               "both set.")


@pytest.mark.parametrize("kwargs, message", [
    ({"model_dir": ""}, "model_dir should be non-empty"),
    ({"save_summary_steps": -1}, "save_summary_steps should be >= 0"),
    ({"save_checkpoints_steps": -1}, "save_checkpoints_steps should be >= 0"),
    ({"save_checkpoints_secs": -1}, "save_checkpoints_secs should be >= 0"),
    ({"keep_checkpoint_max": -1}, "keep_checkpoint_max should be >= 0"),
    ({"keep_checkpoint_every_n_hours": 0}, "keep_checkpoint_every_n_hours should be > 0"),
    ({"log_step_count_steps": -1}, "log_step_count_steps should be >= 0"),
    ({"tf_random_seed": "7"}, "tf_random_seed must be integer."),
    ({"session_config": {"allow_soft_placement": True}},
     "session_config must be instance of ConfigProto"),
    ({"session_creation_timeout_secs": 0}, "session_creation_timeout_secs should be > 0"),
    ({"device_fn": 3}, 'device_fn must be callable with exactly one argument "op".'),
])
def test_run_config_checks(kwargs, message):
    with pytest.raises(ValueError) as info:
        RunConfig(**kwargs)
    assert str(info.value) == message


def test_run_config_replace():
    cfg = RunConfig(model_dir="/tmp/a", save_checkpoints_steps=10)
    new = cfg.replace(model_dir="/tmp/b", save_checkpoints_secs=30)
    assert (new.model_dir, new.save_checkpoints_secs, new.save_checkpoints_steps) == (
        "/tmp/b", 30, None)
    assert cfg.model_dir == "/tmp/a"
    with pytest.raises(ValueError, match="^ipu_run_config property is not allowed to be "
                                         "replaced.$"):
        cfg.replace(ipu_run_config=IPURunConfig())


# --- IPUEstimatorSpec -------------------------------------------------------------------------

def test_spec_fields_and_hooks_become_tuples():
    spec = IPUEstimatorSpec(ModeKeys.TRAIN, training_hooks=[tf.compat.v1.train.SessionRunHook()])
    assert IPUEstimatorSpec._fields == (
        "mode", "predictions", "loss", "train_op", "eval_metric_ops", "eval_metrics",
        "host_call", "training_hooks", "evaluation_hooks", "prediction_hooks")
    assert isinstance(spec.training_hooks, tuple) and spec.evaluation_hooks == ()


@pytest.mark.parametrize("name", ["host_call", "eval_metrics"])
def test_call_spec_shape_checks(name):
    with pytest.raises(TypeError, match="^`%s` must be a tuple$" % name):
        IPUEstimatorSpec(ModeKeys.EVAL, **{name: [len, []]})
    with pytest.raises(ValueError, match="^`%s` must have two elements$" % name):
        IPUEstimatorSpec(ModeKeys.EVAL, **{name: (len, [], 1)})
    with pytest.raises(TypeError, match="^first element in `%s` must be callable$" % name):
        IPUEstimatorSpec(ModeKeys.EVAL, **{name: (1, [])})


def test_second_element_types():
    with pytest.raises(TypeError, match="^second element in `host_call` must be a list$"):
        IPUEstimatorSpec(ModeKeys.TRAIN, host_call=(len, {"a": 1}))
    with pytest.raises(TypeError,
                       match="^second element in `eval_metrics` must be a list or dict$"):
        IPUEstimatorSpec(ModeKeys.EVAL, eval_metrics=(len, (1,)))
    IPUEstimatorSpec(ModeKeys.EVAL, eval_metrics=(len, {"a": 1}))


def test_spec_refuses_both_kinds_of_eval_metrics():
    with pytest.raises(ValueError,
                       match="^cannot specify both `eval_metric_ops` and `eval_metrics`$"):
        IPUEstimatorSpec(ModeKeys.EVAL, eval_metric_ops={}, eval_metrics=(len, []))


def test_compile_refuses_an_estimator_spec(graph):
    with pytest.raises(ValueError, match="^Your computation output contains an EstimatorSpec"):
        with scopes.ipu_scope("/device:IPU:0"):
            ipu_compiler.compile(lambda: IPUEstimatorSpec(ModeKeys.PREDICT, predictions=1.0))


# --- IPUEstimator construction ----------------------------------------------------------------

def test_config_must_be_an_ipu_run_config(tmp_path):
    message = "^`config` must be provided with type `ipu_run_config.RunConfig`$"
    with pytest.raises(ValueError, match=message):
        IPUEstimator(linear_model_fn, model_dir=str(tmp_path), params={})
    with pytest.raises(ValueError, match=message):
        IPUEstimator(linear_model_fn, config=IPURunConfig(), params={})


def test_model_fn_signature_checks():
    config = run_config()

    def no_features(labels, mode):
        return None

    def takes_extra(features, labels, hidden_size):
        return None

    def no_params(features, labels):
        return None

    with pytest.raises(ValueError, match=r"must include features argument\.$"):
        IPUEstimator(no_features, config=config)
    with pytest.raises(ValueError, match=r"has following not expected args: \['hidden_size'\]$"):
        IPUEstimator(takes_extra, config=config)
    with pytest.raises(ValueError, match=r"does not include params argument, but params "
                                         r"\(\{'a': 1\}\) is passed to Estimator\.$"):
        IPUEstimator(no_params, config=config, params={"a": 1})


def test_model_dir_conflict(tmp_path):
    with pytest.raises(ValueError) as info:
        IPUEstimator(linear_model_fn, model_dir=str(tmp_path / "a"),
                     config=run_config(tmp_path / "b"), params={})
    assert str(info.value) == (
        "model_dir are set both in constructor and RunConfig, but with different values. In "
        "constructor: '{}', in RunConfig: '{}' ".format(tmp_path / "a", tmp_path / "b"))
    estimator = IPUEstimator(linear_model_fn, model_dir=str(tmp_path / "a"),
                             config=run_config(), params={})
    assert estimator.model_dir == str(tmp_path / "a")
    assert estimator.config.model_dir == str(tmp_path / "a")


def test_temporary_model_dir_when_none_is_given():
    estimator = IPUEstimator(linear_model_fn, config=run_config(), params={})
    assert os.path.isdir(estimator.model_dir)


def test_global_batch_size_must_divide_over_replicas():
    cfg = ipu_config.IPUConfig()
    cfg.auto_select_ipus = 2
    config = RunConfig(ipu_run_config=IPURunConfig(num_replicas=2, ipu_options=cfg))
    with pytest.raises(ValueError) as info:
        IPUEstimator(linear_model_fn, config=config, params={}, train_batch_size=5)
    assert str(info.value) == ("train_batch_size (got 5) must be divisible by num_workers * "
                               "num_replicas (1 * 2 = 2)")


def test_params_get_the_local_batch_size(tmp_path):
    seen = {}

    def sized_input_fn(params):
        seen["input_fn"] = params["batch_size"]
        return input_fn(batch=params["batch_size"])()

    def model_fn(features, labels, mode, params):
        seen["model_fn"] = params["batch_size"]
        return linear_model_fn(features, labels, mode, dict(params, learning_rate=0.1))

    estimator = IPUEstimator(model_fn, config=run_config(tmp_path, iterations_per_loop=2),
                             params={}, train_batch_size=4)
    estimator.train(sized_input_fn, steps=2)
    assert seen == {"input_fn": 4, "model_fn": 4}
    with pytest.raises(ValueError, match="^`params` must not contain `batch_size`"):
        IPUEstimator(model_fn, config=run_config(), params={"batch_size": 4},
                     train_batch_size=4)


# --- training ----------------------------------------------------------------------------------

def test_training_runs_iterations_per_loop_steps_per_engine_run(tmp_path, tf_log):
    estimator = make_estimator(tmp_path)
    with record.capture() as runs:
        estimator.train(input_fn(), steps=40)
    assert runs.engine_runs == 4
    assert [run.iterations for run in runs.runs] == [10, 10, 10, 10]
    assert runs.runs[0].infeed_bytes_per_iteration == 8 * 4 * 4  # x (8x3) and y (8x1) floats
    assert estimator.get_variable_value("global_step") == 40
    assert os.path.basename(estimator.latest_checkpoint()) == "model.ckpt-40"


def test_loss_falls(tmp_path, tf_log):
    estimator = make_estimator(tmp_path, log_step_count_steps=10)
    before = estimator.evaluate(input_fn(), steps=10)["loss"]
    estimator.train(input_fn(), steps=50)
    after = estimator.evaluate(input_fn(), steps=10)["loss"]
    logged = tf_log.losses()
    assert len(logged) == 5  # one mean loss per engine run of 10 steps
    assert logged[-1] < logged[0] / 100
    assert after < before / 100
    w = estimator.get_variable_value("w")
    np.testing.assert_allclose(w, TRUE_W, atol=0.05)


def test_mean_loss_of_a_run_is_the_mean_of_its_steps(tmp_path, tf_log):
    """The reported loss of one engine run equals the average of the step losses."""
    estimator = make_estimator(tmp_path, learning_rate=0.0, iterations_per_loop=4,
                               log_step_count_steps=4)
    estimator.train(input_fn(), steps=4)
    # With a zero learning rate w = 0, b = 0, so each step's loss is mean(y^2) of its batch.
    expected = np.mean([np.mean(np.square(Y[i * 8:(i + 1) * 8])) for i in range(4)])
    assert tf_log.losses() == [pytest.approx(expected, rel=1e-5)]


def test_second_train_continues_from_the_checkpoint(tmp_path):
    first = make_estimator(tmp_path)
    first.train(input_fn(), steps=20)
    trained_w = first.get_variable_value("w")
    assert not np.allclose(trained_w, 0)
    # A new estimator on the same model_dir restores the weights and the global step: with a
    # zero learning rate the weights must stay exactly what the checkpoint holds.
    second = make_estimator(tmp_path, learning_rate=0.0)
    second.train(input_fn(), steps=10)
    np.testing.assert_array_equal(second.get_variable_value("w"), trained_w)
    assert second.get_variable_value("global_step") == 30


def test_max_steps(tmp_path):
    estimator = make_estimator(tmp_path)
    estimator.train(input_fn(), max_steps=20)
    assert estimator.get_variable_value("global_step") == 20
    with record.capture() as runs:
        estimator.train(input_fn(), max_steps=20)  # already there: skipped
    assert runs.engine_runs == 0
    with record.capture() as runs:
        estimator.train(input_fn(), max_steps=40)
    assert runs.engine_runs == 2
    assert estimator.get_variable_value("global_step") == 40


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": 15}, "steps (15) must be a multiple of iterations_per_loop (10)"),
    ({"max_steps": 25}, "max_steps (25) must be a multiple of iterations_per_loop (10)"),
    ({"steps": 10, "max_steps": 10}, "Can not provide both steps and max_steps."),
    ({"steps": 0}, "Must specify steps > 0, given: 0"),
    ({"max_steps": -10}, "Must specify max_steps > 0, given: -10"),
])
def test_train_step_checks(tmp_path, kwargs, message):
    with pytest.raises(ValueError) as info:
        make_estimator(tmp_path).train(input_fn(), **kwargs)
    assert str(info.value) == message


def test_incrementing_the_global_step_in_model_fn_is_refused(tmp_path):
    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return IPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    with pytest.raises(ValueError) as info:
        IPUEstimator(model_fn, config=run_config(tmp_path)).train(input_fn(), steps=10)
    assert str(info.value) == (
        "Illegal increment of the `global_step` variable in the `model_fn`. This is usually "
        "caused by passing it as an argument to the `Optimizer.minimize()` function. Please "
        "remove this argument as the IPUEstimator itself is responsible for incrementing it.")


def test_model_fn_sees_the_global_step_of_each_iteration(tmp_path):
    """Learning-rate schedules read the global step: it advances inside the loop."""
    seen = []

    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        step = tf.compat.v1.train.get_global_step()
        record_step = tf.compat.v1.py_func(lambda s: seen.append(int(s)) or np.int64(0),
                                           [step.read_value()], tf.int64)
        with tf.control_dependencies([record_step]):
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.0).minimize(loss)
        return IPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    IPUEstimator(model_fn, config=run_config(tmp_path, iterations_per_loop=3)).train(
        input_fn(), steps=6)
    assert seen == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("spec_kwargs, message", [
    ({"loss": None}, "EstimatorSpec must contain loss when training"),
    ({"train_op": None}, "EstimatorSpec must contain train_op when training"),
])
def test_training_spec_must_have_loss_and_train_op(tmp_path, spec_kwargs, message):
    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        fields = {"loss": loss,
                  "train_op": tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)}
        fields.update(spec_kwargs)
        return IPUEstimatorSpec(mode, **fields)

    with pytest.raises(ValueError) as info:
        IPUEstimator(model_fn, config=run_config(tmp_path)).train(input_fn(), steps=10)
    assert str(info.value) == message


def test_model_fn_must_return_a_spec(tmp_path):
    def model_fn(features, labels, mode):
        return {"loss": tf.reduce_sum(features)}

    with pytest.raises(ValueError, match="^`model_fn` must return IPUEstimatorSpec or "
                                         "EstimatorSpec$"):
        IPUEstimator(model_fn, config=run_config(tmp_path)).train(input_fn(), steps=10)


def test_plain_estimator_spec_is_accepted(tmp_path):
    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return estimator_compat.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    estimator = IPUEstimator(model_fn, config=run_config(tmp_path))
    estimator.train(input_fn(), steps=10)
    assert estimator.get_variable_value("global_step") == 10


def test_labels_from_input_fn_need_a_labels_argument(tmp_path):
    def model_fn(features, mode):
        return None

    with pytest.raises(ValueError, match="^model_fn does not take labels, but input_fn "
                                         "returns labels.$"):
        IPUEstimator(model_fn, config=run_config(tmp_path)).train(input_fn(), steps=10)


def test_input_fn_must_return_a_dataset(tmp_path):
    estimator = make_estimator(tmp_path)
    with pytest.raises(ValueError, match="^input_fn must return Dataset$"):
        estimator.train(lambda: (X, Y), steps=10)
    three = lambda: tf.data.Dataset.from_tensors((X[:4], Y[:4], Y[:4])).repeat()  # noqa: E731
    with pytest.raises(ValueError,
                       match="^Invalid dataset tuple, expected 1 or 2 elements, got 3$"):
        estimator.train(three, steps=10)


def test_dict_features(tmp_path):
    def dict_input_fn(params, mode):
        assert mode == ModeKeys.TRAIN
        return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(
            8, drop_remainder=True)

    def model_fn(features, labels, mode, params):
        return linear_model_fn(features["x"], labels, mode, params)

    estimator = IPUEstimator(model_fn, config=run_config(tmp_path),
                             params={"learning_rate": 0.1})
    estimator.train(dict_input_fn, steps=30)
    assert not np.allclose(estimator.get_variable_value("w"), 0)


def test_host_call_runs_on_the_host_after_every_step(tmp_path):
    received = []

    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

        def host_fn(step_loss):
            return tf.compat.v1.py_func(lambda v: received.append(float(v)) or np.int32(0),
                                        [step_loss], tf.int32)
        return IPUEstimatorSpec(mode, loss=loss, train_op=train_op, host_call=(host_fn, [loss]))

    IPUEstimator(model_fn, config=run_config(tmp_path, iterations_per_loop=1)).train(
        input_fn(), steps=3)
    assert len(received) == 3
    assert received[0] == pytest.approx(np.mean(np.square(Y[:8])), rel=1e-5)
    assert received[2] < received[0]
    with pytest.raises(ValueError, match="^host_call is not allowed for iterations_per_loop "
                                         "> 1$"):
        IPUEstimator(model_fn, config=run_config(tmp_path / "b", iterations_per_loop=2)).train(
            input_fn(), steps=2)


class CountingHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, stop_after=None):
        self.calls = {"begin": 0, "after_create_session": 0, "before_run": 0, "after_run": 0,
                      "end": 0}
        self.stop_after = stop_after
        self.steps = []
        self._step = None

    def begin(self):
        self.calls["begin"] += 1
        self._step = tf.compat.v1.train.get_global_step()

    def after_create_session(self, session, coord):
        self.calls["after_create_session"] += 1

    def before_run(self, run_context):
        self.calls["before_run"] += 1
        return tf.compat.v1.train.SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        self.calls["after_run"] += 1
        self.steps.append(int(run_values.results))
        if self.stop_after is not None and self.calls["after_run"] >= self.stop_after:
            run_context.request_stop()

    def end(self, session):
        self.calls["end"] += 1


def test_hooks_run_around_each_engine_run_and_can_stop_training(tmp_path):
    hook = CountingHook()
    estimator = make_estimator(tmp_path)
    estimator.train(input_fn(), steps=30, hooks=[hook])
    assert hook.calls == {"begin": 1, "after_create_session": 1, "before_run": 3,
                          "after_run": 3, "end": 1}
    stopper = CountingHook(stop_after=2)
    estimator.train(input_fn(), steps=100, hooks=[stopper])
    assert estimator.get_variable_value("global_step") == 50
    with pytest.raises(TypeError, match="^Hooks must be a SessionRunHook, given: 3$"):
        estimator.train(input_fn(), steps=10, hooks=[3])


def test_spec_training_hooks_are_run(tmp_path):
    hook = CountingHook()

    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        return spec._replace(training_hooks=(hook,))

    IPUEstimator(model_fn, config=run_config(tmp_path), params={"learning_rate": 0.1}).train(
        input_fn(), steps=20)
    assert hook.calls["after_run"] == 2


def test_exhausted_dataset_ends_training_after_the_completed_steps(tmp_path, tf_log):
    estimator = make_estimator(tmp_path)
    estimator.train(input_fn(repeat=False), steps=None)
    # 128 examples / batch 8 = 16 steps: one full run of 10, then 6 steps of the next.
    assert estimator.get_variable_value("global_step") == 16
    assert any("ran out during an engine run" in line for line in tf_log.lines)


def test_checkpoints_saved_every_n_steps_and_only_the_last_kept(tmp_path):
    estimator = make_estimator(tmp_path, save_checkpoints_steps=20, keep_checkpoint_max=2)
    estimator.train(input_fn(), steps=60)
    state = tf.compat.v1.train.get_checkpoint_state(str(tmp_path))
    names = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    assert names == ["model.ckpt-40", "model.ckpt-60"]


def test_saving_listeners_are_called(tmp_path):
    class Listener(tf.compat.v1.train.CheckpointSaverListener):
        def __init__(self):
            self.saved = []

        def after_save(self, session, global_step_value):
            self.saved.append(global_step_value)

    listener = Listener()
    make_estimator(tmp_path, save_checkpoints_steps=10).train(
        input_fn(), steps=20, saving_listeners=[listener])
    assert listener.saved == [0, 10, 20]


def test_warm_start_loads_trainable_variables(tmp_path):
    source = make_estimator(tmp_path / "source")
    source.train(input_fn(), steps=20)
    target = IPUEstimator(linear_model_fn, config=run_config(tmp_path / "target"),
                          params={"learning_rate": 0.0},
                          warm_start_from=str(tmp_path / "source"))
    target.train(input_fn(), steps=10)
    np.testing.assert_array_equal(target.get_variable_value("w"), source.get_variable_value("w"))
    assert target.get_variable_value("global_step") == 10  # the global step is not taken


def test_random_seed_makes_initial_weights_repeatable(tmp_path):
    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1])  # glorot-uniform random initial values
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        return IPUEstimatorSpec(mode, loss=loss, train_op=tf.no_op())

    values = []
    for name in ("a", "b"):
        estimator = IPUEstimator(model_fn, config=run_config(tmp_path / name, tf_random_seed=7))
        estimator.train(input_fn(), steps=10)
        values.append(estimator.get_variable_value("w"))
    np.testing.assert_array_equal(values[0], values[1])


def test_ipu_options_are_applied_when_the_session_starts(tmp_path):
    cfg = ipu_config.IPUConfig()
    cfg.auto_select_ipus = 2
    config = RunConfig(ipu_run_config=IPURunConfig(iterations_per_loop=10, num_shards=2,
                                                   ipu_options=cfg), model_dir=str(tmp_path))
    IPUEstimator(linear_model_fn, config=config, params={"learning_rate": 0.1}).train(
        input_fn(), steps=10)
    assert [device.num_ipus for device in configured_system.current().devices] == [2]


# --- evaluation -------------------------------------------------------------------------------

def trained(tmp_path, steps=20):
    estimator = make_estimator(tmp_path)
    estimator.train(input_fn(), steps=steps)
    return estimator


def numpy_metrics(estimator, batches):
    w = estimator.get_variable_value("w")
    b = estimator.get_variable_value("b")
    batch_losses, errors = [], []
    for i in range(batches):
        x, y = X[i * 8:(i + 1) * 8], Y[i * 8:(i + 1) * 8]
        prediction = x @ w + b
        batch_losses.append(np.mean(np.square(prediction - y)))
        errors.append(np.abs(prediction - y))
    return np.mean(batch_losses), np.mean(np.concatenate(errors))


@pytest.mark.parametrize("host_metrics", [False, True], ids=["on-device", "on-host"])
def test_evaluate_metrics_and_loss(tmp_path, host_metrics):
    trained(tmp_path)
    estimator = make_estimator(tmp_path, params={"host_metrics": host_metrics})
    with record.capture() as runs:
        results = estimator.evaluate(input_fn(), steps=10)
    assert runs.engine_runs == 1 and runs.runs[0].iterations == 10
    loss, mae = numpy_metrics(estimator, 10)
    assert set(results) == {"loss", "mae", "global_step"}
    assert results["global_step"] == 20
    assert results["loss"] == pytest.approx(loss, rel=1e-4)
    assert results["mae"] == pytest.approx(mae, rel=1e-4)


def test_evaluate_over_several_runs_accumulates_metrics(tmp_path):
    trained(tmp_path)
    estimator = IPUEstimator(linear_model_fn, config=run_config(tmp_path, iterations_per_loop=4),
                             params={"learning_rate": 0.1})
    with record.capture() as runs:
        results = estimator.evaluate(input_fn(), steps=12)
    assert runs.engine_runs == 3
    loss, mae = numpy_metrics(estimator, 12)
    assert results["loss"] == pytest.approx(loss, rel=1e-4)
    assert results["mae"] == pytest.approx(mae, rel=1e-4)


def test_evaluate_until_the_dataset_ends(tmp_path):
    estimator = trained(tmp_path)
    results = estimator.evaluate(input_fn(repeat=False), steps=None)
    loss, mae = numpy_metrics(estimator, 16)  # 128 examples, batch 8: 16 steps, 2 runs
    assert results["loss"] == pytest.approx(loss, rel=1e-4)
    assert results["mae"] == pytest.approx(mae, rel=1e-4)


def test_evaluate_checks(tmp_path):
    estimator = trained(tmp_path)
    with pytest.raises(ValueError, match=r"^steps \(5\) must be a multiple of "
                                         r"iterations_per_loop \(10\)$"):
        estimator.evaluate(input_fn(), steps=5)

    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1])
        return IPUEstimatorSpec(mode, loss=tf.reduce_mean(tf.matmul(features, w) - labels))

    with pytest.raises(ValueError, match="^EstimatorSpec must contain either eval_metric_ops "
                                         "or eval_metrics$"):
        IPUEstimator(model_fn, config=run_config(tmp_path)).evaluate(input_fn(), steps=10)

    def no_loss(features, labels, mode):
        return IPUEstimatorSpec(mode, eval_metric_ops={})

    with pytest.raises(ValueError, match="^EstimatorSpec must contain loss when evaluating$"):
        IPUEstimator(no_loss, config=run_config(tmp_path)).evaluate(input_fn(), steps=10)


def test_evaluate_without_checkpoint_uses_initial_values(tmp_path, tf_log):
    estimator = make_estimator(tmp_path)
    results = estimator.evaluate(input_fn(), steps=10)
    assert results["global_step"] == 0
    expected = np.mean([np.mean(np.square(Y[i * 8:(i + 1) * 8])) for i in range(10)])
    assert results["loss"] == pytest.approx(expected, rel=1e-5)
    assert any(line.startswith("Could not find trained model in model_dir") and
               line.endswith("running initialization to evaluate.") for line in tf_log.lines)


# --- prediction -------------------------------------------------------------------------------

def test_predict_yields_single_examples(tmp_path):
    estimator = trained(tmp_path)
    w, b = estimator.get_variable_value("w"), estimator.get_variable_value("b")
    predictions = list(estimator.predict(input_fn(with_labels=False), num_predictions=25))
    assert len(predictions) == 25
    assert set(predictions[0]) == {"y", "twice"}
    np.testing.assert_allclose(np.stack([p["y"] for p in predictions]), X[:25] @ w + b,
                               rtol=1e-5)


def test_predict_batches_keys_and_labels_ignored(tmp_path):
    estimator = trained(tmp_path)
    batches = list(estimator.predict(input_fn(with_labels=True), predict_keys=["twice"],
                                     yield_single_examples=False, num_predictions=3))
    assert len(batches) == 3 and set(batches[0]) == {"twice"}
    assert batches[0]["twice"].shape == (8, 1)
    with pytest.raises(ValueError, match=r"^Expected to run at least one output from "
                                         r"\['y', 'twice'\], provided \['z'\]\.$"):
        next(estimator.predict(input_fn(), predict_keys=["z"]))


def test_predict_until_the_dataset_ends(tmp_path):
    estimator = trained(tmp_path)
    predictions = list(estimator.predict(input_fn(repeat=False, with_labels=False)))
    assert len(predictions) == 128  # 16 batches: one run of 10 and 6 steps of the next


def test_predict_checks(tmp_path):
    def tensor_model_fn(features, mode):
        w = tf.compat.v1.get_variable("w", [3, 1])
        return IPUEstimatorSpec(mode, predictions=tf.matmul(features, w))

    def no_predictions(features, mode):
        return IPUEstimatorSpec(mode)

    estimator = IPUEstimator(tensor_model_fn, config=run_config(tmp_path))
    first = next(estimator.predict(input_fn(with_labels=False)))
    assert first.shape == (1,)
    with pytest.raises(ValueError, match="^predict_keys argument is not valid in case of "
                                         "non-dict predictions.$"):
        next(estimator.predict(input_fn(with_labels=False), predict_keys=["y"]))
    with pytest.raises(ValueError, match="^EstimatorSpec must contain predictions when "
                                         "predicting$"):
        next(IPUEstimator(no_predictions, config=run_config(tmp_path)).predict(
            input_fn(with_labels=False)))


# --- tf.estimator names --------------------------------------------------------------------------

def test_mode_keys_have_the_estimator_values():
    assert (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) == ("train", "eval", "infer")


def test_estimator_script_runs_through_the_runner(tmp_path):
    """An SDK-style script using tf.estimator.ModeKeys and the IPU estimator imports."""
    result = run_emulator("run", "--tf1", ROOT / "examples" / "tf1_ipu_estimator.py",
                          "--model-dir", tmp_path, "--steps", "40", cwd=tmp_path).check()
    # 40 training steps in runs of 10, then 2,500 test digits / 32 = 78 batches, evaluated
    # as 70 steps in runs of 10.
    assert "ipu_emulator: 11 engine runs, 110 loop iterations" in result.stderr
    accuracy = float(result.stdout.split("accuracy ")[1].split()[0])
    assert accuracy > 0.6


# --- replication ---------------------------------------------------------------------------------

def replicated_config(tmp_path, iterations_per_loop=4):
    cfg = ipu_config.IPUConfig()
    cfg.auto_select_ipus = 2
    return RunConfig(ipu_run_config=IPURunConfig(iterations_per_loop=iterations_per_loop,
                                                 num_replicas=2, ipu_options=cfg),
                     model_dir=str(tmp_path), log_step_count_steps=iterations_per_loop)


def replicated_model_fn(features, labels, mode, params):
    from ipu_emulator.ipu import optimizers
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
    prediction = tf.matmul(features, w)
    if mode == ModeKeys.PREDICT:
        return IPUEstimatorSpec(mode, predictions=prediction)
    loss = tf.reduce_mean(tf.square(prediction - labels))
    if mode == ModeKeys.EVAL:
        return IPUEstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": tf.compat.v1.metrics.mean_absolute_error(labels, prediction)})
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"])
    if params.get("cross_replica", True):
        optimizer = optimizers.CrossReplicaOptimizer(optimizer)
    return IPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss))


def test_replicated_training_reports_the_mean_loss_over_replicas(tmp_path, tf_log):
    estimator = IPUEstimator(replicated_model_fn, config=replicated_config(tmp_path),
                             params={"learning_rate": 0.0})
    with record.capture() as runs:
        estimator.train(input_fn(), steps=4)
    assert [(run.iterations, run.replicas) for run in runs.runs] == [(4, 2)]
    # Each of the 4 steps takes one batch per replica: the run's loss averages 8 batches.
    expected = np.mean([np.mean(np.square(Y[i * 8:(i + 1) * 8])) for i in range(8)])
    assert tf_log.losses() == [pytest.approx(expected, rel=1e-5)]


def test_replicated_training_needs_cross_replica_ops(tmp_path):
    estimator = IPUEstimator(replicated_model_fn, config=replicated_config(tmp_path),
                             params={"learning_rate": 0.1, "cross_replica": False})
    with pytest.raises(ValueError) as info:
        estimator.train(input_fn(), steps=4)
    assert str(info.value) == (
        "This is not a valid replicated training graph because no IpuCrossReplicaSum or "
        "IpuCrossReplicaMeanoperations were found. Did you remember to use the "
        "`tensorflow.python.ipu.optimizers.CrossReplicaOptimizer`?")


def test_replicated_evaluate_and_predict_cover_every_replica(tmp_path):
    estimator = IPUEstimator(replicated_model_fn, config=replicated_config(tmp_path),
                             params={"learning_rate": 0.05})
    estimator.train(input_fn(), steps=8)
    w = estimator.get_variable_value("w")
    results = estimator.evaluate(input_fn(), steps=4)  # 4 steps x 2 replicas = 8 batches
    prediction = X[:64] @ w
    losses = [np.mean(np.square(prediction[i * 8:(i + 1) * 8] - Y[i * 8:(i + 1) * 8]))
              for i in range(8)]
    assert results["loss"] == pytest.approx(np.mean(losses), rel=1e-4)
    # Each replica's metric covers its own 4 batches; the SDK averages the replicas.
    assert results["mae"] == pytest.approx(np.mean(np.abs(prediction - Y[:64])), rel=1e-4)
    predictions = list(estimator.predict(input_fn(with_labels=False), num_predictions=24))
    np.testing.assert_allclose(np.stack(predictions), X[:24] @ w, rtol=1e-5)
