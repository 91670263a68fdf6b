"""What a program did to its weights: the same start for the learner's and the reference's
program, and their values when it ended.

A check judges the learner's run against the reference solution's run on the same data.  For
their weights to be comparable they must start equal, whatever order the two programs built
their graphs in (TensorFlow derives each initializer's seed from the ops built before it, so
configuring the device first, or building the dataset later, would give other random starts).
``WeightWatch`` therefore gives the k-th trainable matrix a program creates the same
Glorot-uniform values in both runs, drawn from a generator seeded by k; vectors (biases, batch
norm's scale and offset) keep their initializers, which are constants.

The values at the end are read where the program leaves them: in TensorFlow 1 when the
learner's session closes (``with tf.Session() as sess:`` closes it inside their function), or
from the last session that ran something if it was never closed; in TensorFlow 2 from the
variables themselves.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import List, Optional

import numpy as np
import tensorflow as tf
from tensorflow.python.client import session as tf_session
from tensorflow.python.util import nest

from ipu_emulator.runtime import session_run


def _start_values(index: int, shape, dtype) -> np.ndarray:
    """The ``index``-th matrix's start: Glorot uniform (Keras's default for Dense and conv
    kernels), from a generator seeded by its place among the program's matrices."""
    fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    fan_out = int(shape[-1]) if shape else 1
    if len(shape) > 2:   # a convolution kernel: the receptive field counts in both fans
        field = int(np.prod(shape[:-2]))
        fan_in, fan_out = field * int(shape[-2]), field * int(shape[-1])
    limit = np.sqrt(6.0 / max(1, fan_in + fan_out))
    generator = np.random.default_rng(1000 + index)
    return generator.uniform(-limit, limit, size=shape).astype(dtype.as_numpy_dtype)


def _initial_tensor(kwargs) -> tf.Tensor:
    """The initial value ``kwargs`` ask for, as a tensor (its function called)."""
    value = kwargs["initial_value"]
    return tf.convert_to_tensor(value() if callable(value) else value,
                                dtype=kwargs.get("dtype"))


def _shape_and_dtype(kwargs):
    """The shape and dtype of the variable ``kwargs`` ask for, and its initial value as a
    tensor when that had to be made to know them (None when the request says them fully)."""
    shape, dtype = kwargs.get("shape"), kwargs.get("dtype")
    if shape is not None and tf.TensorShape(shape).is_fully_defined() and dtype is not None:
        return tuple(tf.TensorShape(shape).as_list()), tf.as_dtype(dtype).base_dtype, None
    value = _initial_tensor(kwargs)
    return tuple(value.shape.as_list()), value.dtype.base_dtype, value


class WeightWatch:
    """The trainable variables a program creates, in creation order, started alike in every
    run, and their values when the program ended (``final``; None when they could not be
    read: never initialized, or the session gone)."""

    def __init__(self):
        self.variables: List = []
        self.start: List[Optional[np.ndarray]] = []
        self.final: Optional[List[np.ndarray]] = None
        self._matrices = 0
        self._last_session = None
        # How many ``sess.run`` calls initialized the weights: more than once puts them back
        # at their start each time.
        self.initializations = 0

    # --- creation ---------------------------------------------------------------------------

    def _creator(self, next_creator, **kwargs):
        start = None
        if kwargs.get("trainable") is not False and kwargs.get("initial_value") is not None:
            start = self._start(kwargs)
        variable = next_creator(**kwargs)
        if variable.trainable and not any(variable is seen for seen in self.variables):
            self.variables.append(variable)
            self.start.append(start)
        return variable

    def _start(self, kwargs) -> Optional[np.ndarray]:
        """Set a matrix's start (in ``kwargs``) and return it; a vector's start is its
        initializer's constant value, or None when that is not a constant."""
        with tf.init_scope():   # any op made here belongs outside the program's loops
            shape, dtype, value = _shape_and_dtype(kwargs)
            if not dtype.is_floating:
                return None
            if len(shape) >= 2:
                start = _start_values(self._matrices, shape, dtype)
                self._matrices += 1
                kwargs["initial_value"] = lambda: tf.constant(start)
                kwargs["shape"], kwargs["dtype"] = shape, dtype
                return start
            if value is None:   # made once: the initializer is not called twice
                value = _initial_tensor(kwargs)
            start = tf.get_static_value(value)
            if start is not None:
                kwargs["initial_value"] = lambda: tf.constant(start, dtype=dtype)
            return None if start is None else np.asarray(start)

    # --- reading ----------------------------------------------------------------------------

    def read(self, session) -> None:
        """Read the variables of ``session``'s graph with the unwrapped ``Session.run`` (a
        read is no engine run; a check that runs the program itself calls it); leave
        ``final`` as it was if they cannot be read."""
        mine = [variable for variable in self.variables if variable.graph is session.graph]
        if not mine or len(mine) != len(self.variables):
            return
        try:
            self.final = [np.asarray(value) for value in
                          session_run.unwrapped_run(session, mine)]
        except (tf.errors.OpError, RuntimeError):
            pass

    @contextlib.contextmanager
    def watching(self):
        """Inside: variables made alike and watched; sessions read before they close."""
        watch = self
        original_close = tf_session.BaseSession.close
        original_run = tf_session.BaseSession.run

        def close(session):
            if not getattr(session, "_closed", False):
                watch.read(session)
            return original_close(session)

        def run(session, fetches, *args, **kwargs):
            watch._last_session = weakref.ref(session)
            if watch._initializes(session.graph, fetches):
                watch.initializations += 1
            return original_run(session, fetches, *args, **kwargs)

        tf_session.BaseSession.close = close
        tf_session.BaseSession.run = run
        try:
            with tf.variable_creator_scope(self._creator):
                yield self
        finally:
            tf_session.BaseSession.close = original_close
            tf_session.BaseSession.run = original_run
        self._read_what_is_left()

    def _initializes(self, graph, fetches) -> bool:
        """Whether ``fetches`` run the watched variables' initializers (directly, or through
        a group such as ``global_variables_initializer()``)."""
        initializers = {variable.initializer for variable in self.variables
                        if getattr(variable, "graph", None) is graph}
        if not initializers:
            return False
        for fetch in nest.flatten(fetches):
            op = getattr(fetch, "op", fetch)
            if isinstance(fetch, str):
                try:
                    op = graph.as_graph_element(fetch)
                    op = getattr(op, "op", op)
                except (KeyError, ValueError, TypeError):
                    continue
            if op in initializers or initializers.intersection(
                    getattr(op, "control_inputs", ())):
                return True
        return False

    def _read_what_is_left(self) -> None:
        """After the program: eager variables are read as they are; graph variables from the
        last session that ran, if the program left it open."""
        if not self.variables:
            return
        try:
            self.final = [np.asarray(variable.numpy()) for variable in self.variables]
            return
        except (NotImplementedError, AttributeError, ValueError, tf.errors.OpError):
            pass   # graph variables: their values live in a session
        session = self._last_session() if self._last_session is not None else None
        if session is not None and not getattr(session, "_closed", False):
            self.read(session)


__all__ = ["WeightWatch"]
