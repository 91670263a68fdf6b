"""The checks an IPU makes on the data given to ``fit``, ``evaluate`` and ``predict``, and how
many batches each replica runs.

An IPU program is compiled for fixed shapes and runs ``steps_per_execution`` batches per
engine run, so the data must come in whole batches of a known shape, and each replica's
number of batches must be a multiple of ``steps_per_execution``.  ``plan_execution`` applies
the rules of the SDK's ``IPUDataHandler`` (``keras/ipu/extensions/data_adapter.py`` in
Graphcore's Keras, SDK 2.6-3.x; ``tensorflow/python/ipu/keras/extensions/data_adapter.py``
before), with its messages, in its order, before Keras sees the data:

- the steps of an epoch are the ``steps`` (``steps_per_epoch``, ``validation_steps``) given,
  or else the batches in the data, and they count the batches of *all* replicas: each replica
  runs ``steps // replicas`` of them, and the rest are dropped with a warning;
- ``steps_per_execution`` counts one replica's batches: more than a replica has are cut down to
  them (a warning), and it must divide them;
- a dataset whose size is known must hold the batches asked for (the SDK compares one
  replica's steps with the dataset's batches); arrays have no known size to the SDK, so too
  few of them end the epoch early, as in Keras.

The plan says what to hand Keras so that it runs exactly the batches the SDK would: the
replicas' batches one after the other, ``steps x replicas`` of them an epoch.
"""
import inspect
import logging
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import tensorflow as tf
from tensorflow.python.util import nest

_log = logging.getLogger("ipu_emulator")

DEFAULT_BATCH_SIZE = 32  # Keras's default for array inputs

_INFINITE_MESSAGE = (
    # Keras's own (its ``DataHandler._infer_steps``), which the SDK's handler calls first.
    "When passing an infinitely repeating dataset, please specify a `steps_per_epoch` value so "
    "that epoch level callbacks continue to work. The value can be arbitrary, or a number that "
    "you think correctly defines the size of an epoch. Epoch-level callbacks will then be "
    "called at this interval.")


@dataclass(frozen=True)
class ExecutionPlan:
    """What one call runs: per replica, and what Keras is given to run it."""
    steps_per_execution: int        # one replica's steps in each engine run
    batch_bytes: int
    steps: int = 0                  # one replica's steps in an epoch
    replicas: int = 1
    keras_x: Any = None             # the data for Keras (a dataset cut to the batches run)
    keras_steps: Optional[int] = None   # the steps for Keras: all replicas' batches
    keras_batch_size: Optional[int] = None


@dataclass(frozen=True)
class _Data:
    batches: Optional[int]        # what Keras infers an epoch to be when no steps are given
    cardinality: int              # the dataset's; UNKNOWN for arrays, as the SDK sees them
    batch_bytes: int
    batch_size: Optional[int] = None
    is_dataset: bool = False


def plan_execution(x, y=None, batch_size=None, steps=None, steps_per_execution=1, replicas=1,
                   epochs=1):
    """Validate the data as the SDK does; the plan of one ``fit``, ``evaluate`` or ``predict``
    call on ``replicas`` replicas (``epochs``: the epochs it runs, ``fit``'s less its initial
    epoch).

    ``steps`` is what the user gave (``steps_per_epoch``, ``steps``, ``validation_steps``), for
    all replicas together; ``steps_per_execution`` is one replica's."""
    data = _describe(x, y, batch_size, steps)

    # IPUDataHandler._infer_steps: Keras's inference, then shared out between the replicas.
    if steps is not None:
        total = steps
    elif data.batches is not None:
        total = data.batches
    elif data.cardinality == tf.data.INFINITE_CARDINALITY:
        raise ValueError(_INFINITE_MESSAGE)
    else:
        raise ValueError("Could not infer the size of the data. You must specify the number "
                         "of steps to run.")
    if total % replicas and data.cardinality >= 0:
        dropped = total % replicas
        _log.warning("Dataset of length %d is being evenly distributed between %d replicas. "
                     "The remaining %d batch%s will be dropped.", data.cardinality, replicas,
                     dropped, "es" if dropped > 1 else "")
    inferred = total // replicas

    # IPUDataHandler._validate_dataset: a dataset of known size must hold the steps asked for.
    # As the SDK does, one replica's steps are compared with the dataset's batches, over all
    # the epochs unless the iterator is made again every epoch.
    recreated = data.is_dataset and (steps is None or data.cardinality == steps)
    if data.cardinality >= 0:
        needed = inferred if recreated else epochs * inferred
        if needed > data.cardinality:
            raise ValueError(
                "Your input does not have enough data. Make sure that your dataset or generator "
                "can generate at least {} batches (currently it can only generate {} batches). "
                "You may need to use the repeat() function when building your dataset."
                .format(needed, data.cardinality))
    if data.is_dataset:
        _check_shapes(x)

    # IPUDataHandler._validate_data_handler.
    to_replica = " to this replica" if replicas > 1 else ""
    if steps_per_execution > inferred:
        _log.warning("`steps_per_execution` has been set to %d but the dataset provided%s only "
                     "contains %d batches. Using %d as `steps_per_execution`.",
                     steps_per_execution, to_replica, inferred, inferred)
        steps_per_execution = inferred
    if inferred == 0:
        items = data.cardinality if data.cardinality >= 0 else (data.batches or total)
        each = math.ceil(items / replicas)
        raise ValueError("The provided dataset contains {} items, but all {} replicas are "
                         "requested to run {} steps each. Make sure the dataset contains at "
                         "least {} items.".format(items, replicas, each, each * replicas))
    if inferred % steps_per_execution:
        raise ValueError("`steps_per_execution` must be a divisor of the number of batches in "
                         "the dataset provided{}.".format(to_replica))

    keras_x, keras_steps = _for_keras(x, data, steps, inferred * replicas, recreated)
    return ExecutionPlan(steps_per_execution=steps_per_execution, batch_bytes=data.batch_bytes,
                         steps=inferred, replicas=replicas, keras_x=keras_x,
                         keras_steps=keras_steps, keras_batch_size=data.batch_size)


