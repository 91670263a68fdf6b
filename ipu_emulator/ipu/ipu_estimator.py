"""``IPUEstimator``: train, evaluate and predict with a ``model_fn``, on the IPU.

The estimator does what the tutorials do by hand: it wraps the dataset from ``input_fn`` in
an infeed, runs ``model_fn`` inside an on-device loop of ``iterations_per_loop`` steps,
compiles that loop for ``/device:IPU:<ordinal>`` and runs it once per ``Session.run``.
Evaluation and prediction send their per-step results back through an outfeed.

    def model_fn(features, labels, mode, params):
        logits = tf.compat.v1.layers.dense(features, 10)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == ModeKeys.EVAL:
            return IPUEstimatorSpec(mode, loss=loss, eval_metric_ops={
                "accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))})
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        return IPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = IPUEstimator(model_fn, config=ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=100)))
    estimator.train(input_fn, steps=1000)      # 10 engine runs of 100 steps each

``tf.estimator`` is not part of TensorFlow 2.21: the estimator machinery (checkpoints in
``model_dir``, hooks, the ``input_fn``/``model_fn`` protocol) lives in this package, built on
TF1 graph mode.  ``ModeKeys`` is here as well (``tf.estimator.ModeKeys`` works through the
runner).  One deliberate difference from the SDK: when the dataset runs out, training,
evaluation and prediction end with a warning instead of aborting the process.
"""
import collections
import contextlib
import copy
import logging
import time

import numpy as np
import tensorflow as tf
from tensorflow.python.util import nest

from ._estimator_compat import EstimatorSpec, ModeKeys
from . import config as ipu_config
from . import _estimator_support as _support
from . import ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, ipu_run_config, loops
from . import scopes, utils
from .ops import cross_replica_ops
from ipu_emulator.runtime import graph_loops, replication

_INITIAL_LOSS = 0.0
_HOST_DEVICE = "/device:CPU:0"
_NOT_REPLICATED_MESSAGE = (
    "This is not a valid replicated training graph because no IpuCrossReplicaSum or "
    "IpuCrossReplicaMeanoperations were found. Did you remember to use the "
    "`tensorflow.python.ipu.optimizers.CrossReplicaOptimizer`?")  # (sic) as in the SDK
_GLOBAL_STEP_INCREMENT_MESSAGE = (
    "Illegal increment of the `global_step` variable in the `model_fn`. This is usually "
    "caused by passing it as an argument to the `Optimizer.minimize()` function. Please "
    "remove this argument as the IPUEstimator itself is responsible for incrementing it.")
_EXHAUSTED_WARNING = (
    "The dataset from input_fn ran out during an engine run. On an IPU this aborts the "
    "process (\"Infeed dataset iterator out of range\"); the emulator stops here instead, "
    "keeping the steps that completed. Use Dataset.repeat() or ask for fewer steps.")


def _validate_function_call_spec(call_spec, name, allow_dict_arg=False):
    """``call_spec`` must be ``(callable, list)`` (or a dict as second element if allowed)."""
    if call_spec is None:
        return
    if not isinstance(call_spec, tuple):
        raise TypeError("`{}` must be a tuple".format(name))
    if len(call_spec) != 2:
        raise ValueError("`{}` must have two elements".format(name))
    if not callable(call_spec[0]):
        raise TypeError("first element in `{}` must be callable".format(name))
    allowed = (list, dict) if allow_dict_arg else (list,)
    if not isinstance(call_spec[1], allowed):
        raise TypeError("second element in `{}` must be a {}".format(
            name, " or ".join(t.__name__ for t in allowed)))


class IPUEstimatorSpec(collections.namedtuple("IPUEstimatorSpec", [
        "mode", "predictions", "loss", "train_op", "eval_metric_ops", "eval_metrics",
        "host_call", "training_hooks", "evaluation_hooks", "prediction_hooks"])):
    """What ``model_fn`` returns to an ``IPUEstimator``.

    ``eval_metric_ops`` are ``{name: (value, update_op)}`` computed on the IPU;
    ``eval_metrics`` is ``(metric_fn, tensors)``: the tensors are sent to the host and
    ``metric_fn(*tensors)`` (or ``**tensors`` for a dict) builds the metrics there.
    ``host_call`` is ``(fn, tensors)`` run on the host after every training step (only with
    ``iterations_per_loop=1``).
    """

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None,
                eval_metrics=None, host_call=None, training_hooks=None,
                evaluation_hooks=None, prediction_hooks=None):
        _validate_function_call_spec(host_call, "host_call")
        _validate_function_call_spec(eval_metrics, "eval_metrics", allow_dict_arg=True)
        if eval_metric_ops is not None and eval_metrics is not None:
            raise ValueError("cannot specify both `eval_metric_ops` and `eval_metrics`")
        return super().__new__(
            cls, mode, predictions, loss, train_op, eval_metric_ops, eval_metrics, host_call,
            tuple(training_hooks or ()), tuple(evaluation_hooks or ()),
            tuple(prediction_hooks or ()))


