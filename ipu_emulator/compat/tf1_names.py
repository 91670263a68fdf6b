"""TF 1.x names on ``import tensorflow as tf`` for scripts run with ``--tf1``.

Scripts of the ``tensorflow.contrib.ipu`` era (SDK 0.9-1.x, TensorFlow 1.x) write
``import tensorflow as tf`` and then ``tf.Session()``, ``tf.placeholder``,
``tf.train.GradientDescentOptimizer``.  TF 2.21 keeps those under ``tf.compat.v1`` only.
``install()`` adds every ``tf.compat.v1`` name that ``tf`` lacks to ``tf``, and likewise one
level down (``tf.train``, ``tf.nn``...).  A name both versions have keeps its TF2 meaning,
because the emulator itself uses ``tf`` too; the exceptions are the few whose TF2 meaning
would silently change a TF1 script (``_TF1_MEANING``), which nothing in the emulator uses.
"""
import types

# Modules whose names are never merged: ``compat`` is the source itself, and ``keras`` is
# legacy Keras in both versions (loading it here would only cost start-up time).
_SKIP = {"compat", "keras"}
# Names that take their TF1 meaning: TF2 reused them for something else (``tf.losses`` is
# Keras's, unreduced; ``tf.nn.dropout(x, 0.8)`` would drop 80% where TF1 kept 80%).
_TF1_MEANING = {("losses",), ("metrics",), ("summary",), ("nn", "dropout")}


def install():
    """Add the missing TF1 names (idempotent)."""
    import tensorflow as tf
    _merge(tf, tf.compat.v1, ())


def _merge(target, source, path):
    for name in dir(source):
        if name.startswith("_") or name in _SKIP:
            continue
        try:
            value = getattr(source, name)
        except (AttributeError, ImportError):  # a lazily loaded part that is not installed
            continue
        try:
            present = getattr(target, name)  # also finds the lazily loaded TF2 attributes
        except (AttributeError, ImportError):
            present = None
        if present is None or path + (name,) in _TF1_MEANING:
            setattr(target, name, value)
        elif (not path and isinstance(present, types.ModuleType)
              and isinstance(value, types.ModuleType) and present is not value):
            _merge(present, value, (name,))
