"""Run configuration for the IPU estimators.

``IPURunConfig`` says how the estimator uses the IPU: how many steps run on the device per
``Session.run`` (``iterations_per_loop``), on which TF device (``ordinal``), over how many
IPUs (``num_replicas`` x ``num_shards``) and with which system configuration
(``ipu_options``).  ``RunConfig`` is the estimator's run configuration (model directory,
seeds, checkpoint and logging intervals) carrying an ``IPURunConfig``.

    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 2
    run_config = ipu.ipu_run_config.RunConfig(
        ipu_run_config=ipu.ipu_run_config.IPURunConfig(
            iterations_per_loop=100, num_shards=2, ipu_options=cfg),
        model_dir="/tmp/my_model")

``tf.estimator.RunConfig`` no longer exists in TensorFlow 2.21, so ``RunConfig`` carries its
arguments, defaults and checks itself.
"""
import collections
import copy
import logging

from ipu_emulator.ipu import config as ipu_config
from ipu_emulator.runtime import ipu_backend

_log = logging.getLogger("ipu_emulator")


def _configured_device_sizes(ipu_options):
    """IPUs in each TF device the options would create (one entry per /device:IPU:i)."""
    if isinstance(ipu_options, ipu_config.IPUConfig):
        # Checked as on the SDK's validation path, without touching the system.
        auto_select = ipu_options.auto_select_ipus
        select = ipu_options.select_ipus
        auto_select = [auto_select] if isinstance(auto_select, int) else list(auto_select)
        select = [select] if isinstance(select, int) else list(select)
        return list(auto_select) + [ipu_backend.gc_info_device_size(i) for i in select]
    sizes = []
    for device in ipu_options.device_config:
        if device.cfg_index is not None:
            sizes.append(ipu_backend.gc_info_device_size(device.cfg_index))
        else:
            sizes.append(device.auto_count)
    return sizes


class IPURunConfig(collections.namedtuple("IPURunConfig", [
        "iterations_per_loop", "ipu_options", "num_replicas", "num_shards", "ordinal",
        "prefetch_depth"])):
    """IPU settings of an ``IPUEstimator`` (SDK 3.x fields and defaults).

    ``ipu_options`` is an ``IPUConfig`` (or, as in SDK 2.0-2.3, the ``IpuOptions`` record
    made by ``ipu.utils.create_ipu_config``); the estimator applies it when it creates its
    session.  The SDK 2.0-2.3 arguments ``compile_summary`` and ``autosharding`` are
    accepted by keyword and ignored (summaries are not produced; sharding is explicit).
    """

    def __new__(cls, iterations_per_loop=1, ipu_options=None, num_replicas=1, num_shards=1,
                ordinal=0, prefetch_depth=None, *, compile_summary=False, autosharding=False):
        del compile_summary
        if autosharding:
            _log.warning("IPURunConfig(autosharding=True) is not emulated: the graph runs "
                         "unsharded unless the model_fn uses ipu.scopes.ipu_shard.")
        # Not an SDK check (its loop would simply misbehave); a clear message instead.
        if not isinstance(iterations_per_loop, int) or iterations_per_loop < 1:
            raise ValueError("iterations_per_loop must be a positive integer, but it is "
                             "{}".format(iterations_per_loop))
        num_devices = num_replicas * num_shards
        if num_devices > 1 and ipu_options is None:
            raise ValueError("IPU configuration requires more than one device, but "
                             "`ipu_options` is None")
        if ipu_options is not None:
            _check_ipu_options(ipu_options, num_replicas, num_shards, ordinal)
        return super().__new__(cls, iterations_per_loop, ipu_options, num_replicas,
                               num_shards, ordinal, prefetch_depth)


