"""Sessions run the learner's graph as it was built: TensorFlow's Grappler rewrites are off.

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
"""
from __future__ import annotations

import tensorflow as tf


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


__all__ = ["without_grappler"]
