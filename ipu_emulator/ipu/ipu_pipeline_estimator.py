"""``IPUPipelineEstimator``: an ``IPUEstimator`` whose model is a pipeline of stages.

``model_fn(mode, params, config)`` takes no features or labels: it returns an
``IPUPipelineEstimatorSpec`` naming the stage functions, and the infeed element goes to the
first stage.  Each engine run executes ``iterations_per_loop`` micro-batches, i.e.
``iterations_per_loop / gradient_accumulation_count`` pipeline passes (the pipeline's
``repeat_count``), each ending in one weight update.

    def model_fn(mode, params):
        def stage1(images, labels):
            return tf.compat.v1.layers.dense(images, 256, tf.nn.relu), labels
        def stage2(hidden, labels):
            logits = tf.compat.v1.layers.dense(hidden, 10)
            return tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        def optimizer_function(loss):
            return pipelining_ops.OptimizerFunctionOutput(
                tf.compat.v1.train.GradientDescentOptimizer(0.01), loss)
        return IPUPipelineEstimatorSpec(mode, [stage1, stage2],
                                        gradient_accumulation_count=8,
                                        optimizer_function=optimizer_function)

The training loss the estimator reports is the mean loss per micro-batch: the pipeline
outfeeds the loss summed over each pass, which the host divides by the accumulation count.
"""
import collections

import numpy as np
import tensorflow as tf
from tensorflow.python.util import nest

from ._estimator_compat import ModeKeys
from . import _estimator_support as _support
from . import ipu_outfeed_queue
from .gradient_accumulation import GradientAccumulationReductionMethod
from .ipu_estimator import _IPUEstimatorBase, _Program, _verify_model_fn_args, merge_loop_dims
from .ops import pipelining_ops


class IPUPipelineEstimatorSpec(collections.namedtuple("IPUPipelineEstimatorSpec", [
        "mode", "computational_stages", "gradient_accumulation_count", "eval_metrics_fn",
        "optimizer_function", "device_mapping", "loss_accumulator_dtype", "training_hooks",
        "evaluation_hooks", "prediction_hooks", "reduction_method", "pipeline_op_kwargs"])):
    """What ``model_fn`` returns to an ``IPUPipelineEstimator``.

    ``eval_metrics_fn(*last_stage_outputs)`` runs on the host and returns a dict of metrics
    (tensors, averaged over the evaluation, or ``(value, update_op)`` pairs) that must
    include ``"loss"``.  Other keyword arguments go to ``pipelining_ops.pipeline``.
    """

    # True when made with SDK 1.x's ``pipeline_depth`` (see ``__new__``); a class default so
    # copies made by ``_replace`` keep SDK 3.x semantics.
    iterations_count_pipeline_runs = False

    def __new__(cls, mode, computational_stages, gradient_accumulation_count=None,
                eval_metrics_fn=None, optimizer_function=None, device_mapping=None,
                loss_accumulator_dtype=None, training_hooks=None, evaluation_hooks=None,
                prediction_hooks=None,
                reduction_method=GradientAccumulationReductionMethod.SUM,
                pipeline_depth=None, **pipeline_op_kwargs):
        # SDK 1.x called it ``pipeline_depth``, and there ``iterations_per_loop`` counted
        # pipeline runs (each ``pipeline_depth`` micro-batches and one weight update), not
        # micro-batches as since SDK 2.0.
        counts_pipeline_runs = gradient_accumulation_count is None and bool(pipeline_depth)
        if gradient_accumulation_count is None:
            gradient_accumulation_count = pipeline_depth
        if not gradient_accumulation_count:
            raise ValueError(
                "`IPUPipelineEstimatorSpec` must contain `gradient_accumulation_count`")
        if mode == ModeKeys.TRAIN and not optimizer_function:
            raise ValueError(
                "`IPUPipelineEstimatorSpec` must contain `optimizer_function` when training")
        if mode == ModeKeys.EVAL and not eval_metrics_fn:
            raise ValueError(
                "`IPUPipelineEstimatorSpec` must contain `eval_metrics_fn` when evaluating")
        if "accumulate_outfeed" in pipeline_op_kwargs:
            # The estimator decides how the outfeed is used (it accumulates the loss).
            raise ValueError("`accumulate_outfeed` cannot be set in "
                             "`IPUPipelineEstimatorSpec`: the IPUPipelineEstimator sets it")
        spec = super().__new__(
            cls, mode, computational_stages, gradient_accumulation_count, eval_metrics_fn,
            optimizer_function, device_mapping, loss_accumulator_dtype,
            tuple(training_hooks or ()), tuple(evaluation_hooks or ()),
            tuple(prediction_hooks or ()), reduction_method, pipeline_op_kwargs)
        spec.iterations_count_pipeline_runs = counts_pipeline_runs
        return spec

    @property
    def pipeline_depth(self):
        """SDK 1.x's name for ``gradient_accumulation_count``."""
        return self.gradient_accumulation_count