def _verify_model_fn_args(model_fn, params, needs_features=True):
    """tf.estimator's checks of a model_fn's signature."""
    args = set(_support.fn_args(model_fn))
    if needs_features and "features" not in args:
        raise ValueError("model_fn ({}) must include features argument.".format(model_fn))
    if params is not None and "params" not in args:
        raise ValueError("model_fn ({}) does not include params argument, but params ({}) is "
                         "passed to Estimator.".format(model_fn, params))
    if params is None and "params" in args:
        tf.compat.v1.logging.warning("Estimator's model_fn (%s) includes params argument, but "
                                     "params are not passed to Estimator.", model_fn)
    unexpected = sorted(args - _support.VALID_MODEL_FN_ARGS)
    if unexpected:
        raise ValueError("model_fn ({}) has following not expected args: {}".format(
            model_fn, unexpected))


def _local_batch_size(global_batch_size, num_replicas, name):
    if global_batch_size is None:
        return None
    if global_batch_size % num_replicas != 0:
        raise ValueError("{} (got {}) must be divisible by num_workers * num_replicas "
                         "(1 * {} = {})".format(name, global_batch_size, num_replicas,
                                                num_replicas))
    return global_batch_size // num_replicas


def _broadcast_to_replicas(session):
    """Give every replica the weights just loaded into replica 0's variables, as the IPU
    copies the host's weights to each replica."""
    assignments = []
    for variable in tf.compat.v1.global_variables():
        copies = replication.replica_variables(variable)
        assignments.extend(copy_.assign(variable.read_value()) for copy_ in copies[1:])
    if assignments:
        session.run(assignments)


def _cross_replica_ops_built():
    """How many cross-replica reductions the replica being built has made so far (None
    outside a replicated build)."""
    build, replica = replication._active()  # pylint: disable=protected-access
    reductions = getattr(build, "reductions", None)
    if reductions is None:
        return None
    return len(reductions.get(replica, []))


def _without_replica_axis(values, replicas):
    """Outfed [iterations, replicas, ...] -> [iterations * replicas, ...] (one per step)."""
    if replicas <= 1:
        return values
    return nest.map_structure(
        lambda a: np.reshape(a, (-1,) + np.shape(a)[2:]), values)


def _ops_incrementing(global_step, ops):
    """The ops among ``ops`` that write the global step variable."""
    handle = global_step.handle.op

    def source(tensor):
        # Inside a loop body a captured handle arrives through Enter/Identity ops.
        while tensor.op.type in ("Enter", "Identity", "RefEnter") and tensor.op.inputs:
            tensor = tensor.op.inputs[0]
        return tensor.op

    writes = ("AssignAddVariableOp", "AssignVariableOp", "AssignSubVariableOp")
    return [op for op in ops if op.type in writes and op.inputs and source(op.inputs[0]) is handle]


class _Program:
    """What one mode's graph holds: the compiled program and the host ops around it."""

    def __init__(self):
        self.fetch = None          # the compiled program's outputs (fetching them runs it)
        self.dequeue = None        # the outfeed dequeue, run after each engine run
        self.host_fetches = {}     # host ops run after each engine run (metrics, host_call)
        self.host_values = {}      # host metric values read at the end of evaluation
        self.spec = None           # the spec model_fn returned (for its hooks)
        # Training: the mean loss of one engine run from (program outputs, dequeued outfeed).
        self.run_loss = None
        # Evaluation: True when the outfeed carries {"loss", "metrics"} from the device;
        # False when the loss is one of the host metrics (the pipeline estimator).
        self.device_loss = True


