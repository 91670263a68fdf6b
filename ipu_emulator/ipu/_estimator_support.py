"""Host-side machinery the IPU estimators share: calling user functions, hooks, checkpoints.

``tf.estimator`` used to provide all of this (``MonitoredTrainingSession``, the checkpoint
saver hook, the input function protocol).  It is gone from TensorFlow 2.21, so the IPU
estimators carry a small version of it; the device side (loops, feeds, compile) is the
emulator's ordinary API front.
"""
import copy
import os
import re
import tempfile
import time

import tensorflow as tf
from tensorflow.python.util import function_utils

from ipu_emulator.runtime import graph_loops

# Arguments a model_fn may take (tf.estimator's _VALID_MODEL_FN_ARGS).
VALID_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "self", "config"}


def fn_args(function):
    """Argument names of a function, partial or callable object (as tf.estimator reads them)."""
    return tuple(function_utils.fn_args(function))


def call_with_optional_args(function, available, **fixed):
    """Call ``function`` with ``fixed`` plus each of ``available`` it names as an argument."""
    names = fn_args(function)
    kwargs = dict(fixed)
    for name, value in available.items():
        if name in names:
            kwargs[name] = value
    return function(**kwargs)


# --- model directory ---------------------------------------------------------------------

def resolve_model_dir(model_dir, config):
    """The estimator's model directory: the argument, the config's, or a new temporary one."""
    if model_dir is not None:
        model_dir = str(model_dir)
    if model_dir is not None and config.model_dir is not None and model_dir != config.model_dir:
        raise ValueError(
            "model_dir are set both in constructor and RunConfig, but with different values. "
            "In constructor: '{}', in RunConfig: '{}' ".format(model_dir, config.model_dir))
    model_dir = model_dir or config.model_dir
    if model_dir is None:
        model_dir = tempfile.mkdtemp()
        tf.compat.v1.logging.warning("Using temporary folder as model directory: %s", model_dir)
    return model_dir


# --- hooks ---------------------------------------------------------------------------------

def check_hooks(hooks):
    hooks = list(hooks or [])
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise TypeError("Hooks must be a SessionRunHook, given: {}".format(hook))
    return hooks


def check_listeners(listeners):
    listeners = list(listeners or [])
    for listener in listeners:
        if not isinstance(listener, tf.compat.v1.train.CheckpointSaverListener):
            raise TypeError("saving_listeners must be a list of CheckpointSaverListener, "
                            "given: {}".format(listener))
    return listeners


def tap_loop_tensors(hooks, program_outputs):
    """Make the loop-body tensors that logging hooks ask for fetchable.

    A tensor inside an on-device loop cannot be fetched by ``Session.run`` (nor on the IPU:
    the loop runs on the device).  For each such tensor a ``LoggingTensorHook`` names, a
    host variable takes its value every iteration, and reading it after
    ``program_outputs`` gives the value from the last iteration of the engine run.
    Returns ``{tensor name: host tensor}`` for :class:`HookRunner`.
    """
    graph = tf.compat.v1.get_default_graph()
    taps = {}
    for hook in hooks:
        wanted = getattr(hook, "_tensors", None)  # LoggingTensorHook and its subclasses
        if not isinstance(wanted, dict):
            continue
        for tensor in wanted.values():
            try:
                tensor = _as_graph_tensor(graph, tensor)
            except (KeyError, ValueError, TypeError):
                continue  # the hook itself reports names the graph lacks, in begin()
            if tensor.name not in taps:
                tap = _last_iteration_value(tensor, program_outputs)
                if tap is not None:
                    taps[tensor.name] = tap
    return taps


def _as_graph_tensor(graph, tensor):
    # LoggingTensorHook's rule: a name without ":" means output 0.
    if isinstance(tensor, str) and ":" not in tensor:
        tensor += ":0"
    element = graph.as_graph_element(tensor)
    if not isinstance(element, tf.Tensor):
        raise TypeError("not a tensor: {}".format(tensor))
    return element


