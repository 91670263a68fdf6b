"""How the emulator builds ``pipelining_ops.pipeline``: one TensorFlow while loop.

The loop runs all ``gradient_accumulation_count x repeat_count`` micro-batches.  Each
iteration dequeues one infeed element, calls the stages in order (stage ``k`` on the CPU
device standing for IPU ``device_mapping[k]``, so its forward and backward ops really run
there), adds the micro-batch's gradients to one accumulator per variable, and on the last
micro-batch of a pass applies the accumulated gradients and clears the accumulators.  The
numerics are therefore exactly those of gradient accumulation on one device; the *order* in
which stages of different micro-batches overlap is the schedule's business, which only the
simulator (the trace of the run) shows.  Each accumulator lives, is added to, read, cleared
and applied on its stage's device, and the outfeed is enqueued from the last stage's: a
tensor that crosses between the CPU devices on every micro-batch costs host time
(tests/emulator/test_pipeline_placement.py).  Accumulators are ordinary non-trainable
variables, initialised by ``tf.global_variables_initializer()`` like the model's own.

Replicated pipelines: on a device with more IPUs than the stages need (their IPUs rounded
up to a power of two, ``S``), the pipeline runs as ``R = IPUs / S`` copies, as on the IPU.
Every loop iteration builds one micro-batch of each replica: replica ``r`` takes infeed
element ``i * R + r``, runs its stage ``k`` on IPU ``r * S + k`` with its own copies of the
variables and accumulators, and its outfeed values are stacked on a replica axis.  The
pipeline does not average gradients across replicas by itself (neither does the SDK's):
wrap the optimizer in ``CrossReplicaOptimizer`` inside ``optimizer_function``; its all-reduce
runs in the one weight-update branch all replicas share
(tests/emulator/test_replicated_pipelines.py).

``pipelining_ops.pipeline`` checks its arguments with the SDK's messages, then hands them to
``PipelineBuilder``; what the builder learnt (which op is in which stage, the buffers, the
settings) is registered with the program (``PipelineBuilder.registration``).
"""
import contextlib
import logging

import tensorflow as tf
from tensorflow.python.util import nest

from ipu_emulator import record
from ipu_emulator.sim import schedule_rules
from . import configured_system, graph_costs, graph_loops, programs, replication, shards
from .gradient_accumulators import accumulate, accumulator_dtype

_logger = logging.getLogger("ipu_emulator")


def is_v1_optimizer(opt):
    """A TF1 optimizer (``tf.compat.v1.train.Optimizer``): gradients by ``compute_gradients``."""
    return isinstance(opt, tf.compat.v1.train.Optimizer)


def is_keras_optimizer(opt):
    """A Keras optimizer (``OptimizerV2`` or the new ``Optimizer``), of whichever Keras."""
    return any(cls.__name__ in ("OptimizerV2", "Optimizer") and "keras" in cls.__module__
               for cls in type(opt).__mro__)


def stage_ipus(mapping_entry):
    """The IPUs of one ``device_mapping`` entry (an IPU, or a list of them)."""
    return list(mapping_entry) if isinstance(mapping_entry, (list, tuple)) else [mapping_entry]


def single_replica():
    """Leave the replicated build around the pipeline while the pipeline builds: it enters
    each replica itself (``_as_replica``), and whatever it builds outside them (the loop,
    the shared weight update) belongs to no replica."""
    return replication.outside_replicas()


def replicated_build(infeed_queue, outfeed_queue, highest_ipu):
    """``(build, R)``: the replicated build of the program when the pipeline is its
    outermost loop on a device with more IPUs than the stages need (Graphcore's TensorFlow
    user guide on replication: the stages' IPUs rounded up to a power of two), else
    ``(None, 1)``.  ``R`` is fixed here, before anything is built, from the highest IPU the
    stages use."""
    if programs.inside_loop():
        return None, 1
    build = replication.loop_build()
    if build is None:
        return None, 1
    # A program built before the IPU system is configured takes R from its feeds' declared
    # replication_factor: make the pipeline's feeds known to the program first.
    program = programs.current_program()
    for feed, feeds in ((infeed_queue, program.infeeds), (outfeed_queue, program.outfeeds)):
        if feed is not None and feed not in feeds:
            feeds.append(feed)
    return build, build.resolve(highest_shard=highest_ipu)