def _check_ipu_options(ipu_options, num_replicas, num_shards, ordinal):
    old_api = isinstance(ipu_options, ipu_config.IpuOptions)
    if not (old_api or isinstance(ipu_options, ipu_config.IPUConfig)):
        raise TypeError("ipu_options must be an IPUConfig instance.")
    sizes = _configured_device_sizes(ipu_options)
    if not sizes:
        return  # no device listed: the backend creates one 1-IPU device when it runs
    if ordinal >= len(sizes):
        raise ValueError("Only {} device(s) available to choose from. You tried to pick a "
                         "device at ordinal {}".format(len(sizes), ordinal))
    configured = sizes[ordinal]
    num_devices = num_replicas * num_shards
    if configured is not None and configured != num_devices:
        if old_api:  # SDK 2.0 wording
            raise ValueError(
                "`IPURunConfig` configured with {} devices ({} num_replicas times {} "
                "num_shards), but `IpuOptions` configured with {} devices".format(
                    num_devices, num_replicas, num_shards, configured))
        raise ValueError(
            "`IPURunConfig` configured with {} devices ({} replicas times {} shards), but "
            "`ipu_options` configured with {} devices".format(
                num_devices, num_replicas, num_shards, configured))


# --------------------------------------------------------------------------------------
# RunConfig: tf.estimator.RunConfig's arguments, defaults and checks, plus the IPU part
# --------------------------------------------------------------------------------------

_USE_DEFAULT = object()
_BOTH_SAVE_CHECKPOINTS_MESSAGE = (
    "save_checkpoints_steps and save_checkpoints_secs cannot be both set.")

# Properties ``replace`` may change, as in tf.estimator.RunConfig.
_REPLACEABLE = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute",
    "device_fn", "protocol", "eval_distribute", "experimental_distribute",
    "experimental_max_worker_delay_secs", "session_creation_timeout_secs",
    "checkpoint_save_graph_def")


def _default_session_config():
    import tensorflow as tf  # lazy: building a RunConfig needs no TensorFlow otherwise

    # Like the estimator's default: soft placement, so host-only ops never fail to place.
    return tf.compat.v1.ConfigProto(allow_soft_placement=True)


def _check(value, is_valid, message):
    if value is not None and not is_valid(value):
        raise ValueError(message)