def _last_iteration_value(tensor, program_outputs):
    """A host tensor holding ``tensor``'s value from the last iteration of its loop, or None
    when ``tensor`` is fetchable as it is (or not in a plain loop body)."""
    context = tensor.op._get_control_flow_context()  # pylint: disable=protected-access
    if context is None or context.GetWhileContext() is not context:
        return None  # outside any loop, or inside a cond (not tapped)
    if tensor.dtype in (tf.resource, tf.variant):
        return None  # no variable can hold these
    graph = tensor.graph
    next_iterations = [op for op in graph.get_operations() if op.type == "NextIteration"
                       and op._get_control_flow_context() is context]  # pylint: disable=protected-access
    if not next_iterations:
        return None
    with tf.init_scope(), tf.device("/device:CPU:0"):
        holder = tf.compat.v1.Variable(
            tf.zeros([], tensor.dtype), trainable=False, use_resource=True,
            shape=tf.TensorShape(None), validate_shape=False,
            collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
            name="hook_tap_" + tensor.op.name.replace("/", "_"))
    previous = graph._get_control_flow_context()  # pylint: disable=protected-access
    graph._set_control_flow_context(context)  # pylint: disable=protected-access
    try:
        store = holder.assign(tensor, read_value=False)
    finally:
        graph._set_control_flow_context(previous)  # pylint: disable=protected-access
    # The loop's next iteration (and so its exit) waits for the store: every iteration runs it.
    next_iterations[0]._add_control_input(store)  # pylint: disable=protected-access
    with tf.device("/device:CPU:0"), tf.control_dependencies(
            [t for t in tf.nest.flatten(program_outputs)
             if isinstance(t, (tf.Tensor, tf.Operation))]):
        return holder.read_value()


class HookRunner:
    """Drives ``SessionRunHook``s around each engine run, as a monitored session would.

    ``taps`` (from :func:`tap_loop_tensors`) stand in for loop-body tensors the hooks fetch.
    """

    def __init__(self, hooks, taps=None):
        self.hooks = list(hooks)
        self.taps = dict(taps or {})

    def _tapped(self, fetches):
        if not self.taps:
            return fetches
        return tf.nest.map_structure(
            lambda f: self.taps.get(getattr(f, "name", None), f) if isinstance(f, tf.Tensor)
            else f, fetches)

    def begin(self):
        for hook in self.hooks:
            hook.begin()

    def after_create_session(self, session):
        for hook in self.hooks:
            hook.after_create_session(session, None)

    def run(self, session, fetches):
        """Run ``fetches`` with the hooks' extra fetches; returns (results, stop_requested)."""
        if not self.hooks:
            return session.run(fetches), False
        context = tf.compat.v1.train.SessionRunContext(
            original_args=tf.compat.v1.train.SessionRunArgs(fetches), session=session)
        requests = [hook.before_run(context) for hook in self.hooks]
        feed_dict = {}
        for request in requests:
            if request is not None and request.feed_dict:
                feed_dict.update(request.feed_dict)
        hook_fetches = [self._tapped(request.fetches) if request is not None else []
                        for request in requests]
        results, hook_results = session.run((fetches, hook_fetches), feed_dict=feed_dict or None)
        for hook, hook_result in zip(self.hooks, hook_results):
            hook.after_run(context, tf.compat.v1.train.SessionRunValues(
                results=hook_result, options=None, run_metadata=None))
        return results, context.stop_requested

    def end(self, session):
        for hook in self.hooks:
            hook.end(session)


# --- checkpoints ---------------------------------------------------------------------------

