"""Hand a second build of the same code the variables its first build created.

Code that makes its variables anew on every call (Keras layers built inside a pipeline
stage or a compiled function) would otherwise get fresh variables, with fresh random
initial values, each time it is built again: for another replica of a pipeline
(``replication``), or when a program built before the IPU system was configured is built
again for the device it runs on (``late_compile``).  Creations are matched by the name given
to the creator (before scoping), dtype and order among those, and the shape is checked.
"""
from __future__ import annotations

from typing import Dict, List

import tensorflow as tf


def _creation_key(kwargs) -> tuple:
    dtype = kwargs.get("dtype")
    try:
        dtype = None if dtype is None else tf.as_dtype(dtype).name
    except TypeError:
        dtype = str(dtype)
    return (str(kwargs.get("name")), dtype)


class VariableCreations:
    """The variables one build created, in order, keyed by how they were asked for."""

    def __init__(self):
        self.made: Dict[tuple, List[tf.Variable]] = {}

    def recording_creator(self):
        """A ``variable_creator_scope`` creator that logs every variable created."""
        def creator(next_creator, **kwargs):
            variable = next_creator(**kwargs)
            self.made.setdefault(_creation_key(kwargs), []).append(variable)
            return variable
        return creator

    def replay(self) -> "Replay":
        """Matches the creations of another build, in order, against this log."""
        return Replay(self)


class Replay:
    """One later build's walk through a ``VariableCreations`` log."""

    def __init__(self, creations: VariableCreations):
        self._creations = creations
        self._seen: Dict[tuple, int] = {}

    def match(self, kwargs):
        """The logged variable this creation stands for, or None (then create it)."""
        key = _creation_key(kwargs)
        position = self._seen.get(key, 0)
        self._seen[key] = position + 1
        made = self._creations.made.get(key, [])
        if position >= len(made):
            return None
        shape = kwargs.get("shape")
        if shape is not None and not tf.TensorShape(shape).is_compatible_with(
                made[position].shape):
            return None
        return made[position]

    def reusing_creator(self):
        """A creator that returns the logged variable where there is one."""
        def creator(next_creator, **kwargs):
            logged = self.match(kwargs)
            return logged if logged is not None else next_creator(**kwargs)
        return creator
