"""What a Keras model built inside an ``IPUStrategy`` scope can do, and the rules it follows.

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([...])
        model.compile(optimizer, loss, steps_per_execution=16)   # 16 batches per engine run
        model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=4)
        model.fit(dataset, epochs=2)

Such a model's class is swapped, when it is built, for a subclass with ``KerasExtensions``
mixed in (as Graphcore's SDK does).  ``fit``/``evaluate``/``predict`` check their data with
``data_adapter.plan_execution`` and record each execution of Keras's compiled function as one
engine run of ``steps_per_execution`` iterations.  Models built outside the scope are plain
Keras models.

Replication: a device with more IPUs than the model's shards (the pipeline's IPUs rounded up to
a power of two, or 1) holds ``IPUs // shards`` replicas of it.  The batches are shared out
between them as the SDK's data adapter does (``data_adapter``): ``steps_per_epoch``, ``steps``
and ``validation_steps`` count the batches of all replicas, each replica running
``steps // replicas`` of them, and ``steps_per_execution`` counts one replica's.  The emulator
runs the replicas' batches one after the other in one Keras execution, and adds up their
gradients before the weight update (the all-reduce: a sum, as the SDK's
``IPUStrategy`` reduces Keras's gradients), on top of any gradient accumulation: the same
weights every replica would hold.

Callbacks: the batch hooks of the callbacks given to ``fit``/``evaluate``/``predict`` see
per-replica step numbers; with ``set_asynchronous_callbacks(True)`` they are called for every
step of an execution, after it (the SDK calls them during it, from the outfeed), each with the
execution's logs; without, once per execution.

Emulator notes: Keras feeds the data itself (no IPU infeed is created), so the infeed and
outfeed options are validated and kept but change nothing on the CPU; ``jit_compile`` is
always off, for the reasons given in ``ipu_strategy``.
"""
import inspect
import logging

import tensorflow as tf

from ipu_emulator.runtime import feed_messages, keras_stages, tf2_programs
from . import data_adapter, pipelining
from .accumulation import check_accumulation_arguments

_log = logging.getLogger("ipu_emulator")

_RUN_EAGERLY_MESSAGE = ("Keras models cannot run eagerly when using `IPUStrategy`. Set "
                        "`run_eagerly=False` when calling `compile`.")
_OPTION_ALTERNATIVES = {"gradient_accumulation_count": "gradient_accumulation_steps_per_replica"}


# Keras's optimizers (not the legacy ones, which make their slots otherwise).
_KerasOptimizer = tf.keras.optimizers.Optimizer