class Checkpoints:
    """Save and restore the estimator's variables in ``model_dir`` (``model.ckpt-<step>``)."""

    def __init__(self, model_dir, config, listeners=()):
        self.model_dir = model_dir
        self._config = config
        self._listeners = list(listeners)
        self._saver = None
        self._last_save_step = None
        self._last_save_time = None

    def build(self):
        """Create the saver; call once the graph holds all variables."""
        self._saver = tf.compat.v1.train.Saver(
            max_to_keep=self._config.keep_checkpoint_max,
            keep_checkpoint_every_n_hours=self._config.keep_checkpoint_every_n_hours)
        for listener in self._listeners:
            listener.begin()

    def latest(self):
        return tf.compat.v1.train.latest_checkpoint(self.model_dir)

    def restore(self, session, path):
        self._saver.restore(session, path)

    def mark_saved(self, step):
        """Note that the checkpoint for ``step`` exists already (restored from it)."""
        self._last_save_step, self._last_save_time = step, time.time()

    def save(self, session, step):
        if self._last_save_step == step:
            return
        os.makedirs(self.model_dir, exist_ok=True)
        for listener in self._listeners:
            listener.before_save(session, step)
        path = os.path.join(self.model_dir, "model.ckpt")
        tf.compat.v1.logging.info("Saving checkpoints for %d into %s.", step, path)
        self._saver.save(session, path, global_step=step)
        self._last_save_step, self._last_save_time = step, time.time()
        for listener in self._listeners:
            listener.after_save(session, step)

    def maybe_save(self, session, step):
        """Save if ``save_checkpoints_steps`` or ``save_checkpoints_secs`` has come round."""
        every_steps = self._config.save_checkpoints_steps
        every_secs = self._config.save_checkpoints_secs
        last_step = self._last_save_step or 0
        if every_steps and step - last_step >= every_steps:
            self.save(session, step)
        elif every_secs and time.time() - (self._last_save_time or time.time()) >= every_secs:
            self.save(session, step)

    def end(self, session, step):
        self.save(session, step)
        for listener in self._listeners:
            listener.end(session, step)


def checkpoint_step(path):
    """The global step a checkpoint was saved at (0 when there is none)."""
    if path is None:
        return 0
    reader = tf.compat.v1.train.load_checkpoint(path)
    if reader.has_tensor(tf.compat.v1.GraphKeys.GLOBAL_STEP):
        return int(reader.get_tensor(tf.compat.v1.GraphKeys.GLOBAL_STEP))
    return 0


def warm_start(session, warm_start_from):
    """Load trainable variables from another model's checkpoint (what WarmStartSettings does).

    ``warm_start_from`` is a checkpoint path, a directory holding checkpoints, or an object
    with ``ckpt_to_initialize_from`` (and optionally ``vars_to_warm_start``, a regex).
    """
    if isinstance(warm_start_from, (str, os.PathLike)):
        path, pattern = str(warm_start_from), ".*"
    else:
        path = str(warm_start_from.ckpt_to_initialize_from)
        pattern = getattr(warm_start_from, "vars_to_warm_start", ".*") or ".*"
    if os.path.isdir(path):
        path = tf.compat.v1.train.latest_checkpoint(path)
    if path is None:
        raise ValueError("No checkpoint to warm-start from in {}".format(warm_start_from))
    tf.compat.v1.logging.info("Warm-starting from: %s", path)
    reader = tf.compat.v1.train.load_checkpoint(path)
    saved = reader.get_variable_to_shape_map()
    for variable in tf.compat.v1.trainable_variables():
        name = variable.op.name
        if re.match(pattern, name) and name in saved:
            variable.load(reader.get_tensor(name), session)


# --- input functions -----------------------------------------------------------------------

def call_input_fn(input_fn, mode, params, config):
    """Call ``input_fn`` with the arguments it names; it must return a ``tf.data.Dataset``."""
    with tf.device("/device:CPU:0"):
        dataset = call_with_optional_args(
            input_fn, {"mode": mode, "params": copy.deepcopy(params), "config": config})
    if not isinstance(dataset, tf.data.Dataset):
        raise ValueError("input_fn must return Dataset")
    return dataset


def check_dataset_structure(dataset):
    """Elements are ``features`` or ``(features, labels)``."""
    spec = dataset.element_spec
    if isinstance(spec, tuple) and len(spec) not in (1, 2):
        raise ValueError(
            "Invalid dataset tuple, expected 1 or 2 elements, got {}".format(len(spec)))


def features_and_labels(args, kwargs):
    """Split one infeed element, as the loop hands it to the body, into features and labels."""
    if kwargs:  # a dict element arrives as keyword arguments
        return dict(kwargs), None
    if len(args) == 1:
        return args[0], None
    return args[0], args[1]


def dequeue_element(infeed):
    """One infeed element unpacked like a loop body's arguments (for loop-free programs)."""
    return graph_loops.dequeued_arguments([], infeed)