class IPUPipelineEstimator(_IPUEstimatorBase):
    """Estimator for pipelined models; same arguments as ``IPUEstimator``.

    ``config.ipu_run_config.num_shards`` must cover the IPUs the stages use, and
    ``iterations_per_loop`` must be a multiple of the spec's
    ``gradient_accumulation_count`` (a spec made with SDK 1.x's ``pipeline_depth`` instead
    runs ``iterations_per_loop`` whole pipeline passes per engine run, as SDK 1.x did).
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None,
                 warm_start_from=None, train_batch_size=None, eval_batch_size=None,
                 predict_batch_size=None):
        if model_fn is not None:
            names = _support.fn_args(model_fn)
            if "features" in names or "labels" in names:
                raise ValueError(
                    "The `model_fn` used with `IPUPipelineEstimator` must not have `features` "
                    "or `labels` arguments. They are instead passed to the first pipeline "
                    "stage function.")
            _verify_model_fn_args(model_fn, params, needs_features=False)
        super().__init__(model_fn, model_dir=model_dir, config=config, params=params,
                         warm_start_from=warm_start_from, train_batch_size=train_batch_size,
                         eval_batch_size=eval_batch_size, predict_batch_size=predict_batch_size)

    # -- the spec ---------------------------------------------------------------------------

    def _call_model_fn(self, mode):
        spec = _support.call_with_optional_args(
            self._model_fn,
            {"mode": mode, "params": self._params_for(mode), "config": self._config})
        if not isinstance(spec, IPUPipelineEstimatorSpec):
            raise TypeError("`model_fn` must return IPUPipelineEstimatorSpec")
        self._check_against_run_config(spec)
        return spec

    def _check_against_run_config(self, spec):
        ipl = self._iterations_per_loop
        gac = spec.gradient_accumulation_count
        # SDK 1.x's pipeline_depth: iterations_per_loop is any number of pipeline runs.
        if not spec.iterations_count_pipeline_runs:
            if ipl < gac:
                raise ValueError(
                    "`IPURunConfig.iterations_per_loop` (got {}) cannot be less than "
                    "`gradient_accumulation_count` (got {})".format(ipl, gac))
            if ipl % gac != 0:
                raise ValueError(
                    "`IPURunConfig.iterations_per_loop` (got {}) must be divisible by "
                    "`gradient_accumulation_count` (got {})".format(ipl, gac))
        if spec.device_mapping:
            devices = len(set(nest.flatten(spec.device_mapping)))
        else:
            devices = len(spec.computational_stages)
        num_shards = self._config.ipu_run_config.num_shards
        if not num_shards / 2 < devices <= num_shards:
            raise ValueError(
                "This pipeline requires {} devices, but `IPURunConfig.num_shards` was set to "
                "{} (num_shards/2 < pipeline_devices <= num_shards).".format(devices,
                                                                              num_shards))

    def _pipeline(self, spec, infeed, outfeed, name, stages=None, **overrides):
        kwargs = dict(spec.pipeline_op_kwargs)
        kwargs.update(overrides)
        # pipeline() builds its stages in this name scope, as loops build their bodies: the
        # variables get the names an IPUEstimator gives them.
        return pipelining_ops.pipeline(
            computational_stages=list(stages or spec.computational_stages),
            gradient_accumulation_count=spec.gradient_accumulation_count,
            repeat_count=_pipeline_runs(self._iterations_per_loop, spec),
            infeed_queue=infeed, outfeed_queue=outfeed, device_mapping=spec.device_mapping,
            reduction_method=spec.reduction_method, name=name, **kwargs)

    # -- the three programs -----------------------------------------------------------------

    def _build_train(self, infeed, global_step):
        program = _Program()
        outfeed = ipu_outfeed_queue.IPUOutfeedQueue()

        def training_pipeline():
            spec = self._call_model_fn(ModeKeys.TRAIN)
            program.spec = spec
            pipeline_op = self._pipeline(
                spec, infeed, outfeed, "ipu_pipeline_estimator_train",
                optimizer_function=spec.optimizer_function, outfeed_loss=True,
                accumulate_outfeed=True, accumulate_outfeed_dtype=spec.loss_accumulator_dtype)
            with tf.control_dependencies([pipeline_op]):
                return global_step.assign_add(self._iterations_per_loop, read_value=False)

        program.fetch = self._compile(training_pipeline)
        with tf.device("/device:CPU:0"):
            program.dequeue = outfeed.dequeue()
        accumulation_count = program.spec.gradient_accumulation_count
        # One summed loss per pipeline pass: the mean per micro-batch is mean / count.
        program.run_loss = lambda outputs, outfed: float(
            np.mean(nest.flatten(outfed)[0])) / accumulation_count
        return program

    def _build_eval(self, infeed, outfeed):
        program = _Program()
        program.device_loss = False

        def evaluation_pipeline():
            spec = self._call_model_fn(ModeKeys.EVAL)
            program.spec = spec
            return self._pipeline(spec, infeed, outfeed, "ipu_pipeline_estimator_eval")

        program.fetch = self._compile(evaluation_pipeline)
        with tf.device("/device:CPU:0"):
            program.dequeue = outfeed.dequeue()
            _build_eval_metrics(program, program.spec.eval_metrics_fn, program.dequeue)
        return program

    def _build_predict(self, infeed, outfeed):
        program = _Program()

        def prediction_pipeline():
            spec = self._call_model_fn(ModeKeys.PREDICT)
            program.spec = spec
            stages = list(spec.computational_stages)
            stages[-1] = _returning_predictions(stages[-1])
            return self._pipeline(spec, infeed, outfeed, "ipu_pipeline_estimator_predict",
                                  stages=stages)

        program.fetch = self._compile(prediction_pipeline)
        with tf.device("/device:CPU:0"):
            program.dequeue = outfeed.dequeue()
        return program


def _pipeline_runs(iterations_per_loop, spec):
    """Pipeline runs (weight updates) per engine run: ``iterations_per_loop`` counts
    micro-batches, or with SDK 1.x's ``pipeline_depth`` the runs themselves."""
    if spec.iterations_count_pipeline_runs:
        return iterations_per_loop
    return iterations_per_loop // spec.gradient_accumulation_count