class _IPUEstimatorBase:
    """Everything an IPU estimator does on the host; subclasses build the device programs."""

    def __init__(self, model_fn, model_dir=None, config=None, params=None,
                 warm_start_from=None, train_batch_size=None, eval_batch_size=None,
                 predict_batch_size=None):
        if config is None or not isinstance(config, ipu_run_config.RunConfig):
            raise ValueError("`config` must be provided with type `ipu_run_config.RunConfig`")
        if model_fn is None:
            raise ValueError("model_fn must be provided to Estimator.")
        model_dir = _support.resolve_model_dir(model_dir, config)
        self._config = config.replace(model_dir=model_dir)
        self._model_fn = model_fn
        self._params = copy.deepcopy(params) if params is not None else {}
        self._warm_start_from = warm_start_from
        run_config = self._config.ipu_run_config
        self._iterations_per_loop = run_config.iterations_per_loop
        sizes = {ModeKeys.TRAIN: ("train_batch_size", train_batch_size),
                 ModeKeys.EVAL: ("eval_batch_size", eval_batch_size),
                 ModeKeys.PREDICT: ("predict_batch_size", predict_batch_size)}
        if any(size is not None for _, size in sizes.values()) and "batch_size" in self._params:
            raise ValueError("`params` must not contain `batch_size` when `train_batch_size`, "
                             "`eval_batch_size` or `predict_batch_size` is given: the "
                             "estimator sets it")
        self._local_batch_sizes = {
            mode: _local_batch_size(size, run_config.num_replicas, name)
            for mode, (name, size) in sizes.items()}

    # -- properties ---------------------------------------------------------------------

    @property
    def model_dir(self):
        return self._config.model_dir

    @property
    def config(self):
        return copy.deepcopy(self._config)

    @property
    def params(self):
        return copy.deepcopy(self._params)

    @property
    def model_fn(self):
        return self._model_fn

    def latest_checkpoint(self):
        return tf.compat.v1.train.latest_checkpoint(self.model_dir)

    def get_variable_names(self):
        path = self._require_checkpoint()
        return [name for name, _ in tf.compat.v1.train.list_variables(path)]

    def get_variable_value(self, name):
        return tf.compat.v1.train.load_variable(self._require_checkpoint(), name)

    def _require_checkpoint(self):
        path = self.latest_checkpoint()
        if path is None:
            raise ValueError("Could not find trained model in model_dir: {}.".format(
                self.model_dir))
        return path

    # -- what subclasses provide ----------------------------------------------------------

    def _build_train(self, infeed, global_step):
        raise NotImplementedError

    def _build_eval(self, infeed, outfeed):
        raise NotImplementedError

    def _build_predict(self, infeed, outfeed):
        raise NotImplementedError

    # -- shared helpers ---------------------------------------------------------------------

    def _params_for(self, mode):
        params = copy.deepcopy(self._params)
        if self._local_batch_sizes[mode] is not None:
            params["batch_size"] = self._local_batch_sizes[mode]
        return params

    def _validate_steps(self, steps, name="steps"):
        if steps is not None and steps <= 0:
            raise ValueError("Must specify {} > 0, given: {}".format(name, steps))
        if steps is not None and steps % self._iterations_per_loop != 0:
            raise ValueError("{} ({}) must be a multiple of iterations_per_loop ({})".format(
                name, steps, self._iterations_per_loop))

    def _make_infeed(self, input_fn, mode):
        dataset = _support.call_input_fn(input_fn, mode, self._params_for(mode), self._config)
        _support.check_dataset_structure(dataset)
        return ipu_infeed_queue.IPUInfeedQueue(
            dataset, prefetch_depth=self._config.ipu_run_config.prefetch_depth)

    def _compile(self, computation):
        ordinal = self._config.ipu_run_config.ordinal
        with scopes.ipu_scope("/device:IPU:%d" % ordinal):
            return ipu_compiler.compile(computation, [])

    def _new_graph(self):
        # The system is configured first: placement of sharded ops depends on its devices.
        self._configure_system()
        graph = tf.Graph()
        with graph.as_default():
            if self._config.tf_random_seed is not None:
                tf.compat.v1.set_random_seed(self._config.tf_random_seed)
        return graph

    @staticmethod
    def _create_global_step():
        # An int64 resource variable on the host, as the SDK keeps it.
        with tf.device(_HOST_DEVICE), tf.compat.v1.variable_scope("", use_resource=True):
            return tf.compat.v1.train.get_or_create_global_step()

    def _zeros_if_pre_compiling(self, program, global_step=None):
        """Under ``DeviceConnectionType.PRE_COMPILE`` the SDK compiles the programs without
        a device, and each execution returns zeros: the program is replaced by zeros of its
        outputs' shapes (the weights do not change; training still counts its steps)."""
        if not _pre_compiling(self._config.ipu_run_config.ipu_options):
            return
        iterations = self._iterations_per_loop
        counted = ([] if global_step is None
                   else [global_step.assign_add(iterations, read_value=False)])
        with tf.device(_HOST_DEVICE), tf.control_dependencies(counted):
            program.fetch = _zeros_like(program.fetch, iterations)
            if program.dequeue is not None:
                program.dequeue = _zeros_like(program.dequeue, iterations)
        program.host_fetches = {}  # nothing came back to update host metrics with

    def _configure_system(self):
        options = self._config.ipu_run_config.ipu_options
        if options is not None:
            ipu_config.configure_ipu_system(options)

    def _session(self, graph):
        return tf.compat.v1.Session(graph=graph, config=self._config.session_config)

    @staticmethod
    def _initialize(session):
        session.run([tf.compat.v1.global_variables_initializer(),
                     tf.compat.v1.local_variables_initializer(),
                     tf.compat.v1.tables_initializer()])

    def _initialize_and_restore(self, session, checkpoints, checkpoint_path=None):
        """Initialise the variables, then restore ``checkpoint_path`` or the latest
        checkpoint into them and every replica's copies.  Returns the path restored, or
        None when there is no checkpoint."""
        self._initialize(session)
        path = checkpoint_path or checkpoints.latest()
        if path is not None:
            checkpoints.restore(session, path)
            _broadcast_to_replicas(session)
        return path

    @staticmethod
    def _finish_graph(hooks, program, checkpoints):
        """The last of building a graph: the hooks' taps on loop tensors (returned), the
        variables' initialisers on the CPU, and the checkpoint saver."""
        taps = _support.tap_loop_tensors(hooks, program.fetch)
        utils.move_variable_initialization_to_cpu()
        checkpoints.build()
        return taps

    # -- train ----------------------------------------------------------------------------------

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Train for ``steps`` more steps (or up to ``max_steps``), in engine runs of
        ``iterations_per_loop`` steps.  Returns ``self``."""
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        self._validate_steps(steps)
        self._validate_steps(max_steps, "max_steps")
        hooks = _support.check_hooks(hooks)
        listeners = _support.check_listeners(saving_listeners)
        checkpoints = _support.Checkpoints(self.model_dir, self._config, listeners)
        if max_steps is not None and _support.checkpoint_step(checkpoints.latest()) >= max_steps:
            tf.compat.v1.logging.info("Skipping training since max_steps has already saved.")
            return self

        graph = self._new_graph()
        with graph.as_default():
            with graph_loops.tf1_control_flow():
                global_step = self._create_global_step()
                infeed = self._make_infeed(input_fn, ModeKeys.TRAIN)
                program = self._build_train(infeed, global_step)
                self._zeros_if_pre_compiling(program, global_step)
                all_hooks = hooks + list(program.spec.training_hooks)
                taps = self._finish_graph(all_hooks, program, checkpoints)
            hook_runner = _support.HookRunner(all_hooks, taps)
            hook_runner.begin()
            with self._session(graph) as session:
                step = self._start_training(session, checkpoints)
                session.run(infeed.initializer)
                hook_runner.after_create_session(session)
                last = steps + step if steps is not None else max_steps
                step = self._training_loop(session, program, global_step, checkpoints,
                                           hook_runner, step, last)
                checkpoints.end(session, step)
                hook_runner.end(session)
        return self

    def _start_training(self, session, checkpoints):
        path = self._initialize_and_restore(session, checkpoints)
        if path is not None:
            step = _support.checkpoint_step(path)
            checkpoints.mark_saved(step)
            return step
        if self._warm_start_from is not None:
            _support.warm_start(session, self._warm_start_from)
            _broadcast_to_replicas(session)
        checkpoints.save(session, 0)
        return 0

    def _training_loop(self, session, program, global_step, checkpoints, hook_runner, step,
                       last_step):
        ipl = self._iterations_per_loop
        log_every = self._config.log_step_count_steps
        start_step = logged_step = step
        logged_time = time.time()
        loss = None
        while last_step is None or step < last_step:
            try:
                outputs, stop = hook_runner.run(session, [program.fetch, program.host_fetches])
            except tf.errors.OutOfRangeError:
                step = int(session.run(global_step))
                tf.compat.v1.logging.warning(_EXHAUSTED_WARNING)
                break
            compiled, _ = outputs
            outfed = session.run(program.dequeue) if program.dequeue is not None else None
            step += ipl
            loss = program.run_loss(compiled, outfed)
            first_run_of_call = step - ipl == start_step
            if log_every and (first_run_of_call or step - logged_step >= log_every):
                now = time.time()
                if step > logged_step and now > logged_time:
                    tf.compat.v1.logging.info("global_step/sec: %g",
                                              (step - logged_step) / (now - logged_time))
                tf.compat.v1.logging.info("loss = %s, step = %s", loss, step)
                logged_step, logged_time = step, now
            checkpoints.maybe_save(session, step)
            if stop:
                break
        if loss is not None:
            tf.compat.v1.logging.info("Loss for final step: %s.", loss)
        return step

    # -- evaluate -------------------------------------------------------------------------------

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """Evaluate ``steps`` steps (all of the dataset if None); returns the metrics dict,
        including ``loss`` (mean over the steps) and ``global_step``."""
        del name  # no evaluation summaries are written
        self._validate_steps(steps)
        hooks = _support.check_hooks(hooks)
        with self._restored_session(input_fn, ModeKeys.EVAL, hooks, checkpoint_path) as opened:
            session, program, hook_runner, global_step = opened
            results = self._evaluation_loop(session, program, hook_runner, steps)
            results["global_step"] = int(session.run(global_step))
            hook_runner.end(session)
        tf.compat.v1.logging.info("Saving dict for global step %d: %s", results["global_step"],
                                  results)
        return results

    def _evaluation_loop(self, session, program, hook_runner, steps):
        runs = None if steps is None else steps // self._iterations_per_loop
        losses, device_metrics = [], {}
        done = steps_done = 0
        replicas = self._config.ipu_run_config.num_replicas
        while runs is None or done < runs:
            exhausted = False
            try:
                _, stop = hook_runner.run(session, program.fetch)
            except tf.errors.OutOfRangeError:
                exhausted, stop = True, True
            with _quiet_if(exhausted):
                dequeued = session.run([program.dequeue, program.host_fetches])[0]
            completed = _leading_dim(dequeued)
            steps_done += completed
            if exhausted:
                tf.compat.v1.logging.warning(_EXHAUSTED_WARNING)
            if program.device_loss and completed:
                losses.extend(np.asarray(dequeued["loss"]).reshape(-1).tolist())
                for key, values in dequeued.get("metrics", {}).items():
                    last = np.asarray(values)[-1]  # the last update is the total
                    device_metrics[key] = last.mean(axis=0) if replicas > 1 else last
            done += 1
            if stop:
                break
        if not steps_done:
            raise ValueError("The dataset from input_fn produced no elements to evaluate.")
        results = {"loss": np.float32(np.mean(losses))} if program.device_loss else {}
        results.update(device_metrics)
        if program.host_values:
            results.update(session.run(program.host_values))
        return results

    @contextlib.contextmanager
    def _restored_session(self, input_fn, mode, hooks, checkpoint_path):
        """For evaluate and predict: a new graph with the program for ``mode``, and a session
        restored from the checkpoint with the infeed and hooks started.  Yields
        ``(session, program, hook_runner, global_step)``."""
        checkpoints = _support.Checkpoints(self.model_dir, self._config)
        graph = self._new_graph()
        with graph.as_default():
            with graph_loops.tf1_control_flow():
                global_step = self._create_global_step()
                infeed = self._make_infeed(input_fn, mode)
                outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
                evaluating = mode == ModeKeys.EVAL
                program = (self._build_eval if evaluating
                           else self._build_predict)(infeed, outfeed)
                self._zeros_if_pre_compiling(program)
                spec_hooks = (program.spec.evaluation_hooks if evaluating
                              else program.spec.prediction_hooks)
                all_hooks = hooks + list(spec_hooks)
                taps = self._finish_graph(all_hooks, program, checkpoints)
            hook_runner = _support.HookRunner(all_hooks, taps)
            hook_runner.begin()
            with self._session(graph) as session:
                if self._initialize_and_restore(session, checkpoints, checkpoint_path) is None:
                    tf.compat.v1.logging.warning(
                        "Could not find trained model in model_dir: %s, running "
                        "initialization to %s.", self.model_dir,
                        "evaluate" if evaluating else "predict")
                session.run(infeed.initializer)
                hook_runner.after_create_session(session)
                yield session, program, hook_runner, global_step

    # -- predict ------------------------------------------------------------------------------

    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
                yield_single_examples=True, num_predictions=None):
        """Yield predictions, one example at a time (or one batch if
        ``yield_single_examples=False``); stops after ``num_predictions`` if given."""
        hooks = _support.check_hooks(hooks)
        with self._restored_session(input_fn, ModeKeys.PREDICT, hooks,
                                    checkpoint_path) as opened:
            session, program, hook_runner, _ = opened
            yielded = 0
            while num_predictions is None or yielded < num_predictions:
                try:
                    _, stop = hook_runner.run(session, program.fetch)
                except tf.errors.OutOfRangeError:
                    tf.compat.v1.logging.warning(_EXHAUSTED_WARNING)
                    stop = True
                with _quiet_if(stop):
                    outfed = session.run(program.dequeue)
                predictions = _select_keys(
                    _without_replica_axis(outfed, self._config.ipu_run_config.num_replicas),
                    predict_keys)
                for item in _split_predictions(predictions, yield_single_examples):
                    if num_predictions is not None and yielded >= num_predictions:
                        break
                    yielded += 1
                    yield item
                if stop:
                    break
            hook_runner.end(session)


def _pre_compiling(ipu_options):
    """True when ``ipu_options`` (an IPUConfig or an old IpuOptions) ask for PRE_COMPILE."""
    if ipu_options is None:
        return False
    if isinstance(ipu_options, ipu_config.IpuOptions):
        connection = ipu_options.device_connection_type
    else:
        connection = ipu_options.device_connection.type
    return connection == ipu_config.DeviceConnectionType.PRE_COMPILE


def _zeros_like(structure, iterations):
    """Host zeros in place of each tensor of ``structure`` (an op for each op); an unknown
    leading dimension (the loop iterations of an outfeed) is ``iterations``, others 1."""
    def zeros(value):
        if isinstance(value, tf.Operation):
            return tf.no_op()
        if value.shape.rank is None:
            return tf.zeros([], value.dtype)
        shape = [(iterations if i == 0 else 1) if d is None else d
                 for i, d in enumerate(value.shape.as_list())]
        return tf.zeros(shape, value.dtype)
    return nest.map_structure(zeros, structure)


@contextlib.contextmanager
def _quiet_if(condition):
    """Silence the emulator's "dequeue before the program ran" warning after an exhausted
    run: the run did execute, it just did not finish."""
    logger = logging.getLogger("ipu_emulator")
    previous = logger.disabled
    logger.disabled = previous or condition
    try:
        yield
    finally:
        logger.disabled = previous


def _select_keys(predictions, predict_keys):
    if predict_keys is None:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
    if isinstance(predict_keys, str):
        predict_keys = [predict_keys]
    selected = {k: v for k, v in predictions.items() if k in predict_keys}
    if not selected:
        raise ValueError("Expected to run at least one output from {}, provided {}.".format(
            list(predictions.keys()), predict_keys))
    return selected


def _leading_dim(outfed):
    """How many loop iterations an outfeed dequeue returned."""
    flat = nest.flatten(outfed)
    return int(np.shape(flat[0])[0]) if flat else 0


def _split_predictions(predictions, single_examples):
    """Outfed predictions ([iterations, batch, ...]) as batches or single examples."""
    if isinstance(predictions, dict):
        arrays = {k: np.asarray(v) for k, v in predictions.items()}
        iterations = {a.shape[0] for a in arrays.values()}
        count = iterations.pop() if iterations else 0
        batches = [{k: a[i] for k, a in arrays.items()} for i in range(count)]
    else:
        batches = list(np.asarray(predictions))
    if not single_examples:
        yield from batches
        return
    for batch in batches:
        if isinstance(batch, dict):
            lengths = {k: (v.shape[0] if v.ndim else None) for k, v in batch.items()}
            length = next(iter(lengths.values()))
            for key, value in lengths.items():
                if value != length or value is None:
                    raise ValueError("Batch length of predictions should be same. %s has "
                                     "different batch length than others." % key)
            for i in range(length):
                yield {k: v[i] for k, v in batch.items()}
        else:
            yield from batch


class IPUEstimator(_IPUEstimatorBase):
    """Estimator that runs ``model_fn(features, labels, mode, params, config)`` on the IPU.

    ``model_fn`` returns an ``IPUEstimatorSpec``.  Each engine run executes
    ``config.ipu_run_config.iterations_per_loop`` steps, so ``steps`` must be a multiple of
    it; training reports the mean loss of the steps in each run.
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None,
                 warm_start_from=None, train_batch_size=None, eval_batch_size=None,
                 predict_batch_size=None):
        _verify_model_fn_args(model_fn, params)
        super().__init__(model_fn, model_dir=model_dir, config=config, params=params,
                         warm_start_from=warm_start_from, train_batch_size=train_batch_size,
                         eval_batch_size=eval_batch_size, predict_batch_size=predict_batch_size)

    def _call_model_fn(self, features, labels, mode):
        if labels is not None and "labels" not in _support.fn_args(self._model_fn):
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        spec = _support.call_with_optional_args(
            self._model_fn,
            {"labels": labels, "mode": mode, "params": self._params_for(mode),
             "config": self._config},
            features=features)
        if not isinstance(spec, (IPUEstimatorSpec, EstimatorSpec)):
            raise ValueError("`model_fn` must return IPUEstimatorSpec or EstimatorSpec")
        return spec

    def _build_train(self, infeed, global_step):
        program = _Program()
        ipl = self._iterations_per_loop
        graph = tf.compat.v1.get_default_graph()

        replicas = self._config.ipu_run_config.num_replicas

        def training_step(total_loss, *args, **kwargs):
            features, labels = _support.features_and_labels(args, kwargs)
            first_op = len(graph.get_operations())
            reductions_before = _cross_replica_ops_built()
            spec = self._call_model_fn(features, labels, ModeKeys.TRAIN)
            if (replicas > 1 and reductions_before is not None
                    and _cross_replica_ops_built() == reductions_before):
                raise ValueError(_NOT_REPLICATED_MESSAGE)
            if _ops_incrementing(global_step, graph.get_operations()[first_op:]):
                raise ValueError(_GLOBAL_STEP_INCREMENT_MESSAGE)
            if spec.loss is None:
                raise ValueError("EstimatorSpec must contain loss when training")
            if spec.train_op is None:
                raise ValueError("EstimatorSpec must contain train_op when training")
            host_call = getattr(spec, "host_call", None)
            if host_call is not None and ipl > 1:
                raise ValueError("host_call is not allowed for iterations_per_loop > 1")
            program.spec = spec
            with tf.control_dependencies([spec.train_op]):
                increment = global_step.assign_add(1)
            loss = tf.cast(spec.loss, tf.float32)
            if replicas > 1:  # the reported loss is the mean over the replicas
                loss = cross_replica_ops.cross_replica_mean(loss)
            with tf.control_dependencies([increment]):
                new_total = total_loss + loss
            if host_call is None:
                return new_total
            return [new_total] + [tf.convert_to_tensor(t) for t in host_call[1]]

        def train_loop():
            return loops.repeat(ipl, training_step, [_INITIAL_LOSS], infeed)

        def single_step():  # iterations_per_loop == 1: no loop, as on the SDK
            args, kwargs = _support.dequeue_element(infeed)
            return training_step(tf.constant(_INITIAL_LOSS), *args, **kwargs)

        program.fetch = self._compile(train_loop if ipl > 1 else single_step)
        program.run_loss = lambda outputs, outfed: float(outputs[0]) / ipl
        host_call = getattr(program.spec, "host_call", None)
        if host_call is not None:
            with tf.device(_HOST_DEVICE):
                ops = host_call[0](*program.fetch[1:])
            program.host_fetches = {"host_call": ops if ops is not None else []}
        return program

    def _build_eval(self, infeed, outfeed):
        program = _Program()

        def evaluation_step(*args, **kwargs):
            features, labels = _support.features_and_labels(args, kwargs)
            spec = self._call_model_fn(features, labels, ModeKeys.EVAL)
            program.spec = spec
            if spec.loss is None:
                raise ValueError("EstimatorSpec must contain loss when evaluating")
            metric_ops = spec.eval_metric_ops
            host_metrics = getattr(spec, "eval_metrics", None)
            if not metric_ops and not host_metrics:
                raise ValueError(
                    "EstimatorSpec must contain either eval_metric_ops or eval_metrics")
            if metric_ops and host_metrics:
                raise ValueError("EstimatorSpec cannot contain both eval_metric_ops and "
                                 "eval_metrics")
            element = {"loss": tf.cast(spec.loss, tf.float32)}
            if metric_ops:
                element["metrics"] = _metric_values_after_update(metric_ops)
            else:
                element["host_args"] = host_metrics[1]
            return outfeed.enqueue(element)

        program.fetch = self._compile(
            lambda: loops.repeat(self._iterations_per_loop, evaluation_step, infeed_queue=infeed))
        with tf.device(_HOST_DEVICE):
            program.dequeue = outfeed.dequeue()
            host_metrics = getattr(program.spec, "eval_metrics", None)
            if host_metrics:
                _build_host_metrics(program, host_metrics[0], program.dequeue["host_args"],
                                    self._config.ipu_run_config.num_replicas)
        return program

    def _build_predict(self, infeed, outfeed):
        program = _Program()

        def prediction_step(*args, **kwargs):
            features, _ = _support.features_and_labels(args, kwargs)  # labels are not used
            spec = self._call_model_fn(features, None, ModeKeys.PREDICT)
            program.spec = spec
            if spec.predictions is None:
                raise ValueError("EstimatorSpec must contain predictions when predicting")
            if not isinstance(spec.predictions, (tf.Tensor, dict)):
                raise ValueError("predictions must be Tensor or dict of Tensor. Given: {}"
                                 .format(spec.predictions))
            return outfeed.enqueue(spec.predictions)

        program.fetch = self._compile(
            lambda: loops.repeat(self._iterations_per_loop, prediction_step, infeed_queue=infeed))
        with tf.device(_HOST_DEVICE):
            program.dequeue = outfeed.dequeue()
        return program


