"""AutoGraph leaves the emulator's SDK modules alone, as it leaves Graphcore's SDK alone.

Inside a ``tf.function``, AutoGraph rewrites each Python function the program calls into one
that builds TensorFlow control flow, unless the function's module is on its list of modules
not to convert (``CONVERSION_RULES`` in ``tensorflow/python/autograph/core/config.py``).
``tensorflow`` is on that list, and with it the SDK's ``tensorflow.python.ipu``: a learner's
program calls ``loops.repeat`` or ``IPUStrategy.run`` unconverted, and the body that
``repeat`` traces inside its while loop is traced as plain Python.

The emulator's packages standing for the SDK (``ipu_emulator.ipu``, the runtime behind it,
the ``tensorflow.contrib`` and plugin shims of ``ipu_emulator.compat``) were not on the list,
so AutoGraph converted some sixty of their functions at a process's first program: about
1.8 s of CPU before the first step of every TF2 notebook kernel and script
(bench/autograph_rules.py: the first call takes 0.21x the CPU with them listed).  And a
learner's ``repeat`` body was converted with them, where the SDK traces it unconverted: a
tensor-valued ``if`` in it became a ``tf.cond`` here and fails with the SDK.

``install()`` puts them on the list.  The code exercises' reference solutions
(``ipu_emulator.code_exercises``) stay off it: they are written as a learner writes, and are
converted as the learner's code is.  What ``IPUStrategy.run`` is given is still converted
inside a ``tf.function``: TensorFlow's strategy converts it itself, as for the SDK's.
"""
from __future__ import annotations

from tensorflow.python.autograph.core import config

# The packages whose functions AutoGraph must call as they are (see the module's docstring).
SDK_PACKAGES = ("ipu_emulator.ipu", "ipu_emulator.runtime", "ipu_emulator.compat")


def install():
    """Put the emulator's SDK packages on AutoGraph's do-not-convert list (idempotent)."""
    listed = {str(rule) for rule in config.CONVERSION_RULES}
    ours = (config.DoNotConvert(package) for package in SDK_PACKAGES)
    missing = tuple(rule for rule in ours if str(rule) not in listed)
    # First: AutoGraph stops at the first rule that names a module.
    config.CONVERSION_RULES = missing + tuple(config.CONVERSION_RULES)


__all__ = ["SDK_PACKAGES", "install"]
