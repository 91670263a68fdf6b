"""``IPUStrategy``: run TensorFlow 2 code on the IPU.

A ``tf.distribute`` strategy for one IPU device.  Variables created in its ``scope()`` live
on the IPU (their initialisers run on the host); ``run(fn, args)`` executes a ``tf.function``
once on the IPU, which is one engine run; ``iter(dataset)`` inside the scope makes an infeed.

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        batches = iter(dataset)                         # an infeed, not a host iterator
        losses = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def train(batches, steps):
            for _ in tf.range(steps):
                losses.enqueue(train_step(*next(batches)))

        for _ in range(100):
            strategy.run(train, args=(batches, 10))  # 10 steps per engine run
        print(losses.dequeue())

In the emulator the IPU device is the host CPU running plain TensorFlow: ``jit_compile``
requests are dropped for functions the strategy runs (XLA on the CPU cannot compile the
feeds' host iterators, and it is slower than plain TensorFlow for convolutions here).
Each ``run`` called eagerly is recorded as one ``EngineRun`` for the simulator.
"""
import sys

import tensorflow as tf
from tensorflow.python import tf2
from tensorflow.python.data.ops import dataset_ops
from tensorflow.python.distribute import distribute_lib, input_util, one_device_strategy
from tensorflow.python.util import nest

from ipu_emulator.runtime import float16, tf2_feeds, tf2_programs
from . import ipu_infeed_queue

_EAGER_RUN_MESSAGE = (
    "IPUStrategyV1.run(fn, ...) does not support eager execution. Either convert `fn` into a "
    "tf.function or consider calling strategy.run inside a tf.function.")
_RUN_V2_MESSAGE = "`experimental_run_v2` has been deleted. Use `run` instead."

# The emulated IPU device executes on the host's CPU.
_EXECUTION_DEVICE = "/device:CPU:0"
# A distributed data set's input on one replica, read where it is (the host): no
# multi-device iterator (``experimental_distribute_dataset``).
_ONE_REPLICA_INPUT = distribute_lib.InputOptions(
    experimental_replication_mode=distribute_lib.InputReplicationMode.PER_REPLICA,
    experimental_fetch_to_device=False)


