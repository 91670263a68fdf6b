"""A stand-in ``tf.estimator`` for estimator scripts run through the runner.

TensorFlow 2.16 removed ``tf.estimator``.  :func:`install` (called by the runner) hangs a
module-like object on ``tf`` and ``tf.compat.v1`` with the names IPU estimator scripts use:
``ModeKeys`` and ``EstimatorSpec`` (``ipu._estimator_compat``), ``RunConfig`` (the IPU one)
and the session-run hooks ``tf.estimator`` re-exported.
"""
import types

_HOOK_NAMES = (
    "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues",
    "CheckpointSaverListener", "CheckpointSaverHook", "FeedFnHook", "FinalOpsHook",
    "GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook",
    "ProfilerHook", "SecondOrStepTimer", "StepCounterHook", "StopAtStepHook",
    "SummarySaverHook")


def namespace():
    """A module-like object standing in for ``tf.estimator``."""
    # Lazy (TensorFlow and the API front): importing this module must stay cheap.
    import tensorflow as tf

    from ipu_emulator.ipu import ipu_run_config
    from ipu_emulator.ipu._estimator_compat import EstimatorSpec, ModeKeys
    estimator = types.ModuleType("tensorflow.estimator",
                                 "Stand-in for the removed tf.estimator (ipu_emulator).")
    estimator.ModeKeys = ModeKeys
    estimator.EstimatorSpec = EstimatorSpec
    estimator.RunConfig = ipu_run_config.RunConfig
    # The session-run hooks tf.estimator re-exported from tf.compat.v1.train.
    for name in _HOOK_NAMES:
        setattr(estimator, name, getattr(tf.compat.v1.train, name))
    return estimator


def install():
    """Give ``tf.estimator`` and ``tf.compat.v1.estimator`` the names above, if missing.

    Never replaces a real ``tf.estimator`` (an older TensorFlow still has one).
    """
    import tensorflow as tf

    estimator = None
    for module in (tf, tf.compat.v1):
        if getattr(module, "estimator", None) is None:
            estimator = estimator or namespace()
            setattr(module, "estimator", estimator)