def _metric_values_after_update(eval_metric_ops):
    """Each metric's value as it stands after this step's update."""
    values = {}
    for name, metric in eval_metric_ops.items():
        if not isinstance(metric, tuple) or len(metric) != 2:
            raise TypeError("Values of eval_metric_ops must be (metric_value, update_op) "
                            "tuples, given: {} for key: {}".format(metric, name))
        value, update_op = metric
        if isinstance(update_op, tf.Tensor) and update_op.shape == value.shape:
            # TF metrics return the updated value from update_op: no read-after-write race.
            values[name] = tf.identity(update_op)
        else:
            with tf.control_dependencies([update_op]):
                values[name] = tf.identity(value)
    return values


def merge_loop_dims(structure, replicas=1):
    """Dequeued tensors [loop iterations, (replicas,) batch, ...] -> [all examples, ...], so a
    host metric function sees one big batch (per-step scalars become one vector)."""
    leading = 3 if replicas > 1 else 2

    def merge(tensor):
        rank = tensor.shape.rank
        if rank is None or rank < 2:
            return tensor
        return tf.reshape(tensor, tf.concat([[-1], tf.shape(tensor)[min(leading, rank):]], 0))
    return nest.map_structure(merge, structure)


def _build_host_metrics(program, metric_fn, dequeued_args, replicas):
    """Host metrics over everything the outfeed returned (loop and batch dims merged)."""
    merged = merge_loop_dims(dequeued_args, replicas)
    metric_ops = metric_fn(**merged) if isinstance(merged, dict) else metric_fn(*merged)
    for name, metric in metric_ops.items():
        if not isinstance(metric, tuple) or len(metric) != 2:
            raise TypeError("Values of eval_metric_ops must be (metric_value, update_op) "
                            "tuples, given: {} for key: {}".format(metric, name))
    program.host_fetches = {name: update for name, (_, update) in metric_ops.items()}
    program.host_values = {name: value for name, (value, _) in metric_ops.items()}


__all__ = ["IPUEstimator", "IPUEstimatorSpec", "ModeKeys"]
