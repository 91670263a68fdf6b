"""``IPULoggingTensorHook``: log tensors from inside an on-device training loop.

A plain ``LoggingTensorHook`` fetches its tensors with ``Session.run``, which cannot reach
into a loop running on the IPU.  This hook sends them to the host through an outfeed
instead: call ``log`` in the ``model_fn`` (inside the loop) and run the op it returns with
the training op; the hook prints what arrived after each engine run it is due for.

    hook = ipu_session_run_hooks.IPULoggingTensorHook(every_n_iter=1)
    def model_fn(features, labels, mode):
        ...
        log_op = hook.log({"loss": loss})
        return IPUEstimatorSpec(mode, loss=loss, train_op=tf.group([train_op, log_op]),
                                training_hooks=[hook])

``LoggingMode.LAST`` (the default) prints the values of the last loop iteration;
``LoggingMode.ALL`` prints every iteration's, stacked on a leading axis.
"""
import enum

import tensorflow as tf

from .ipu_outfeed_queue import IPUOutfeedMode, IPUOutfeedQueue


class IPULoggingTensorHook(tf.compat.v1.train.SessionRunHook):
    """Prints the tensors given to ``log`` every N engine runs, every N seconds, or at end."""

    class LoggingMode(enum.Enum):
        """Which loop iterations' values are printed."""
        ALL = IPUOutfeedMode.ALL
        LAST = IPUOutfeedMode.LAST

    def __init__(self, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None,
                 logging_mode=LoggingMode.LAST, feed_name=None, replication_factor=1):
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("Either every_n_iter or every_n_secs should be provided "
                             "(but not both), or at_end should be True.")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError("Invalid every_n_iter=%s." % every_n_iter)
        if not isinstance(logging_mode, IPULoggingTensorHook.LoggingMode):
            raise ValueError("Expected `logging_mode` to be an "
                             "`IPULoggingTensorHook.LoggingMode`, but it is {}".format(
                                 logging_mode))
        self._timer = None if only_at_end else tf.compat.v1.train.SecondOrStepTimer(
            every_secs=every_n_secs, every_steps=every_n_iter)
        self._log_at_end = at_end
        self._formatter = formatter
        self._outfeed = IPUOutfeedQueue(feed_name=feed_name, outfeed_mode=logging_mode.value,
                                        replication_factor=replication_factor)
        self._dequeue = None
        self._iteration = 0
        self._should_log = False
        self._logged_since_run = True

    def log(self, tensors):
        """Log ``tensors`` (a dict name -> tensor, a list of tensors, or a tensor); returns
        the op that sends them, to run with the training op (e.g. ``tf.group``)."""
        if isinstance(tensors, dict):
            named = dict(tensors)
        elif isinstance(tensors, (list, tuple)):
            named = {t.name: t for t in tensors}
        else:
            named = {tensors.name: tensors}
        return self._outfeed.enqueue(named)

    def begin(self):
        if not self._outfeed.enqueued:
            raise RuntimeError("IPULoggingTensorHook.log() was not called in this graph: "
                               "there is nothing to log.")
        self._dequeue = self._outfeed.dequeue()
        self._iteration = 0

    def before_run(self, run_context):
        self._should_log = (self._timer is not None
                            and self._timer.should_trigger_for_step(self._iteration))
        return None

    def after_run(self, run_context, run_values):
        self._logged_since_run = False
        if self._should_log:
            self._timer.update_last_triggered_step(self._iteration)
            self._log_values(run_context.session)
        self._iteration += 1

    def end(self, session):
        if self._log_at_end and not self._logged_since_run:
            self._log_values(session)

    def _log_values(self, session):
        values = session.run(self._dequeue)
        self._logged_since_run = True
        if self._formatter:
            tf.compat.v1.logging.info(self._formatter(values))
        else:
            tf.compat.v1.logging.info(", ".join(
                "%s = %s" % (tag, values[tag]) for tag in sorted(values)))


__all__ = ["IPULoggingTensorHook"]
