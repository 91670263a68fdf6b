"""Programs run the learner's graph as it was built: TensorFlow's Grappler rewrites are off.

Before a TF1 session first runs a graph (and again for every new set of fetches and feeds),
TensorFlow's Grappler rewrites it for speed: it folds constants, fuses a matmul with its
bias and activation, prunes control dependencies, and goes over the graph twice.  For the
programs of this lab, small models run for a few steps in freshly built graphs, that
rewriting costs more than it saves.  Measured side by side on 2 cores (notes of issue 39):
the checks of the model-parallel exercises spent about 20 % of their CPU in Grappler
(5.7 s of 30 s for 30 correct programs) and took 23 s of CPU instead of 30 s without it;
notebook 12, which builds many programs, ran in 16-18 s instead of 20 s; the notebooks
that train longest (02, 07) ran as fast either way.

On an IPU the graph goes to the IPU's own compiler, so nothing a learner sees depends on
Grappler's CPU rewrites, and without them the CPU runs the ops the learner wrote unfused, on
either CPU kernel library (a matmul, its bias and ReLU become one oneDNN op only through
Grappler's remapper; TensorFlow's own folding of constants still happens).  A session whose
config sets any rewrite option keeps the config as given.

TF2's ``tf.function`` programs are rewritten by Grappler too, with the options of
``tf.config.optimizer.set_experimental_options``: ``install()`` turns the rewrites off there
(the TF2 tests' process ran in 66 s instead of 85-89 s), and as soon as the program sets any
option of its own, the program's options alone apply.
"""
from __future__ import annotations

import tensorflow as tf
from tensorflow.python.eager import context


def without_grappler(config):
    """``config`` (a ConfigProto or None) with Grappler's rewrites turned off, unless it
    already says how to rewrite; a copy, never the caller's own proto."""
    if config is not None and config.graph_options.HasField("rewrite_options"):
        return config
    lean = tf.compat.v1.ConfigProto()
    if config is not None:
        lean.CopyFrom(config)
    lean.graph_options.rewrite_options.disable_meta_optimizer = True
    return lean


_OFF = {"disable_meta_optimizer": True}
_original_set_options = context.Context.set_optimizer_experimental_options


def install():
    """``tf.function`` programs run without Grappler's rewrites, unless the program has set
    experimental optimizer options of its own (idempotent)."""
    if getattr(context.Context.set_optimizer_experimental_options, "_ipu_emulator", False):
        return
    state = context.context()
    # pylint: disable=protected-access  (the options a program set, kept by the context)
    if not state._optimizer_experimental_options:
        _original_set_options(state, _OFF)
        state._ipu_emulator_rewrites_off = True
    context.Context.set_optimizer_experimental_options = _set_by_program
    _set_by_program._ipu_emulator = True


def _set_by_program(self, options):
    """The program's own options replace ours (``tf.config.optimizer.set_experimental_options``)."""
    # pylint: disable=protected-access
    if getattr(self, "_ipu_emulator_rewrites_off", False):
        self._ipu_emulator_rewrites_off = False
        if "disable_meta_optimizer" not in options:
            self._optimizer_experimental_options.pop("disable_meta_optimizer", None)
    _original_set_options(self, options)


__all__ = ["install", "without_grappler"]
