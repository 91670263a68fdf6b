"""The checks an IPU makes on the data given to ``fit``, ``evaluate`` and ``predict``.

An IPU program is compiled for fixed shapes and runs ``steps_per_execution`` batches per
engine run, so the data must come in whole batches of a known shape, and the number of
batches must be a multiple of ``steps_per_execution``.  ``plan_execution`` applies the SDK's
rules and messages before Keras sees the data, and returns the steps per execution to use
and the bytes one batch moves to the IPU (for the simulator).
"""
import inspect
import logging
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from tensorflow.python.util import nest

_log = logging.getLogger("ipu_emulator")

DEFAULT_BATCH_SIZE = 32  # Keras's default for array inputs


@dataclass(frozen=True)
class ExecutionPlan:
    steps_per_execution: int
    batch_bytes: int


def plan_execution(x, y=None, batch_size=None, steps=None, steps_per_execution=1, replicas=1):
    """Validate the data; the steps per execution to use and the bytes of one batch.

    With ``replicas`` > 1 the batches are shared out between the replicas, and the counts
    (``steps``, ``steps_per_execution``) are per replica, as from SDK 2.5."""
    if isinstance(x, tf.data.Dataset):
        available, batch_bytes = _dataset_batches(x)
    elif _is_generator_like(x):
        raise ValueError(
            "The provided set of data is of type `{}` which is not compatible with the IPU's "
            "requirement to know the data shape ahead of time. Please use "
            "`tf.data.Dataset.from_generator()` to specify the shape of your data."
            .format(type(x).__name__))
    else:
        available, batch_bytes = _array_batches(x, y, batch_size or DEFAULT_BATCH_SIZE)

    if available is not None and replicas > 1:
        available //= replicas
    to_replica = " to this replica" if replicas > 1 else ""
    if steps is not None:
        if available is not None and steps > available:
            raise ValueError(
                "Your input does not have enough data. Make sure that your dataset or generator "
                "can generate at least {} batches (currently it can only generate {} batches). "
                "You may need to use the repeat() function when building your dataset."
                .format(steps, available))
        total = steps
    else:
        total = available
    if total is not None and total > 0:
        if steps_per_execution > total:
            _log.warning("`steps_per_execution` has been set to %d but the dataset provided%s "
                         "only contains %d batches. Using %d as `steps_per_execution`.",
                         steps_per_execution, to_replica, total, total)
            steps_per_execution = total
        elif total % steps_per_execution:
            raise ValueError("`steps_per_execution` must be a divisor of the number of batches "
                             "in the dataset provided{}.".format(to_replica))
    return ExecutionPlan(steps_per_execution=steps_per_execution, batch_bytes=batch_bytes)


def _dataset_batches(dataset):
    specs = nest.flatten(dataset.element_spec)
    for spec in specs:
        shape = getattr(spec, "shape", None)
        if shape is not None and not shape.is_fully_defined():
            raise ValueError(
                "The provided set of data contains a shape {} which is not fully defined. "
                "Executing on IPU requires all dataset elements to have fully defined shapes. "
                "If using batch() make sure to set `drop_remainder=True`.".format(shape))
    batch_bytes = sum(int(s.shape.num_elements()) * s.dtype.size for s in specs
                      if hasattr(s, "dtype") and s.dtype not in (tf.string, tf.variant))
    cardinality = int(dataset.cardinality())
    return (cardinality if cardinality >= 0 else None), batch_bytes


def _is_generator_like(x):
    if inspect.isgenerator(x) or isinstance(x, tf.keras.utils.Sequence):
        return True
    return hasattr(x, "__next__") and not isinstance(x, (np.ndarray, tf.Tensor))


def _array_batches(x, y, batch_size):
    arrays = [a for a in nest.flatten((x, y)) if a is not None]
    if not arrays:
        return None, 0
    samples = int(np.shape(arrays[0])[0])
    if samples % batch_size:
        raise ValueError(
            "The provided set of data has a partial batch, which could result in data being "
            "dropped. Either adjust the `batch_size` of your model (currently set to {}) or pad "
            "your dataset to ensure there are no partial batches.".format(batch_size))
    batch_bytes = 0
    for array in arrays:
        per_sample = int(np.prod(np.shape(array)[1:], dtype=np.int64))
        itemsize = tf.as_dtype(getattr(array, "dtype", np.float32)).size
        batch_bytes += batch_size * per_sample * itemsize
    return samples // batch_size, batch_bytes