def _stage_arguments(outputs):
    """How one stage's outputs become the next stage's (or the optimizer's) arguments."""
    if outputs is None:
        return [], {}
    if isinstance(outputs, (list, tuple)):
        return list(outputs), {}
    return [outputs], {}


def _tensor_bytes(values):
    total = 0
    for value in nest.flatten(values):
        if isinstance(value, tf.Tensor):
            total += graph_costs.tensor_bytes(value)
    return total


class PipelineBuilder:
    """Builds the emulated pipeline loop and remembers which ops form each stage."""

    def __init__(self, stages, device_mapping, gac, repeat_count, inputs, infeed_queue,
                 outfeed_queue, optimizer_function, accumulation_dtype, reduction_method,
                 outfeed_loss, outfeed_mask, accumulate_outfeed, accumulate_outfeed_dtype,
                 schedule):
        self.stages = stages
        self.device_mapping = device_mapping
        self.gac = gac
        self.repeat_count = repeat_count
        self.inputs = inputs
        self.infeed_queue = infeed_queue
        self.outfeed_queue = outfeed_queue
        self.optimizer_function = optimizer_function
        self.accumulation_dtype = accumulation_dtype
        self.reduction_method = reduction_method
        self.outfeed_loss = outfeed_loss
        self.outfeed_mask = outfeed_mask
        self.accumulate_outfeed = accumulate_outfeed
        self.accumulate_outfeed_dtype = accumulate_outfeed_dtype
        self.schedule = schedule
        self.training = optimizer_function is not None
        self.stage_of_op = {}
        self.stage_output_bytes = [0] * len(stages)
        self.stage_input_bytes = [0] * len(stages)
        self.gradient_buffers = []  # one accumulator per trained variable
        self.outfeed_buffers = []  # sums of an accumulated outfeed
        self.graph = tf.compat.v1.get_default_graph()
        # The stages are built in the name scope pipeline() was called from, as loop bodies
        # are (ipu.loops): their variables get the names the same layers get unpipelined.
        self.enclosing_scope = self.graph.get_name_scope()
        self.first_op_id = None
        # Replication (``_replicated_micro_batch``): the build, R, the replica being built,
        # and its end-of-pass work waiting for the shared branch.
        self.replicated, self.replicas = None, 1
        self._building_replica = 0
        self._pending_passes = []

    # -- the loop ---------------------------------------------------------------------

    def build(self, replicated=(None, 1)):
        self.replicated, self.replicas = replicated
        self.first_op_id = self._next_op_id()
        self.ops_before = set(self.graph.get_operations())
        gac = self.gac
        total = gac * self.repeat_count
        guards = []
        if isinstance(gac, (tf.Tensor, tf.Variable)):
            guards.append(self._runtime_count_check(gac))
        outermost = not programs.inside_loop()

        def condition(counter):
            return counter < total

        def body(counter):
            with programs.loop_body(), \
                    graph_loops.enclosing_name_scope(self.graph, self.enclosing_scope):
                done = (self._micro_batch(counter) if self.replicas == 1
                        else self._replicated_micro_batch(counter))
            with tf.control_dependencies(_one_wait_per_shard(done)):
                return counter + 1

        with tf.control_dependencies(guards):
            start = tf.constant(0, dtype=tf.int32)
        with graph_loops.control_flow_of(self.graph):
            counter = tf.compat.v1.while_loop(condition, body, [start],
                                              parallel_iterations=1)
        program = programs.current_program()
        if program is not None and outermost:
            program.trip_counters.append(counter)
        return tf.group(counter, name="pipeline")

    def _runtime_count_check(self, gac):
        overlap = schedule_rules.pipeline_overlap(
            schedule_rules.normalise_schedule_name(self.schedule), len(self.stages), self.training,
            [stage_ipus(m)[0] for m in self.device_mapping])
        message = ("Pipeline depth is invalid. Check that pipeline depth is divisible by the "
                   "overlap length (%d) and pipeline depth is >= %d.\nThis number might be "
                   "called `gradient_accumulation_count`, `gradient_accumulation_steps_per_"
                   "replica` or `steps_per_execution` depending on the API used."
                   % (overlap, overlap))
        gac = tf.cast(gac, tf.int32)
        valid = tf.logical_and(tf.equal(gac % overlap, 0), gac >= overlap)
        return tf.debugging.Assert(valid, [message])

    def _next_op_id(self):
        """Position the next op will take in the graph's creation order."""
        return len(self.graph.get_operations())

    def _ops_since(self, first_id):
        return self.graph.get_operations()[first_id:]

    def _mark(self, first_id, stage, only_new=True):
        for op in self._ops_since(first_id):
            if not only_new or op.name not in self.stage_of_op:
                self.stage_of_op[op.name] = stage

    # -- one micro-batch ----------------------------------------------------------------

    def _micro_batch(self, counter):
        last = len(self.stages) - 1
        args, kwargs = list(self.inputs), {}
        self.stage_input_bytes[0] = _tensor_bytes(self.inputs)
        if self.infeed_queue is not None:
            args, kwargs = graph_loops.dequeued_arguments(args, self.infeed_queue)
        for k, stage in enumerate(self.stages):
            first = self._next_op_id()
            outputs = self._call_stage(k, stage, args, kwargs)
            self._mark(first, k)
            self._check_captures(first, k)
            self.stage_output_bytes[k] = _tensor_bytes(outputs) if k < last else 0
            if k < last:
                self.stage_input_bytes[k + 1] = _tensor_bytes(outputs)
            args, kwargs = _stage_arguments(outputs)
            last_outputs = outputs

        effects = []
        first = self._next_op_id()
        if self.training:
            to_outfeed, updates = self._train(counter, args, kwargs, last_outputs)
            effects += updates
        else:
            to_outfeed = last_outputs
        # The last stage's results leave from its own device (as they leave the last IPU),
        # rather than crossing to the default device first.
        with shards.shard_context(stage_ipus(self.device_mapping[last])):
            effects += self._outfeed(counter, to_outfeed)
        self._mark(first, last)
        return [e for e in effects if e is not None]

    def _call_stage(self, k, stage, args, kwargs):
        ipus = stage_ipus(self.device_mapping[k])
        if isinstance(stage, (list, tuple)):
            # Concurrent stages share their arguments; their outputs are concatenated.
            outputs = []
            for function, ipu in zip(stage, ipus * len(stage) if len(ipus) == 1 else ipus):
                with shards.shard_context([ipu]), self._stage_variable_names():
                    result = function(*args, **kwargs)
                outputs += _stage_arguments(result)[0]
            return outputs
        with shards.shard_context(ipus), self._stage_variable_names():
            return stage(*args, **kwargs)

    def _stage_variable_names(self):
        """Name the variables a stage creates as the SDK does.  The SDK builds each stage as
        a function graph (Graphcore's TensorFlow source, ``pipelining_ops._pipeline_stage``
        through ``functional_ops._compile_function``), which starts at the top-level name
        scope: a variable named by its name scope (``tf.Variable``, a Keras layer's weights)
        loses the name scope ``pipeline()`` was called in, while ``get_variable`` (and so
        ``tf.compat.v1.layers``) keeps the variable scope, which the function graph shares.
        Here the stages are built in that name scope (``enclosing_name_scope``), so the
        variable's name scope is re-entered without it."""
        enclosing = self.enclosing_scope + "/" if self.enclosing_scope else ""
        graph = self.graph

        def creator(next_creator, **kwargs):
            scope = graph.get_name_scope() + "/"
            if not enclosing or not scope.startswith(enclosing):
                return next_creator(**kwargs)
            with graph.name_scope(scope[len(enclosing):] if scope != enclosing else ""):
                return next_creator(**kwargs)

        return tf.compat.v1.variable_creator_scope(creator)

    def _check_captures(self, first_id, stage):
        """Stages may only use tensors from outside through ``inputs`` (or variables)."""
        allowed = {t.name for t in self.inputs}
        for op in self._ops_since(first_id):
            if op.type not in ("Enter", "RefEnter"):
                continue
            tensor = op.inputs[0]
            if tensor.dtype in (tf.resource, tf.variant) or tensor.name in allowed:
                continue
            if tensor.op in self.ops_before:
                raise ValueError(
                    "Trying to capture the tensor %s which is not a resource. This tensor "
                    "needs to be passed as either part of the `input` or `infeed_queue` of "
                    "the pipeline." % tensor)

    # -- training: gradients, accumulation, weight update -------------------------------

    def _gradients(self, result):
        opt, loss = result.opt, result.loss
        if is_v1_optimizer(opt):
            pairs = opt.compute_gradients(loss, *result.compute_gradients_args,
                                          **result.compute_gradients_kwargs)
        else:
            if result.tape is not None:
                variables = result.tape.watched_variables()
                grads = result.tape.gradient(loss, variables)
            elif result.variables is not None:
                variables = list(result.variables)
                grads = opt.get_gradients(loss, variables)
            else:
                raise RuntimeError(
                    "No variables to optimize. When using OptimzerV2, OptimizerFunctionOutput "
                    "must contain a list of variables or a GradientTape.")
            pairs = list(zip(grads, variables))
        return [(g, v) for g, v in pairs if g is not None]

    def _variable_stage(self, variable):
        stage = self.stage_of_op.get(variable.handle.op.name)
        if stage is not None:
            return stage
        shard = shards.placed_shard(variable.handle.op)
        for k, entry in enumerate(self.device_mapping):
            if shard in stage_ipus(entry):
                return k
        return len(self.stages) - 1

    def _on_stage_of(self, variable):
        """Build ops on the device of the stage that owns ``variable``."""
        stage = self._variable_stage(variable)
        return shards.shard_context(stage_ipus(self.device_mapping[stage]))

    def _accumulation_dtype(self, variable):
        return accumulator_dtype(self.accumulation_dtype, variable)

    def _train(self, counter, args, kwargs, last_outputs):
        last = len(self.stages) - 1
        first = self._next_op_id()
        # Each backward stage runs on its forward stage's IPUs: the gradient ops built here
        # take their forward op's shard, not the last stage's.
        with shards.shard_context(stage_ipus(self.device_mapping[last]),
                                  gradients_follow_forward_ops=True):
            # (``pipeline`` wraps the function to check that it returns an
            # ``OptimizerFunctionOutput``.)
            result = self.optimizer_function(*args, **kwargs)
            pairs = self._gradients(result)
        # Backward ops belong to the stage of the forward op they differentiate.
        for op in self._ops_since(first):
            original = getattr(op, "_original_op", None)
            if original is not None and original.name in self.stage_of_op:
                self.stage_of_op[op.name] = self.stage_of_op[original.name]
            else:
                self.stage_of_op.setdefault(op.name, last)

        micro_batch = tf.math.floormod(counter, tf.cast(self.gac, tf.int32))
        accumulators, additions = [], []
        with tf.name_scope("gradients_accumulation"):
            for grad, variable in pairs:
                stage = self._variable_stage(variable)
                first = self._next_op_id()
                with shards.shard_context(stage_ipus(self.device_mapping[stage])):
                    buffer = _zeros_variable(variable.op.name.replace("/", "_"),
                                             variable.shape, self._accumulation_dtype(variable))
                    additions.append(accumulate(buffer, grad, self.reduction_method, self.gac,
                                                micro_batch, in_place=True))
                self._mark(first, stage)
                self.gradient_buffers.append(buffer)
                accumulators.append((buffer, variable))

        # Only the counter decides whether this micro-batch ends the pass: the predicate
        # waits for nothing, and each accumulator's read in the update waits for its own
        # addition on its own device (no control edges from every device to one).
        last_micro_batch = tf.equal(micro_batch, tf.cast(self.gac, tf.int32) - 1)

        def weight_update():
            # Each accumulator is read, cast and cleared on its own stage's device: built
            # on the default device, those ops made tensors (live or, on every other
            # micro-batch, dead) cross devices on every iteration of the loop.
            applied, cleared = [], []
            for (buffer, variable), added in zip(accumulators, additions):
                with self._on_stage_of(variable), tf.control_dependencies([added]):
                    value = buffer.read_value()
                    applied.append((tf.cast(value, variable.dtype.base_dtype), variable))
                    # The read is a snapshot (a resource variable assigned while a read of
                    # it is in use gets a new buffer), so clearing needs only the read.
                    # (A ZerosLike op, not a constant: a constant in a branch hangs off
                    # the branch's pivot, one more edge from the default device.)
                    zeros = tf.compat.v1.zeros_like(value, optimize=False)
                    cleared.append(buffer.assign(zeros))
            apply_op = result.opt.apply_gradients(applied, *result.apply_gradients_args,
                                                  **result.apply_gradients_kwargs)
            with tf.control_dependencies(
                    _one_wait_per_shard(_group_members(apply_op) + cleared)):
                return tf.constant(0)

        first = self._next_op_id()
        update = self._end_of_pass(last_micro_batch, weight_update, self._stage_of_update_op)
        for op in self._ops_since(first):
            stage = self._stage_of_update_op(op)
            self.stage_of_op[op.name] = stage

        if self.outfeed_loss:
            to_outfeed = result.loss
        else:
            to_outfeed = list(_stage_arguments(last_outputs)[0])
            if self.outfeed_mask is not None:
                if len(self.outfeed_mask) != len(to_outfeed):
                    raise ValueError(
                        "The last computational stage has %d outputs, but the `outfeed_mask` "
                        "has elements %d - these need to match in size."
                        % (len(to_outfeed), len(self.outfeed_mask)))
                to_outfeed = [t for t, masked in zip(to_outfeed, self.outfeed_mask)
                              if not masked]
        return to_outfeed, [update] + additions

    def _stage_of_update_op(self, op):
        for tensor in op.inputs:
            if tensor.dtype == tf.resource:
                source = tensor.op
                while source.type in ("Switch", "Identity", "Enter") and source.inputs:
                    source = source.inputs[0].op
                if source.name in self.stage_of_op:
                    return self.stage_of_op[source.name]
        return self.stage_of_op.get(op.name, len(self.stages) - 1)

    # -- replicas ---------------------------------------------------------------------

    def _replicated_micro_batch(self, counter):
        """One micro-batch of every replica, built side by side in the loop body.

        Each replica runs the whole pipeline on its own devices, variables, accumulators and
        infeed elements (replica ``r`` takes element ``i * R + r``).  Their stages' collectives
        and outfeed values are joined once all are built; the end-of-pass work (the weight
        update, an accumulated outfeed) is one branch for all of them, so the all-reduce of
        a ``CrossReplicaOptimizer`` in it sees every replica's accumulated gradients."""
        build = self.replicated
        effects, pending = [], []
        with build.lock_step():
            for replica in range(self.replicas):
                kept = (len(self.gradient_buffers), len(self.outfeed_buffers))
                self._pending_passes = []
                with self._as_replica(replica):
                    effects += self._micro_batch(counter)
                pending.append(self._pending_passes)
                if replica > 0:  # the record sizes one replica's buffers
                    del self.gradient_buffers[kept[0]:], self.outfeed_buffers[kept[1]:]
            # The outfeed's values (stacked on the replica axis) leave from a last stage.
            with shards.shard_context(stage_ipus(self.device_mapping[-1])):
                build.finish_pending(self.replicas)
            for per_replica in zip(*pending):
                effects.append(self._shared_end_of_pass(per_replica))
        return effects

    @contextlib.contextmanager
    def _as_replica(self, replica):
        """Build as ``replica``: its own variables, on IPUs ``replica * S`` onwards."""
        with self.replicated.replica(replica), shards.replica_devices(
                replica * self.replicated.num_shards):
            self._building_replica = replica
            try:
                yield
            finally:
                self._building_replica = 0

    def _end_of_pass(self, predicate, branch, stage_of_op):
        """``cond(predicate, branch)`` for work done once per pass.  Replicas defer it to one
        shared branch (``_shared_end_of_pass``); returns None then."""
        if self.replicas == 1:
            return tf.compat.v1.cond(predicate, branch, lambda: tf.constant(0))
        self._pending_passes.append((self._building_replica, predicate, branch, stage_of_op))
        return None

    def _shared_end_of_pass(self, items):
        """One branch running every replica's end-of-pass work, then the collectives that
        work called (all replicas' values are in the branch by then).  The replicas'
        predicates agree (they come from the shared micro-batch counter); the branch waits
        for all of them, as each replica's own branch would wait for its predicate's
        control inputs (an accumulated outfeed's additions)."""
        _, predicate, _, stage_of_op = items[0]
        with tf.control_dependencies([item[1] for item in items[1:]]):
            predicate = tf.identity(predicate)

        def every_replica():
            done = []
            for replica, _, branch, _ in items:
                with self._as_replica(replica):
                    done.append(branch())
            self.replicated.finish_pending(self.replicas)
            with tf.control_dependencies(done):
                return tf.constant(0)

        first = self._next_op_id()
        update = tf.compat.v1.cond(predicate, every_replica, lambda: tf.constant(0))
        for op in self._ops_since(first):
            self.stage_of_op[op.name] = stage_of_op(op)
        return update

    # -- outfeed ------------------------------------------------------------------------

    def _outfeed(self, counter, values):
        tensors = [v for v in nest.flatten(values) if isinstance(v, tf.Tensor)]
        if self.outfeed_queue is None:
            if tensors:
                raise ValueError("The last computational stage has tensor outputs: %s, but no "
                                 "outfeed_queue has been provided." % ", ".join(
                                     str(t) for t in tensors))
            return []
        if isinstance(values, tuple):
            values = list(values)
        if values is None or (isinstance(values, list) and not values):
            return []
        if not self.accumulate_outfeed:
            return [self.outfeed_queue.enqueue(values)]
        return [self._accumulated_outfeed(counter, values)]

    def _accumulated_outfeed(self, counter, values):
        """Sum the outfed values over a pass; enqueue the sums once, at its end."""
        flat = nest.flatten(values)
        sums, adds = [], []
        for index, value in enumerate(flat):
            dtype = (tf.as_dtype(self.accumulate_outfeed_dtype)
                     if self.accumulate_outfeed_dtype is not None else value.dtype.base_dtype)
            buffer = _zeros_variable("outfeed_accumulator_%d" % index, value.shape, dtype)
            adds.append(buffer.assign_add(tf.cast(value, dtype)))
            sums.append(buffer)
            self.outfeed_buffers.append(buffer)
        micro_batch = tf.math.floormod(counter, tf.cast(self.gac, tf.int32))
        with tf.control_dependencies(adds):
            end_of_pass = tf.equal(micro_batch, tf.cast(self.gac, tf.int32) - 1)

        def enqueue_sums():
            totals = [s.read_value() for s in sums]
            enqueue = self.outfeed_queue.enqueue(nest.pack_sequence_as(values, totals))
            with tf.control_dependencies([enqueue]):
                cleared = [s.assign(tf.zeros_like(s)) for s in sums]
            with tf.control_dependencies(cleared):
                return tf.constant(0)

        return self._end_of_pass(end_of_pass, enqueue_sums, lambda op: len(self.stages) - 1)

    # -- what the run record needs ------------------------------------------------------

    def registration(self, offload_weights, offload_activations, unmodelled_options=(),
                     recomputation_mode="Auto"):
        gac_is_static = not isinstance(self.gac, (tf.Tensor, tf.Variable))
        repeat_static = not isinstance(self.repeat_count, (tf.Tensor, tf.Variable))
        settings = record.PipelineSettings(
            schedule=schedule_rules.normalise_schedule_name(self.schedule),
            gradient_accumulation_count=int(self.gac) if gac_is_static else 0,
            repeat_count=int(self.repeat_count) if repeat_static else 1,
            device_mapping=tuple(stage_ipus(m)[0] for m in self.device_mapping),
            training=self.training,
            recompute=self.training and configured_system.current().allow_recompute,
            offload_weights=offload_weights and self.training,
            offload_activations=offload_activations and self.training,
            accumulation_dtype_bytes=self._accumulator_element_bytes(),
            unmodelled_options=tuple(unmodelled_options),
            recomputation_mode=recomputation_mode,
            reduction_method=getattr(self.reduction_method, "name", "SUM"))
        buffers = self.gradient_buffers + self.outfeed_buffers
        return programs.PipelineBuild(
            settings, dict(self.stage_of_op), list(self.stage_output_bytes),
            list(self.stage_input_bytes), gac_is_static,
            buffer_handles=[b.handle.op.name for b in buffers])

    def _accumulator_element_bytes(self):
        """Bytes per element of the gradient accumulators as built, whichever way
        ``gradient_accumulation_dtype`` named their type (None, a DType, a NumPy type, a
        callable per variable); 4 when nothing is accumulated."""
        elements = sum(b.shape.num_elements() or 0 for b in self.gradient_buffers)
        if not elements:
            return 4
        total = sum((b.shape.num_elements() or 0) * b.dtype.base_dtype.size
                    for b in self.gradient_buffers)
        return max(1, int(round(total / elements)))