def _for_keras(x, data, steps, run, recreated):
    """The data and steps that make Keras run ``run`` batches an epoch, from a new iterator
    every epoch exactly when the SDK makes one."""
    if not data.is_dataset:
        # Arrays: Keras reads one stream over all epochs, as the SDK's adapter does.
        return x, (None if steps is None and run == data.batches else run)
    if data.cardinality >= 0 and recreated and run < data.cardinality:
        # The batches the replicas cannot share out are dropped, every epoch.
        return x.take(run), run
    if data.cardinality == run and not recreated:
        # Keras would start the dataset again every epoch where the SDK reads on.
        return x.filter(lambda *element: True), run
    return x, (steps if steps is None else run)


def _describe(x, y, batch_size, steps):
    if isinstance(x, tf.data.Dataset):
        cardinality = int(x.cardinality())
        specs = nest.flatten(x.element_spec)
        batch_bytes = sum(int(s.shape.num_elements() or 0) * s.dtype.size for s in specs
                          if hasattr(s, "dtype") and s.dtype not in (tf.string, tf.variant)
                          and s.shape.is_fully_defined())
        return _Data(batches=cardinality if cardinality >= 0 else None, cardinality=cardinality,
                     batch_bytes=batch_bytes, is_dataset=True)
    if _is_generator_like(x):
        raise ValueError(
            "The provided set of data is of type `{}` which is not compatible with the IPU's "
            "requirement to know the data shape ahead of time. Please use "
            "`tf.data.Dataset.from_generator()` to specify the shape of your data."
            .format(type(x).__name__))
    return _array_batches(x, y, batch_size, steps)


def _check_shapes(dataset):
    for spec in nest.flatten(dataset.element_spec):
        shape = getattr(spec, "shape", None)
        if shape is not None and not shape.is_fully_defined():
            raise ValueError(
                "The provided set of data contains a shape {} which is not fully defined. "
                "Executing on IPU requires all dataset elements to have fully defined shapes. "
                "If using batch() make sure to set `drop_remainder=True`.".format(shape))


def _is_generator_like(x):
    if inspect.isgenerator(x) or isinstance(x, tf.keras.utils.Sequence):
        return True
    return hasattr(x, "__next__") and not isinstance(x, (np.ndarray, tf.Tensor))


def _array_batches(x, y, batch_size, steps):
    arrays = [a for a in nest.flatten((x, y)) if a is not None]
    if not arrays:
        return _Data(batches=None, cardinality=tf.data.UNKNOWN_CARDINALITY, batch_bytes=0)
    samples = int(np.shape(arrays[0])[0])
    if not batch_size:
        # Keras's rule: the steps given set the batch size, or else 32.
        batch_size = int(math.ceil(samples / steps)) if steps else DEFAULT_BATCH_SIZE
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
    return _Data(batches=samples // batch_size, cardinality=tf.data.UNKNOWN_CARDINALITY,
                 batch_bytes=batch_bytes, batch_size=batch_size)