class IPUStrategyV1(tf.distribute.OneDeviceStrategy):
    """A strategy that places variables and runs functions on one (emulated) IPU device."""

    def __init__(self, ipu_device="/device:IPU:0", cpu_device="/device:CPU:0",
                 enable_dataset_iterators=True, enable_keras_extensions=True):
        super().__init__(_EXECUTION_DEVICE)
        self._execution_device = self.extended.worker_devices[0]
        self._free_run_scopes = []  # list.pop and append are atomic: no lock needed
        self._ipu_device = ipu_device
        self._cpu_device = cpu_device
        self._enable_iterators = bool(enable_dataset_iterators)
        self._enable_keras_extensions = bool(enable_keras_extensions)
        from ipu_emulator.ipu.keras import extensions  # pylint: disable=import-outside-toplevel
        extensions.install()

    # -- running programs -----------------------------------------------------------

    def run(self, fn, args=(), kwargs=None, options=None):
        """Run ``fn(*args, **kwargs)`` once on the IPU and return its outputs as they are.

        Eagerly, ``fn`` must be a ``tf.function`` (it is the program the IPU executes);
        inside a ``tf.function`` any callable may be run.
        """
        kwargs = kwargs or {}
        if not tf.executing_eagerly():
            # Inside a function being traced (IPU Keras's steps, a hand-written loop's body):
            # the step's float16 ops are computed in float32 and rounded to float16, as a
            # compiled TF1 program's are (runtime/float16.py).
            graph = tf.compat.v1.get_default_graph()
            first = len(graph.get_operations())
            outputs = super().run(fn, args=args, kwargs=kwargs, options=options)
            return float16.settle_function_step(graph.get_operations()[first:], outputs)
        if not tf2_programs.is_function(fn):
            raise ValueError(_EAGER_RUN_MESSAGE)
        fn = tf2_programs.without_xla(fn)
        # Straight into the device and replica context, as ``OneDeviceStrategy`` enters them
        # for each replica: ``tf.distribute``'s generic ``run`` adds AutoGraph wrapping and
        # checks that cost more than a small training step.  Making the two contexts costs a
        # small step about 3 %, so used ones are kept for reuse; a run nested in another, or
        # in another thread, takes its own pair.
        free = self._free_run_scopes
        device, replica = free.pop() if free else (
            tf.device(self._execution_device),
            one_device_strategy._OneDeviceReplicaContext(self))  # pylint: disable=protected-access
        try:
            with device, replica:
                # Checked, traced and costed once per signature; later calls look it up.
                info = tf2_programs.program_info(fn, args, kwargs, check_inputs=_check_inputs,
                                                 check_outputs=_check_outputs)
                return tf2_programs.execute(info, fn, args, kwargs)
        finally:
            free.append((device, replica))

    def experimental_run_v2(self, fn, args=(), kwargs=None, options=None):
        raise RuntimeError(_RUN_V2_MESSAGE)

    def reduce(self, reduce_op, value, axis=None):
        """Sum or mean over replicas (the strategy has one replica, so ``value`` itself)."""
        if isinstance(reduce_op, str) and reduce_op.upper() in ("SUM", "MEAN"):
            reduce_op = tf.distribute.ReduceOp(reduce_op.upper())
        if reduce_op not in (tf.distribute.ReduceOp.SUM, tf.distribute.ReduceOp.MEAN):
            raise ValueError("Unsupported reduce op: {}".format(reduce_op))
        return super().reduce(reduce_op, value, axis)

    # -- data sets ------------------------------------------------------------------

    def experimental_distribute_dataset(self, dataset, options=None):
        """The data set for the strategy's one replica (Keras's fit, evaluate and predict
        distribute theirs).  Without options its iterators are plain ones on the host, as
        ``tf.distribute`` makes them when it need not fetch to a device: the elements and their
        order are the same, but ``OneDeviceStrategy``'s multi-device iterator traced five
        functions of its own at every ``iter()`` (every epoch of fit: about 70 ms of CPU).
        With TensorFlow 2 behaviour off (a TF1 program, or a check run eagerly in one), the
        multi-device iterator stays: the plain one's V1 form hands Keras its batches unpacked."""
        if options is not None or not tf2.enabled():
            return super().experimental_distribute_dataset(dataset, options)
        return input_util.get_distributed_dataset(
            dataset, self.extended._input_workers_with_options(_ONE_REPLICA_INPUT),  # pylint: disable=protected-access
            self, options=_ONE_REPLICA_INPUT)

    def _enable_dataset_iterators(self):
        return self._enable_iterators and tf.executing_eagerly()

    def _create_dataset_iterator(self, dataset):
        return ipu_infeed_queue.IPUOwnedIterator(dataset)

    @property
    def enable_keras_extensions(self):
        return self._enable_keras_extensions


IPUStrategy = IPUStrategyV1


def _check_no_float64(values, kind):
    for value in values:
        dtype = getattr(value, "dtype", None)
        try:
            is_double = dtype is not None and tf.as_dtype(dtype) == tf.float64
        except TypeError:
            is_double = False
        if is_double:
            raise TypeError("Unsupported data type for {}: float64".format(kind))


def _check_inputs(flat_arguments):
    _check_no_float64(flat_arguments, "input")


def _check_outputs(concrete):
    _check_no_float64(nest.flatten(concrete.structured_outputs, expand_composites=True), "output")


def current_ipu_strategy():
    """The ``IPUStrategy`` whose scope is active, or None."""
    if not tf.distribute.has_strategy():
        return None
    strategy = tf.distribute.get_strategy()
    return strategy if isinstance(strategy, IPUStrategyV1) else None


# --- iter(dataset) inside the strategy makes an infeed -----------------------------------
#
# Graphcore's TensorFlow changed ``Dataset.__iter__`` to ask the current strategy; the
# emulator wraps it the same way.  TensorFlow's and Keras's own iterators (distributed data
# sets, Keras's data handler) stay ordinary: only user code gets an infeed.

_INTERNAL_CALLERS = ("tensorflow.", "tf_keras.", "keras.")


def _dataset_iter(dataset):
    strategy = current_ipu_strategy()
    if strategy is not None and strategy._enable_dataset_iterators():  # pylint: disable=protected-access
        caller = sys._getframe(1).f_globals.get("__name__", "")  # pylint: disable=protected-access
        if not caller.startswith(_INTERNAL_CALLERS):
            return strategy._create_dataset_iterator(dataset)  # pylint: disable=protected-access
    return tf2_feeds.plain_dataset_iter(dataset)


def install_dataset_hook():
    """Idempotently route ``iter(dataset)`` through the current ``IPUStrategy``."""
    if dataset_ops.DatasetV2.__iter__ is not _dataset_iter:
        dataset_ops.DatasetV2.__iter__ = _dataset_iter


install_dataset_hook()