def _zeros_variable(name, shape, dtype):
    """A non-trainable buffer starting at zero (created outside the loop, like any variable
    made in a loop body; ``global_variables_initializer`` sets it)."""
    shape = tf.TensorShape(shape)
    return tf.compat.v1.Variable(
        lambda: tf.zeros(shape, dtype), trainable=False, use_resource=True,
        name=name + "_accumulator", dtype=dtype,
        collections=[tf.compat.v1.GraphKeys.GLOBAL_VARIABLES])


# Memory options of Graphcore's SDK the simulator does not price, and what each does there
# (the SDK's documentation of ``pipelining_ops.pipeline``).  ``offload_weights`` is not
# ``offload_weight_update_variables``: it stores in remote memory the weights that
# ``replicated_weight_sharding`` partitions across replicas, and does nothing without it.
UNMODELLED_MEMORY_OPTIONS = {
    "offload_weights": "stores in remote memory the weights replicated_weight_sharding "
                       "partitions across replicas (no effect without it)",
    "replicated_weight_sharding": "partitions the stages' weights across the replicas",
    "offload_gradient_accumulation_buffers": "stores the gradient accumulation buffers in "
                                             "remote memory",
}


def unmodelled_memory_options(**given) -> tuple:
    """The options of ``UNMODELLED_MEMORY_OPTIONS`` switched on (True; None is the SDK's
    automatic choice, which the simulator takes as on chip), each logged: the simulated
    memory and time leave them out."""
    switched_on = tuple(name for name, value in given.items() if value)
    for name in switched_on:
        _logger.warning("%s=True %s in Graphcore's SDK; the emulator does not model it, so "
                        "the simulated memory and time leave it out.", name,
                        UNMODELLED_MEMORY_OPTIONS[name])
    return switched_on


