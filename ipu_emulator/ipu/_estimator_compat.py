"""The few ``tf.estimator`` names that IPU estimator code reaches for.

TensorFlow 2.16 removed ``tf.estimator``, but Graphcore's estimator examples still write
``mode == tf.estimator.ModeKeys.TRAIN`` in their ``model_fn`` and some return a plain
``tf.estimator.EstimatorSpec``.  This module provides those names with the values the
estimator package used, for the IPU estimators here; ``compat.tf_estimator`` hangs them on
the ``tensorflow`` module (only where ``tf.estimator`` is missing) so such scripts run
unchanged through ``python -m ipu_emulator run``.  Private: not a module of the SDK.

    from ipu_emulator.ipu._estimator_compat import ModeKeys
    if mode == ModeKeys.PREDICT: ...
"""
import collections


class ModeKeys:
    """The three modes an estimator calls ``model_fn`` in (same string values as TF)."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


ALL_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)


class EstimatorSpec(collections.namedtuple("EstimatorSpec", [
        "mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
        "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks",
        "prediction_hooks"])):
    """What a ``model_fn`` returns to a plain estimator; ``IPUEstimator`` accepts it too.

    Only the fields an IPU estimator uses are checked; export and scaffold fields are
    carried but not used (there is no SavedModel export in the emulator).
    """

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None,
                export_outputs=None, training_chief_hooks=None, training_hooks=None,
                scaffold=None, evaluation_hooks=None, prediction_hooks=None):
        if mode not in ALL_MODES:
            # Same text as tensorflow_estimator's model_fn.EstimatorSpec.
            raise ValueError("mode={} unrecognized.".format(mode))
        return super().__new__(
            cls, mode, predictions, loss, train_op, eval_metric_ops, export_outputs,
            tuple(training_chief_hooks or ()), tuple(training_hooks or ()), scaffold,
            tuple(evaluation_hooks or ()), tuple(prediction_hooks or ()))