def _returning_predictions(last_stage):
    """The last stage, checked to return what ``predict`` can yield."""
    def stage(*args, **kwargs):
        outputs = last_stage(*args, **kwargs)
        is_dict = isinstance(outputs, dict) and all(
            isinstance(v, tf.Tensor) for v in outputs.values())
        if not (isinstance(outputs, tf.Tensor) or is_dict):
            raise ValueError("The last computational stage must return a single tensor or a "
                             "dict of tensors when predicting, but it returned {}".format(
                                 outputs))
        return outputs
    return stage


def _build_eval_metrics(program, eval_metrics_fn, dequeued):
    """``eval_metrics_fn`` on the host over every micro-batch's last-stage outputs."""
    merged = merge_loop_dims(dequeued)
    if isinstance(merged, dict):
        metrics = eval_metrics_fn(**merged)
    elif isinstance(merged, (list, tuple)):
        metrics = eval_metrics_fn(*merged)
    else:
        metrics = eval_metrics_fn(merged)
    if not isinstance(metrics, dict) or "loss" not in metrics:
        raise ValueError("`eval_metrics_fn` must return a dict containing \"loss\", but it "
                         "returned {}".format(metrics))
    metric_ops = {}
    for name, metric in metrics.items():
        if isinstance(metric, tuple) and len(metric) == 2:
            metric_ops[name] = metric
        else:  # a plain tensor: its mean over the whole evaluation
            metric_ops[name] = tf.compat.v1.metrics.mean(metric)
    program.host_fetches = {name: update for name, (_, update) in metric_ops.items()}
    program.host_values = {name: value for name, (value, _) in metric_ops.items()}


__all__ = ["IPUPipelineEstimator", "IPUPipelineEstimatorSpec"]