class KerasExtensions(pipelining.PipeliningExtensions):
    """Methods mixed into Keras models built inside an ``IPUStrategy`` scope (pipelining's
    are in ``pipelining``)."""

    # -- options ----------------------------------------------------------------------

    def _ipu_options(self):
        options = self.__dict__.get("_ipu_extension_options")
        if options is None:
            options = {"gradient_accumulation_steps_per_replica": None,
                       "experimental_normalize_gradients": None,
                       "gradient_accumulation_reduction_method": "sum",
                       "gradient_accumulation_optimizer_kwargs": {},
                       "infeed_queue_options": {}, "outfeed_queue_options": {},
                       "asynchronous_callbacks": False}
            self.__dict__["_ipu_extension_options"] = options
        return options

    def set_gradient_accumulation_options(self, gradient_accumulation_steps_per_replica=None,
                                          experimental_normalize_gradients=None,
                                          gradient_accumulation_reduction_method="sum",
                                          **gradient_accumulation_optimizer_kwargs):
        """Accumulate the gradients of N batches and update the weights once per N."""
        steps = gradient_accumulation_steps_per_replica
        method = check_accumulation_arguments(steps, experimental_normalize_gradients,
                                              gradient_accumulation_reduction_method)
        for key, alternative in (("opt", None), ("num_mini_batches",
                                                 "gradient_accumulation_steps_per_replica")):
            if key in gradient_accumulation_optimizer_kwargs:
                hint = ("Set the `{}` argument to `set_gradient_accumulation_options` instead."
                        .format(alternative) if alternative
                        else "This argument is automatically set by Keras.")
                raise ValueError("Found `{}` key in `gradient_accumulation_optimizer_kwargs`. {}"
                                 .format(key, hint))
        options = self._ipu_options()
        options.update(gradient_accumulation_steps_per_replica=steps,
                       experimental_normalize_gradients=experimental_normalize_gradients,
                       gradient_accumulation_reduction_method=method,
                       gradient_accumulation_optimizer_kwargs=dict(
                           gradient_accumulation_optimizer_kwargs))

    def set_infeed_queue_options(self, **infeed_queue_kwargs):
        """Options for the infeed Keras creates (e.g. ``prefetch_depth``)."""
        _reject_keys(infeed_queue_kwargs, ("dataset", "infeed_spec", "element_spec"),
                     "infeed_queue_kwargs", "This argument is automatically set by Keras.")
        feed_messages.check_prefetch_depth(infeed_queue_kwargs.get("prefetch_depth"))
        self._ipu_options()["infeed_queue_options"] = dict(infeed_queue_kwargs)

    def set_outfeed_queue_options(self, **outfeed_queue_kwargs):
        """Options for the outfeed Keras creates (e.g. ``buffer_depth``)."""
        _reject_keys(outfeed_queue_kwargs, ("outfeed_mode", "device_ordinal"),
                     "outfeed_queue_kwargs", "This argument is not compatible with Keras.")
        feed_messages.check_buffer_depth(outfeed_queue_kwargs.get("buffer_depth"))
        self._ipu_options()["outfeed_queue_options"] = dict(outfeed_queue_kwargs)

    def set_asynchronous_callbacks(self, asynchronous=False):
        self._ipu_options()["asynchronous_callbacks"] = bool(asynchronous)

    # -- compile / fit / evaluate / predict ---------------------------------------------

    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None,
                weighted_metrics=None, run_eagerly=None, steps_per_execution=None,
                jit_compile=None, **kwargs):
        if run_eagerly:
            raise RuntimeError(_RUN_EAGERLY_MESSAGE)
        del jit_compile  # the emulated IPU runs plain TensorFlow (see ipu_strategy)
        if "experimental_steps_per_execution" in kwargs:
            # TensorFlow 2.4's name, which the SDK 2.x Keras takes; today's Keras refuses it.
            _log.warning("The argument `steps_per_execution` is no longer experimental. Pass "
                         "`steps_per_execution` instead of `experimental_steps_per_execution`.")
            legacy = kwargs.pop("experimental_steps_per_execution")
            steps_per_execution = steps_per_execution or legacy
        if steps_per_execution in (None, 1):
            _log.info("The model `%s` has been configured with only 1 steps per execution. "
                      "Consider increasing the value for the `steps_per_execution` argument "
                      "passed to the `compile()` method to improve performance.", self.name)
        self.__dict__["_ipu_accumulating"] = None
        self.__dict__["_ipu_compiled_steps"] = steps_per_execution or 1
        return super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                               loss_weights=loss_weights, weighted_metrics=weighted_metrics,
                               run_eagerly=False, steps_per_execution=steps_per_execution,
                               jit_compile=False, **kwargs)

    def fit(self, *args, **kwargs):
        call = _arguments("fit", self, args, kwargs)
        if call.get("validation_split") and call.get("validation_data") is None:
            # As the SDK's fit does, split the arrays first: the replicas share out the
            # training part, and the rest is the validation data.
            (call["x"], call["y"], call["sample_weight"]), call["validation_data"] = \
                _train_validation_split(call)
            call["validation_split"] = 0.0
        epochs = call.get("epochs", 1) - call.get("initial_epoch", 0)
        plan = self._ipu_prepare(call, "steps_per_epoch", "train_function", epochs=epochs)
        self._ipu_wrap_callbacks(call, plan.replicas)
        self._ipu_build_optimizer()
        # While fit runs, the model's steps per execution is the one fit cut to its epoch:
        # the SDK's validation, and a callback's evaluate or predict, start from it.
        outer = self.__dict__.get("_ipu_fitting")
        self.__dict__["_ipu_fitting"] = _Fitting(plan.steps_per_execution)
        try:
            with _steps_per_execution(self, plan.steps_per_execution * plan.replicas):
                return super().fit(**call)
        finally:
            self.__dict__["_ipu_fitting"] = outer

    def evaluate(self, *args, **kwargs):
        call = _arguments("evaluate", self, args, kwargs)
        # Keras's fit validates with a data handler of its own, made from the validation data
        # as given; here the validation runs the batches the SDK's would, as any evaluate.
        validating = call.pop("_use_cached_eval_dataset", False)
        fitting = self.__dict__.get("_ipu_fitting")
        if validating and fitting is not None and not fitting.validation_checked:
            # The SDK's fit makes its validation data handler once, for one replica (its
            # default), before evaluate shares the batches out: its checks apply first.
            fitting.validation_checked = True
            data_adapter.plan_execution(call.get("x"), call.get("y"), call.get("batch_size"),
                                        call.get("steps"), fitting.steps_per_execution)
        plan = self._ipu_prepare(call, "steps", "test_function")
        self._ipu_wrap_callbacks(call, plan.replicas)
        with _steps_per_execution(self, plan.steps_per_execution * plan.replicas):
            return super().evaluate(**call)

    def predict(self, *args, **kwargs):
        call = _arguments("predict", self, args, kwargs)
        plan = self._ipu_prepare(call, "steps", "predict_function")
        self._ipu_wrap_callbacks(call, plan.replicas)
        with _steps_per_execution(self, plan.steps_per_execution * plan.replicas):
            return super().predict(**call)

    def _ipu_wrap_callbacks(self, kwargs, replicas):
        per_step = self._ipu_options()["asynchronous_callbacks"]
        callbacks = kwargs.get("callbacks")
        if callbacks is None or (replicas == 1 and not per_step):
            return
        if isinstance(callbacks, tf.keras.callbacks.CallbackList):
            return
        kwargs["callbacks"] = [
            c if isinstance(c, _KERAS_OWN_CALLBACKS) else _StepCallback(c, replicas, per_step)
            for c in callbacks]

    def _ipu_prepare(self, call, steps_key, function, epochs=1):
        """Check the call's data and share its batches out between the replicas, as the SDK
        does; change ``call`` so that Keras runs those batches, all replicas' in turn."""
        if self.run_eagerly:
            raise RuntimeError(_RUN_EAGERLY_MESSAGE)
        training = function == "train_function"
        fitting = self.__dict__.get("_ipu_fitting")
        if fitting is not None and not training:
            requested = fitting.steps_per_execution
        else:
            # What compile asked for (a call under way may have changed Keras's).
            requested = (self.__dict__.get("_ipu_compiled_steps")
                         or self._ipu_steps_per_execution())
        replicas = self._ipu_replication_factor()
        plan = data_adapter.plan_execution(call.get("x"), call.get("y"), call.get("batch_size"),
                                           call.get(steps_key), requested, replicas, epochs)
        call["x"], call[steps_key] = plan.keras_x, plan.keras_steps
        if plan.keras_batch_size:
            call["batch_size"] = plan.keras_batch_size
        self.__dict__.setdefault("_ipu_batch_bytes", {})[function] = plan.batch_bytes
        self.__dict__["_ipu_replicas"] = replicas
        # A pipelined model accumulates its gradients over the pipeline's micro-batches.
        pipeline = self._ipu_pipeline_plan(plan.steps_per_execution, training)
        self.__dict__.setdefault("_ipu_pipeline_plans", {})[training] = pipeline
        if pipeline is not None:
            if training:
                self._ipu_install_accumulation(pipeline.accumulation, pipeline.mean, replicas)
            return plan
        accumulation = self._ipu_options()["gradient_accumulation_steps_per_replica"]
        if training and replicas > 1 and not (accumulation and accumulation > 1):
            self._ipu_install_accumulation(1, replicas=replicas)
        if training and accumulation and accumulation > 1:
            if plan.steps_per_execution % accumulation:
                raise RuntimeError(
                    "The model has been configured to use gradient accumulation for training, "
                    "however the current `steps_per_execution` value (set to {}) is not divisible "
                    "by `gradient_accumulation_steps_per_replica` ({}). You need to adjust either "
                    "`steps_per_execution` or`gradient_accumulation_steps_per_replica` to make "
                    "sure that `steps_per_execution` is divisible by "
                    "`gradient_accumulation_steps_per_replica`.".format(
                        plan.steps_per_execution, accumulation))
            self._ipu_install_accumulation(accumulation, replicas=replicas)
        return plan

    def _ipu_build_optimizer(self):
        """Make the optimizer's variables (its slots) before fit's first trace, exactly as
        Keras's ``train_step`` would make them at its first ``apply_gradients``: for every
        trainable weight, in the optimizer's name scope.  A function whose first trace
        creates variables is traced a second time by TensorFlow, without them; made here, the
        train function is traced once (a small model's first fit: about 0.3 s of CPU less).
        With gradient accumulation, its accumulators are made here too.  Only for Keras's own
        ``train_step`` and optimizers (not a loss-scaling one)."""
        optimizer = getattr(self, "optimizer", None)
        if (not isinstance(optimizer, _KerasOptimizer)
                or type(optimizer).apply_gradients is not _KerasOptimizer.apply_gradients
                or type(self).train_step is not tf.keras.Model.train_step
                or not self.built or not self.trainable_variables):
            return
        accumulating = self.__dict__.get("_ipu_accumulating")
        wrapped = optimizer.__dict__.get("apply_gradients")
        with self.distribute_strategy.scope():
            if wrapped is None and not getattr(optimizer, "_built", False):
                with tf.name_scope(optimizer.name):
                    optimizer.build(self.trainable_variables)
            elif accumulating is not None and wrapped == accumulating.apply_gradients:
                # The accumulators too, as its first apply_gradients makes them.
                accumulating.prepare(self.trainable_variables)

    def _ipu_steps_per_execution(self):
        variable = getattr(self, "_steps_per_execution", None)
        return 1 if variable is None else int(variable.numpy())

    # -- gradient accumulation -----------------------------------------------------------

    def _ipu_install_accumulation(self, steps, mean=None, replicas=1):
        """Update the weights once per ``steps`` batches of each of ``replicas`` replicas,
        with the replicas' gradients added up (their all-reduce)."""
        if mean is None:
            options = self._ipu_options()
            mean = (options["gradient_accumulation_reduction_method"] != "sum"
                    or bool(options["experimental_normalize_gradients"]))
        current = self.__dict__.get("_ipu_accumulating")
        if (current is not None and current.steps == steps and current.mean == mean
                and current.replicas == replicas and current.optimizer is self.optimizer):
            return
        self.__dict__["_ipu_accumulating"] = _GradientAccumulation(self.optimizer, steps, mean,
                                                                   replicas)
        # Keras must rebuild its train function around the accumulating optimizer.
        self.train_function = None

    # -- one engine run per execution -------------------------------------------------------

    def make_train_function(self, force=False):
        return self._ipu_recorded("train_function", super().make_train_function(force))

    def make_test_function(self, force=False):
        return self._ipu_recorded("test_function", super().make_test_function(force))

    def make_predict_function(self, force=False):
        return self._ipu_recorded("predict_function", super().make_predict_function(force))

    def _ipu_recorded(self, attribute, function):
        if isinstance(function, _RecordedExecution):
            return function
        recorded = _RecordedExecution(self, function, attribute)
        setattr(self, attribute, recorded)
        return recorded