def _group_members(op):
    """What a ``tf.group`` (a NoOp of control inputs, possibly one per device) waits for;
    any other op itself.  An optimizer's ``apply_gradients`` returns such a group."""
    if op.type != "NoOp" or op.inputs or not op.control_inputs:
        return [op]
    return [member for waited in op.control_inputs for member in _group_members(waited)]


def _one_wait_per_shard(effects):
    """Ops to wait for ``effects`` through: one per shard, placed with that shard's effects.

    A control edge from an op on one device to an op on another is a message between them,
    sent at every run of the op; waiting for each weight's update or accumulation from the
    loop counter's device sent one per weight on every micro-batch.  (TensorFlow's own
    ``tf.group`` groups by device string, which ops placed by colocation with their variable
    do not have.)"""
    per_shard = {}
    for effect in effects:
        op = effect if isinstance(effect, tf.Operation) else effect.op
        per_shard.setdefault(shards.placed_shard(op), []).append(op)
    waits = []
    for ops in per_shard.values():
        with tf.compat.v1.colocate_with(ops[0]), tf.control_dependencies(ops):
            waits.append(tf.no_op(name="wait_for_shard"))
    return waits


__all__ = ["PipelineBuilder", "replicated_build", "single_replica", "stage_ipus",
           "is_v1_optimizer", "is_keras_optimizer", "UNMODELLED_MEMORY_OPTIONS",
           "unmodelled_memory_options"]