class RunConfig:
    """Estimator run configuration with an ``ipu_run_config`` (an ``IPURunConfig``).

    Takes ``tf.estimator.RunConfig``'s keyword arguments with their defaults: checkpoints
    every 600 s unless ``save_checkpoints_steps`` is given, 5 kept, loss logged every 100
    steps.  ``master`` is accepted for compatibility (there is no remote master).
    """

    def __init__(self, ipu_run_config=None, master=None, model_dir=None,
                 tf_random_seed=None, save_summary_steps=100,
                 save_checkpoints_steps=_USE_DEFAULT, save_checkpoints_secs=_USE_DEFAULT,
                 session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
                 train_distribute=None, device_fn=None, protocol=None, eval_distribute=None,
                 experimental_distribute=None, experimental_max_worker_delay_secs=None,
                 session_creation_timeout_secs=7200, checkpoint_save_graph_def=True):
        if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, 600
        elif save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_secs = None
        elif save_checkpoints_steps is _USE_DEFAULT:
            save_checkpoints_steps = None
        elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError(_BOTH_SAVE_CHECKPOINTS_MESSAGE)
        self._ipu_run_config = ipu_run_config if ipu_run_config is not None else IPURunConfig()
        if not isinstance(self._ipu_run_config, IPURunConfig):
            raise TypeError("`ipu_run_config` must be an IPURunConfig, but it is {}".format(
                type(self._ipu_run_config).__name__))
        self._master = master if master is not None else ""
        self._model_dir = str(model_dir) if model_dir is not None else None
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._train_distribute = train_distribute
        self._device_fn = device_fn
        self._protocol = protocol
        self._eval_distribute = eval_distribute
        self._experimental_distribute = experimental_distribute
        self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self._session_creation_timeout_secs = session_creation_timeout_secs
        self._checkpoint_save_graph_def = checkpoint_save_graph_def
        self._validate()
        if self._session_config is None:
            self._session_config = _default_session_config()

    def _validate(self):
        # The estimator's checks and messages (tensorflow_estimator run_config.py).
        _check(self._model_dir, lambda d: d, "model_dir should be non-empty")
        _check(self._save_summary_steps, lambda s: s >= 0, "save_summary_steps should be >= 0")
        _check(self._save_checkpoints_steps, lambda s: s >= 0,
               "save_checkpoints_steps should be >= 0")
        _check(self._save_checkpoints_secs, lambda s: s >= 0,
               "save_checkpoints_secs should be >= 0")
        _check(self._session_config, _is_config_proto,
               "session_config must be instance of ConfigProto")
        _check(self._keep_checkpoint_max, lambda k: k >= 0, "keep_checkpoint_max should be >= 0")
        _check(self._keep_checkpoint_every_n_hours, lambda k: k > 0,
               "keep_checkpoint_every_n_hours should be > 0")
        _check(self._log_step_count_steps, lambda s: s >= 0,
               "log_step_count_steps should be >= 0")
        _check(self._tf_random_seed, lambda s: isinstance(s, int),
               "tf_random_seed must be integer.")
        _check(self._experimental_max_worker_delay_secs, lambda s: isinstance(s, int),
               "experimental_max_worker_delay_secs must be an integer if set.")
        _check(self._session_creation_timeout_secs, lambda t: t > 0,
               "session_creation_timeout_secs should be > 0")
        _check(self._device_fn, callable,
               'device_fn must be callable with exactly one argument "op".')

    # -- the IPU part -------------------------------------------------------------------

    @property
    def ipu_run_config(self):
        return self._ipu_run_config

    @property
    def master(self):
        return self._master

    # -- tf.estimator.RunConfig's properties -------------------------------------------

    model_dir = property(lambda self: self._model_dir)
    tf_random_seed = property(lambda self: self._tf_random_seed)
    save_summary_steps = property(lambda self: self._save_summary_steps)
    save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
    save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
    session_config = property(lambda self: self._session_config)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_every_n_hours = property(lambda self: self._keep_checkpoint_every_n_hours)
    log_step_count_steps = property(lambda self: self._log_step_count_steps)
    train_distribute = property(lambda self: self._train_distribute)
    eval_distribute = property(lambda self: self._eval_distribute)
    experimental_distribute = property(lambda self: self._experimental_distribute)
    experimental_max_worker_delay_secs = property(
        lambda self: self._experimental_max_worker_delay_secs)
    session_creation_timeout_secs = property(lambda self: self._session_creation_timeout_secs)
    checkpoint_save_graph_def = property(lambda self: self._checkpoint_save_graph_def)
    device_fn = property(lambda self: self._device_fn)
    protocol = property(lambda self: self._protocol)
    # One host, one worker: the values tf.estimator computes without a TF_CONFIG cluster.
    cluster_spec = property(lambda self: None)
    evaluation_master = property(lambda self: "")
    is_chief = property(lambda self: True)
    task_type = property(lambda self: "worker")
    task_id = property(lambda self: 0)
    global_id_in_cluster = property(lambda self: 0)
    num_ps_replicas = property(lambda self: 0)
    num_worker_replicas = property(lambda self: 1)
    service = property(lambda self: None)

    def replace(self, **kwargs):
        """A copy with some properties replaced (the same ones tf.estimator allows)."""
        new = copy.deepcopy(self)
        for key, value in kwargs.items():
            if key not in _REPLACEABLE:
                raise ValueError("{} property is not allowed to be replaced.".format(key))
            setattr(new, "_" + key, value)
        if ("save_checkpoints_steps" in kwargs and "save_checkpoints_secs" in kwargs
                and new._save_checkpoints_steps is not None
                and new._save_checkpoints_secs is not None):
            raise ValueError(_BOTH_SAVE_CHECKPOINTS_MESSAGE)
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" not in kwargs \
                and new._save_checkpoints_steps is not None:
            new._save_checkpoints_secs = None
        if "save_checkpoints_secs" in kwargs and "save_checkpoints_steps" not in kwargs \
                and new._save_checkpoints_secs is not None:
            new._save_checkpoints_steps = None
        if "model_dir" in kwargs and new._model_dir is not None:
            new._model_dir = str(new._model_dir)
        new._validate()
        return new

    def __repr__(self):
        return "RunConfig(model_dir={!r}, ipu_run_config={!r})".format(
            self._model_dir, self._ipu_run_config)


def _is_config_proto(value):
    import tensorflow as tf

    return isinstance(value, tf.compat.v1.ConfigProto)


__all__ = ["IPURunConfig", "RunConfig"]