class _Fitting:
    """A fit under way: the steps per execution it runs (one replica's, cut to its epoch),
    and whether its validation data has had the SDK's one-replica checks."""

    def __init__(self, steps_per_execution):
        self.steps_per_execution = steps_per_execution
        self.validation_checked = False


def _arguments(name, model, args, kwargs):
    """The arguments of a call to Keras's ``Model.<name>``, by name, as given (no defaults);
    keywords Keras's signature does not name (``_use_cached_eval_dataset``) kept as they are."""
    signature = inspect.signature(getattr(tf.keras.Model, name))
    named = {key: value for key, value in kwargs.items() if key in signature.parameters}
    call = signature.bind_partial(model, *args, **named).arguments
    call.pop("self", None)
    for key, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            call.update(call.pop(key, {}))
    call.update((key, value) for key, value in kwargs.items() if key not in named)
    return call


def _train_validation_split(call):
    """Keras's own split of ``fit``'s arrays by ``validation_split``."""
    from tf_keras.src.engine import data_adapter as keras_data_adapter
    return keras_data_adapter.train_validation_split(
        (call.get("x"), call.get("y"), call.get("sample_weight")),
        validation_split=call["validation_split"])


# Keras adds these itself and finds them by type: they are never wrapped.
_KERAS_OWN_CALLBACKS = (tf.keras.callbacks.History, tf.keras.callbacks.ProgbarLogger)


