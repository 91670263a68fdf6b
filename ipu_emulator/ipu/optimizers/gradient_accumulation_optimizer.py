"""Gradient accumulation: one weight update per ``num_mini_batches`` mini-batches.

Each loop iteration adds its gradients to accumulators; every ``num_mini_batches``-th
iteration the wrapped optimizer applies the accumulated gradient and the accumulators are
cleared.  Between updates the weights do not change, so the update sees
``num_mini_batches`` times the batch (the effective batch size, times the replicas when
replicated) at the memory cost of one::

    opt = ipu.optimizers.GradientAccumulationOptimizerV2(
        tf.train.GradientDescentOptimizer(0.01), num_mini_batches=4)
    def body(x, y):
        return opt.minimize(loss_of(x, y))
    ipu.loops.repeat(8, body, infeed_queue=infeed)   # 8 iterations: 2 weight updates

The optimizer must be used inside an on-device loop whose iteration count is a multiple of
``num_mini_batches``; the SDK checks this when it compiles the program (at its first run).
"""
import contextlib

import tensorflow as tf

from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_emulator.runtime import first_run, programs, shards
from ipu_emulator.runtime.gradient_accumulators import accumulate, accumulator_dtype
from ipu_emulator.ipu import scopes
from .cross_replica_optimizer import CrossReplicaOptimizer
from .ipu_optimizer import IpuOptimizer

# The SDK's messages for a misplaced accumulation, checked when the program first runs.
NOT_IN_LOOP_MESSAGE = first_run.ACCUMULATION_NOT_IN_LOOP_MESSAGE
NOT_A_MULTIPLE_MESSAGE = first_run.ACCUMULATION_NOT_A_DIVISOR_MESSAGE


def _on_shard_of(grad):
    """A shard scope for the ops of ``grad``'s accumulator: the shard that computes ``grad``
    (none when unsharded).  Like ``ipu_shard``, it places the ops the device function sees
    and tags them all, also those TensorFlow colocates (a variable's initialiser, the
    accumulation built colocated with the gradient), with the shard they run on."""
    if shards.current_shard_indices() is None and shards.shard_of(grad.op) is None:
        return contextlib.nullcontext()
    shard = shards.placed_shard(grad.op)
    return scopes.ipu_shard(shard) if shard is not None else contextlib.nullcontext()


class GradientAccumulationOptimizerV2(IpuOptimizer):
    """Accumulates gradients over ``num_mini_batches`` iterations, then applies ``opt``."""

    def __init__(self, opt, num_mini_batches, offload_weight_update_variables=None,
                 replicated_optimizer_state_sharding=False, dtype=None,
                 reduction_method=GradientAccumulationReductionMethod.SUM,
                 name="GradientAccumulationOptimizerV2"):
        super().__init__(opt, name=name)
        del offload_weight_update_variables, replicated_optimizer_state_sharding  # memory only
        if num_mini_batches < 1:
            raise ValueError("num_mini_batches must be a positive number.")
        self._num_mini_batches = num_mini_batches
        self._accumulation_dtype = dtype
        self._reduction_method = GradientAccumulationReductionMethod.parse(reduction_method)
        self._verify_usage = True
        self._accumulators = {}
        self._counter = None

    @property
    def num_mini_batches(self):
        return self._num_mini_batches

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        self._note_usage()
        count = self._num_mini_batches
        with tf.init_scope():
            counter = self._counter_variable()
            accumulators = []
            for grad, var in grads_and_vars:
                with _on_shard_of(grad):
                    accumulators.append(self._accumulator(var))
        seen = counter.read_value()  # mini-batches accumulated before this one
        updates = []
        for (grad, _), accumulator in zip(grads_and_vars, accumulators):
            # As the SDK's, each accumulator lives and adds where its gradient is computed:
            # on the shard scope's IPU by default, with the forward op when the gradients
            # are colocated with their ops (the weight update stays with the variable).
            with _on_shard_of(grad), tf.compat.v1.colocate_with(grad.op):
                updates.append(accumulate(accumulator, grad, self._reduction_method, count,
                                          seen))
        with tf.control_dependencies(updates):
            reached = tf.equal(seen + 1, count)

        def weight_update():
            pairs = [(tf.cast(a.read_value(), v.dtype.base_dtype), v)
                     for a, (_, v) in zip(accumulators, grads_and_vars)]
            apply = self._opt.apply_gradients(pairs, global_step, name)
            with tf.control_dependencies([apply]):
                clear = [a.assign(tf.zeros_like(a)) for a in accumulators]
                clear.append(counter.assign(0))
            with tf.control_dependencies(clear):
                return tf.constant(True)

        def keep_accumulating():
            with tf.control_dependencies([counter.assign(seen + 1)]):
                return tf.constant(False)

        updated = tf.compat.v1.cond(reached, weight_update, keep_accumulating)
        return updated.op

    def _note_usage(self):
        program = programs.current_program()
        if program is None:
            return
        program.gradient_accumulation_count = self._num_mini_batches
        program.gradient_accumulation_reduction = self._reduction_method.name
        if self._verify_usage:
            program.gradient_accumulation_checks.append(
                (self._num_mini_batches, programs.inside_loop(),
                 programs.current_loop_iterations()))

    def _counter_variable(self):
        if self._counter is None:
            self._counter = tf.compat.v1.Variable(
                0, dtype=tf.int32, trainable=False, use_resource=True,
                name="%s/mini_batch_counter" % self.get_name())
        return self._counter

    def _accumulator(self, var):
        key = id(var)
        if key not in self._accumulators:
            dtype = accumulator_dtype(self._accumulation_dtype, var)
            self._accumulators[key] = tf.compat.v1.Variable(
                tf.zeros(var.shape, dtype), trainable=False, use_resource=True,
                name="%s/%s/accumulator" % (var.op.name, self.get_name()))
        return self._accumulators[key]


class CrossReplicaGradientAccumulationOptimizerV2(GradientAccumulationOptimizerV2):
    """Accumulation whose accumulated gradients are averaged across replicas at each weight
    update (one all-reduce per update rather than per mini-batch)."""

    def __init__(self, opt, num_mini_batches, offload_weight_update_variables=None,
                 replicated_optimizer_state_sharding=False, dtype=None,
                 reduction_method=GradientAccumulationReductionMethod.SUM,
                 name="CrossReplicaGradientAccumulationOptimizerV2"):
        super().__init__(CrossReplicaOptimizer(opt), num_mini_batches,
                         offload_weight_update_variables, replicated_optimizer_state_sharding,
                         dtype, reduction_method, name)


class GradientAccumulationOptimizer(GradientAccumulationOptimizerV2):
    """The first accumulation optimizer (SDK 1.x and the contrib era): sums gradients.
    ``verify_usage=False`` skips the loop check."""

    def __init__(self, opt, num_mini_batches, verify_usage=True,
                 name="GradientAccumulationOptimizer"):
        super().__init__(opt, num_mini_batches, name=name)
        self._verify_usage = verify_usage


class CrossReplicaGradientAccumulationOptimizer(GradientAccumulationOptimizer):
    """``GradientAccumulationOptimizer`` of a ``CrossReplicaOptimizer``."""

    def __init__(self, opt, num_mini_batches, verify_usage=True,
                 name="CrossReplicaGradientAccumulationOptimizer"):
        super().__init__(CrossReplicaOptimizer(opt), num_mini_batches, verify_usage, name)