class _StepCallback(tf.keras.callbacks.Callback):
    """A user's callback seen through the IPU's steps: Keras calls the batch hooks once per
    execution with its own step numbers (over all replicas' batches); the callback gets
    per-replica step numbers, and with ``per_step`` one call per step of the execution (the
    SDK's asynchronous callbacks), each with the execution's logs."""

    def __init__(self, callback, replicas, per_step):
        super().__init__()
        self.callback, self._replicas, self._per_step = callback, replicas, per_step
        self._first = {}
        self._supports_tf_logs = getattr(callback, "_supports_tf_logs", False)

    def set_model(self, model):
        super().set_model(model)
        self.callback.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        self.callback.set_params(params)

    def _begin(self, mode, batch, logs=None):
        self._first[mode] = batch

    def _end(self, mode, batch, logs=None):
        first = self._first.pop(mode, batch) // self._replicas
        last = max(first, (batch + 1) // self._replicas - 1)
        begin = getattr(self.callback, "on_{}_batch_begin".format(mode))
        end = getattr(self.callback, "on_{}_batch_end".format(mode))
        if not self._per_step:
            begin(first)
            end(last, logs)
            return
        for step in range(first, last + 1):
            begin(step)
            end(step, logs)

    def on_train_batch_begin(self, batch, logs=None):
        self._begin("train", batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self._end("train", batch, logs)

    def on_test_batch_begin(self, batch, logs=None):
        self._begin("test", batch, logs)

    def on_test_batch_end(self, batch, logs=None):
        self._end("test", batch, logs)

    def on_predict_batch_begin(self, batch, logs=None):
        self._begin("predict", batch, logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._end("predict", batch, logs)

    def on_epoch_begin(self, epoch, logs=None):
        self.callback.on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self.callback.on_epoch_end(epoch, logs)

    def on_train_begin(self, logs=None):
        self.callback.on_train_begin(logs)

    def on_train_end(self, logs=None):
        self.callback.on_train_end(logs)

    def on_test_begin(self, logs=None):
        self.callback.on_test_begin(logs)

    def on_test_end(self, logs=None):
        self.callback.on_test_end(logs)

    def on_predict_begin(self, logs=None):
        self.callback.on_predict_begin(logs)

    def on_predict_end(self, logs=None):
        self.callback.on_predict_end(logs)


def _reject_keys(kwargs, keys, argument, reason):
    for key in keys:
        if key in kwargs:
            raise ValueError("Found `{}` key in `{}`. {}".format(key, argument, reason))


class _steps_per_execution:  # pylint: disable=invalid-name
    """Use ``steps`` per execution for one call (when the data holds fewer batches)."""

    def __init__(self, model, steps):
        self._model, self._steps, self._saved = model, steps, None

    def __enter__(self):
        variable = getattr(self._model, "_steps_per_execution", None)
        if variable is not None and int(variable.numpy()) != self._steps:
            self._saved = int(variable.numpy())
            variable.assign(self._steps)

    def __exit__(self, *exc):
        if self._saved is not None:
            self._model._steps_per_execution.assign(self._saved)  # pylint: disable=protected-access


class _RecordedExecution:
    """Keras's compiled function; each call is one engine run of steps_per_execution steps."""

    def __init__(self, model, function, attribute):
        self._model = model
        self._function = function
        self._attribute = attribute
        self._training = attribute == "train_function"
        self.__name__ = getattr(function, "__name__", "keras_function")

    def __call__(self, iterator):
        model = self._model
        replicas = model.__dict__.get("_ipu_replicas", 1)
        # Keras runs all the replicas' batches: one replica's share is the engine run's loop.
        steps = model._ipu_steps_per_execution() // replicas  # pylint: disable=protected-access
        info = tf2_programs.program_info(self._function, (iterator,), {}, key="keras")
        batch_bytes = model.__dict__.get("_ipu_batch_bytes", {}).get(self._attribute, 0)
        pipeline = model.__dict__.get("_ipu_pipeline_plans", {}).get(self._training)
        stage_fields = (keras_stages.run_fields(model, self._function, (iterator,), pipeline,
                                           batch_bytes) if pipeline is not None else None)
        if replicas > 1:
            stage_fields = _with_replicas(stage_fields, replicas,
                                          _all_reduce_bytes(model) if self._training else 0)
        return tf2_programs.execute(
            info, self._function, (iterator,), iterations=steps, infeed_bytes=batch_bytes,
            outfeed_bytes=None, stage_fields=stage_fields)

    def __getattr__(self, name):
        return getattr(self._function, name)


def _with_replicas(fields, replicas, all_reduce_bytes):
    def with_replicas():
        found = dict(fields()) if fields is not None else {}
        found.update(replicas=replicas, all_reduce_bytes=all_reduce_bytes)
        return found
    return with_replicas


def _all_reduce_bytes(model):
    """What one replica all-reduces per weight update: the gradients of its trainable weights."""
    return sum(int(v.shape.num_elements()) * v.dtype.size for v in model.trainable_variables)


class _GradientAccumulation:
    """Wraps ``optimizer.apply_gradients``: add each step's gradients to accumulators and
    apply their sum (or mean) once every ``steps`` calls, as ``GradientAccumulationOptimizerV2``
    does for the SDK's Keras.  With ``replicas`` > 1 the replicas' batches come one after the
    other: the update waits for ``steps`` of each, and adds the replicas' sums (or means)."""

    def __init__(self, optimizer, steps, mean, replicas=1):
        self.optimizer = optimizer
        self.steps = steps
        self.mean = mean
        self.replicas = replicas
        self._apply = optimizer.__dict__.get("_ipu_original_apply", optimizer.apply_gradients)
        optimizer.__dict__["_ipu_original_apply"] = self._apply
        optimizer.apply_gradients = self.apply_gradients
        self._sums = {}   # each weight's accumulator, by the weight's reference
        with tf.init_scope():
            self._count = tf.Variable(0, dtype=tf.int64, trainable=False,
                                      name="gradient_accumulation_count")

    def prepare(self, variables):
        """Make the accumulators and the optimizer's slots of ``variables`` now (eagerly),
        not at the first trace of the train function (TensorFlow traces a function a second
        time when its first trace made variables)."""
        with tf.init_scope():
            self._make_sums(variables)
            if hasattr(self.optimizer, "build"):
                self.optimizer.build(variables)

    def _make_sums(self, variables):
        for v in variables:
            if v.ref() not in self._sums:
                self._sums[v.ref()] = tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                                  name="gradient_accumulator")

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if any(v.ref() not in self._sums for _, v in pairs):
            self.prepare([v for _, v in pairs])
        sums = [self._sums[v.ref()] for _, v in pairs]
        for total, (gradient, _) in zip(sums, pairs):
            total.assign_add(gradient)
        count = self._count.assign_add(1)

        def apply_accumulated():
            scale = 1.0 / self.steps if self.mean else 1.0   # per replica, then summed
            self._apply([(total * scale, v) for total, (_, v) in zip(sums, pairs)],
                        *args, **kwargs)
            for total in sums:
                total.assign(tf.zeros_like(total))
            return tf.constant(True)

        return tf.cond(tf.equal(count % (self.steps * self.replicas), 0), apply_accumulated,
                       lambda: tf.constant(False))


_extended_classes = {}


def extended_class(cls):
    """``cls`` with ``KerasExtensions`` mixed in (made once per class, same name)."""
    if issubclass(cls, KerasExtensions):
        return cls
    extended = _extended_classes.get(cls)
    if extended is None:
        extended = type(cls.__name__, (KerasExtensions, cls), {"__module__": cls.__module__})
        _extended_classes[cls] = extended
    return extended


def install():
    """Idempotently make models built inside an ``IPUStrategy`` scope IPU Keras models."""
    model_class = tf.keras.Model
    if getattr(model_class.__init__, "_ipu_emulator_hook", False):
        return
    original_init = model_class.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        # Only an IPUStrategy has ``enable_keras_extensions`` (checked by attribute, so this
        # module need not import the strategy, which imports it).
        strategy = getattr(self, "_distribution_strategy", None)
        if getattr(strategy, "enable_keras_extensions", False):
            self.__class__ = extended_class(type(self))

    __init__._ipu_emulator_hook = True  # pylint: disable=protected-access
    model_class.__init__ = __init__
