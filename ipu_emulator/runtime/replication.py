"""Replication: a program on a device with more IPUs than it has shards runs as copies.

On an IPU system the replication factor is implicit (Graphcore's TensorFlow user guide,
"Selecting the number of replicas"): a program using ``S`` shards on a device of ``N`` IPUs
is copied ``N / S`` times, each replica holding its own variables and taking its own infeed
elements; replicas only talk through cross-replica collectives such as the gradient
all-reduce of ``CrossReplicaOptimizer``.

The emulator builds the copies into the one TensorFlow graph, so they really run side by side:

* **Where the copy is made.**  The body of the program's outermost on-device loop is built
  ``R`` times inside the same ``tf.while_loop`` iteration, so the replicas advance in lock
  step (a collective needs every replica's value of the same iteration).  A program without
  a loop is built ``R`` times as a whole.  Replica 0 is built first, with the user's own
  variables; only then is ``R`` known (``N`` divided by the shards replica 0 used).
* **Built before the system is configured.**  Scripts often build the graph first and
  configure the IPUs just before opening the session.  Such a program is built again for
  its device at its first run when that device gives it other replicas (``late_compile``).
  Scripts for the ``tensorflow.contrib.ipu`` API (SDK 2.0 and earlier) declared the count
  with the feeds' ``replication_factor`` argument instead: a program built before the
  system is configured takes ``R`` from its feeds, and at its first run the device's
  ``N / shards`` must agree, else the SDK's mismatch error.
* **Replica-local variables.**  While replica ``r > 0`` is built, every resource variable it
  touches is swapped for that replica's copy (``BaseResourceVariable.handle`` is redirected),
  so Keras models, ``get_variable`` and optimizer slots all work unchanged.  A copy starts
  from its variable's own initial value: initialising the variable initialises its copies
  in the same ``Session.run``, so all replicas start identical, as when the IPU broadcasts
  the initial weights.  Replica 0's copy *is* the user's variable, which is what reading a
  variable on the host returns on an IPU system too.
* **Infeeds** hand consecutive elements to replicas 0, 1, ... in turn (the dequeues are
  chained), so iteration ``i`` of replica ``r`` sees element ``i * R + r``.
* **Outfeeds** collect every replica's value and enqueue them stacked on a replica axis.
* **Cross-replica ops** return a placeholder while the replicas are built; once all are,
  each placeholder is rewired to the sum (or mean) over its replica group.
* **Pipelines** build their replicas themselves (``pipelining_ops``), in lock step like a
  loop body, with replica ``r``'s stages on IPUs ``r * shards`` onwards.  There, variables
  a replica creates anew (Keras layers made inside a stage) are matched to replica 0's and
  become copies of them, so every replica starts from the same weights.

``replica_variables(v)`` lists a variable's copies, for notebooks and tests that want to
look at every replica's weights (an IPU system has no such view; it is the emulator's).
"""
from __future__ import annotations

import contextlib
import numbers
import threading
import weakref
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.ops import gen_resource_variable_ops, resource_variable_ops

from . import feed_messages, graph_costs, shards, variable_creations

_state = threading.local()


def _active():
    """``(build, replica)`` of the replicated program being built, or ``(None, None)``."""
    return getattr(_state, "build", None), getattr(_state, "replica", None)


@contextlib.contextmanager
def _replica_context(build, replica):
    previous = _active()
    _state.build, _state.replica = build, replica
    try:
        yield
    finally:
        _state.build, _state.replica = previous


def outside_replicas():
    """Build outside any replica in this block (a pipeline enters each replica itself; what
    it builds around them belongs to none)."""
    return _replica_context(None, None)


# --- the replication rule ------------------------------------------------------------

def replication_factor(num_ipus: int, num_shards: int) -> int:
    """``num_ipus / num_shards`` (1 when the shards do not divide the IPUs: that program
    is refused at its first run, see ``shard_mismatch_message``)."""
    if num_shards <= 0 or num_ipus % num_shards:
        return 1
    return max(1, num_ipus // num_shards)


def shard_mismatch_message(num_ipus: int, num_shards: int) -> Optional[str]:
    if num_ipus % num_shards == 0:
        return None
    return ("Trying to compile a graph for an IPU device with %d IPUs and %d shards. The "
            "number of shards needs to divide the number of IPUs." % (num_ipus, num_shards))


# The SDK <= 2.0 backend's errors when a feed's replication_factor is not the program's
# (the SDK's infeed and outfeed queue ops); the infeed's C format "% d" prints two spaces
# before the number.
INFEED_REPLICATION_MISMATCH = (
    "Current program has been created with replication_factor {program}, however the "
    "IPUInfeedQueue has been configured with replication_factor {feed}. Either reduce the "
    "number of IPUs in your TensorFlow device, or set the `replication_factor` to  {program} "
    "when creating IPUInfeedQueue.")
OUTFEED_REPLICATION_MISMATCH = (
    "Current program has been created with replication_factor {program}, however the "
    "IPUOutfeedQueue has been configured with replication_factor {feed}. Either reduce the "
    "number of IPUs in your TensorFlow device, or set the `replication_factor` to {program} "
    "when creating IPUOutfeedQueue.")


def device_mismatch_message(program) -> Optional[str]:
    """Checked at a program's first run: a program whose feeds declared its replicas (SDK
    2.0 and earlier) must get that many from the device.  Any other program is built again
    for the device it runs on when that gives it other replicas (``late_compile``)."""
    from ipu_emulator.runtime import configured_system
    if not program.replicas_from_feeds:
        return None
    return feed_mismatch_message(program, configured_system.device(program.device_ordinal).num_ipus)


def feed_mismatch_message(program, num_ipus: int) -> Optional[str]:
    """The SDK's error for the first feed whose ``replication_factor`` is not the one the
    device gives the program (``num_ipus`` over its shards), else None."""
    num_shards = max(1, program.num_ipus // max(1, program.replication_factor))
    if num_ipus % num_shards:
        return None  # the shard check reports this device (first_run.check)
    device_replicas = num_ipus // num_shards
    for feeds, template in ((program.infeeds, INFEED_REPLICATION_MISMATCH),
                            (program.outfeeds, OUTFEED_REPLICATION_MISMATCH)):
        for feed in feeds:
            declared = declared_replication_factor(feed)
            if declared != device_replicas:
                return template.format(program=device_replicas, feed=declared)
    return None


# --- replication factors declared by the feeds (scripts for SDK 2.0 and earlier) ---------

# graph -> the factors above 1 that feeds built in it declared
_declared_by_graph = weakref.WeakKeyDictionary()


def note_declared_replication_factor(factor) -> None:
    """A feed was built in the default graph with ``replication_factor=factor``."""
    if tf.executing_eagerly() or not isinstance(factor, numbers.Integral) or factor <= 1:
        return
    graph = tf.compat.v1.get_default_graph()
    _declared_by_graph.setdefault(graph, set()).add(int(factor))


def declared_replication_factor(feed) -> int:
    """What a feed's ``replication_factor`` argument said (1 when not given)."""
    factor = getattr(feed, "_replication_factor", 1)
    return int(factor) if isinstance(factor, numbers.Integral) and factor >= 1 else 1


def _replicas_declared_for(program) -> int:
    """``R`` for a program built before the system was configured: what its feeds say (the
    infeed first: it decides which elements each replica takes); a program without feeds
    takes the one factor the graph's feeds agree on, else runs unreplicated."""
    feeds = list(program.infeeds) + list(program.outfeeds)
    if feeds:
        return declared_replication_factor(feeds[0])
    declared = _declared_by_graph.get(program.graph, set())
    return next(iter(declared)) if len(declared) == 1 else 1


# --- per-program build state ------------------------------------------------------------

@dataclass
class _Reduction:
    """One call of a cross-replica op in one replica, waiting for the others."""
    value: tf.Tensor
    placeholder: tf.Tensor
    mean: bool
    group_size: Optional[int]


@dataclass
class _PendingOutfeed:
    structure: object
    flat_by_replica: Dict[int, List[tf.Tensor]] = field(default_factory=dict)
    placeholders: List[tf.Operation] = field(default_factory=list)


class ReplicatedBuild:
    """What is being built for one program on a device of ``num_ipus`` IPUs."""

    def __init__(self, program, num_ipus: int, replicas_from_feeds: bool = False):
        self.program = program
        self.graph = program.graph
        self.first_op = len(self.graph.get_operations())
        # Replica slots the loops carry values for: the device's IPUs, or (built before the
        # system was configured) the largest factor the graph's feeds declared.
        self.num_ipus = num_ipus
        self.replicas_from_feeds = replicas_from_feeds
        self.num_shards = 1
        self.replication_factor: Optional[int] = None
        self.loop_replicated = False
        self.in_step = False
        self.reductions: Dict[int, List[_Reduction]] = {}
        self.outfeeds: Dict[object, _PendingOutfeed] = {}
        self.last_dequeue: Dict[int, object] = {}
        self.copies: Dict[tuple, tf.Variable] = {}  # (handle op name, replica) -> copy
        self.owner: Dict[str, int] = {}  # handle op name -> replica that created it
        self.other_replica_ops: set = set()
        self.all_reduce_bytes = 0
        self.deferred_errors: List[str] = []
        # While a pipeline builds its replicas (``lock_step``): the variables replica 0
        # created, and every other replica's walk through them (``_owning_creator``).
        self.created_by_replica0: Optional[variable_creations.VariableCreations] = None
        self.replays: Dict[int, variable_creations.Replay] = {}
        # Everything replica 0 of the whole program creates (``building``), for a program
        # without a loop, whose other replicas are the whole computation built again.
        self.program_creations = variable_creations.VariableCreations()
        # Built at a program's first run (``late_compile``): the initial weights are already
        # in replica 0's variables, so each new copy starts from its variable's value when
        # ``late_compile`` runs its initialiser, not with the variable's own initialiser.
        self.late = bool(getattr(_state, "compiling_late", False))
        self.late_copies: List[tf.Variable] = []

    # -- replication factor ---------------------------------------------------------

    def resolve(self, highest_shard: Optional[int] = None) -> int:
        """Fix ``R`` from the shards replica 0 used (called once replica 0 is built), or
        also counting ``highest_shard`` (a pipeline knows its IPUs before it builds)."""
        if self.replication_factor is None:
            used = self._max_shard_index()
            if highest_shard is not None:
                used = highest_shard if used is None else max(used, highest_shard)
            num_shards = shards.num_shards_for(used)
            self.num_shards = num_shards
            if self.replicas_from_feeds:
                # Never more replicas than slots (a feed made in another graph could say so);
                # a wrong factor is reported against the device at the first run.
                self.replication_factor = min(self.num_ipus,
                                              _replicas_declared_for(self.program))
            else:
                self.replication_factor = replication_factor(self.num_ipus, num_shards)
        return self.replication_factor

    def _max_shard_index(self):
        """Highest ``ipu_shard`` index among the ops built so far (None: not sharded)."""
        tagged = [shards.shard_of(op) for op in self.graph.get_operations()[self.first_op:]]
        tagged = [index for index in tagged if index is not None]
        return max(tagged) if tagged else None

    # -- building replicas --------------------------------------------------------------

    @contextlib.contextmanager
    def replica(self, index: int):
        """Build replica ``index`` in this context (replica 0: the user's own variables)."""
        first_op = len(self.graph.get_operations())
        with contextlib.ExitStack() as stack:
            stack.enter_context(_replica_context(self, index))
            if index == 0 and self.created_by_replica0 is not None:
                stack.enter_context(tf.compat.v1.variable_creator_scope(
                    self.created_by_replica0.recording_creator()))
            if index > 0:
                # get_variable must find replica 0's variables instead of refusing to
                # create them again; the handles are then swapped for this replica's copies.
                stack.enter_context(tf.compat.v1.variable_scope(
                    tf.compat.v1.get_variable_scope(), reuse=tf.compat.v1.AUTO_REUSE,
                    auxiliary_name_scope=False))
                stack.enter_context(tf.compat.v1.variable_creator_scope(
                    self._owning_creator(index)))
                stack.enter_context(tf.name_scope("replica%d" % index))
            yield
        if index > 0:
            self.other_replica_ops.update(self.graph.get_operations()[first_op:])

    def _shared_variable(self, index, kwargs):
        """Replica 0's variable made by the same creation as this one, if any (whose handle
        this replica redirects to its own copy); see ``variable_creations``."""
        if self.created_by_replica0 is None:
            return None
        replay = self.replays.get(index)
        if replay is None:
            replay = self.replays[index] = self.created_by_replica0.replay()
        return replay.match(kwargs)

    def _owning_creator(self, index):
        def creator(next_creator, **kwargs):
            shared = self._shared_variable(index, kwargs)
            if shared is not None:
                return shared
            variable = next_creator(**kwargs)
            handle = getattr(variable, "_handle", None)
            if handle is not None and not tf.executing_eagerly():
                self.owner[handle.op.name] = index
            return variable
        return creator

    def step(self, build_one, carried, width):
        """Build one loop iteration of every replica; returns ``(tensors, operations)``.

        ``carried`` holds ``width`` loop-carried values per replica slot (``num_ipus``
        slots: ``R`` is only known after replica 0, extra slots are passed through).
        """
        self.in_step = True
        self.loop_replicated = True
        self.last_dequeue = {}
        slots = [list(carried[i * width:(i + 1) * width]) for i in range(self.num_ipus)]
        tensors, operations = [], []
        try:
            with self._variables_of_replica0():
                first, first_ops, others = self._step_replicas(build_one, slots)
            tensors.extend(first)
            operations.extend(first_ops)
            for values, ops in others:
                tensors.extend(values)
                operations.extend(ops)
            for index in range(len(others) + 1, self.num_ipus):
                tensors.extend(tf.identity(v) for v in slots[index])
            self.finish_pending()
            # TensorFlow only runs what a fetch needs, and fetches see replica 0's values:
            # make every value carried out of the iteration wait for all the replicas.
            if len(tensors) > len(first):
                operations.append(tf.group(*tensors[len(first):], name="all_replicas"))
        finally:
            self.in_step = False
        return tensors, operations

    def _step_replicas(self, build_one, slots):
        with self.replica(0):
            first, first_ops = build_one(slots[0])
        others = []
        for index in range(1, self.resolve()):
            with self.replica(index):
                others.append(build_one(slots[index]))
        return first, first_ops, others

    @contextlib.contextmanager
    def _variables_of_replica0(self, creations=None):
        """While the replicas of one region (a loop iteration, a pipeline's micro-batch, a
        whole loop-less program) are built, replica 0 logs the variables it creates and the
        other replicas are handed those (each through its own copy) when their code creates
        them anew, as Keras layers built inside the region do.  Without this, a replica's
        Keras layers would start from fresh random weights."""
        saved = self.created_by_replica0, self.replays
        self.created_by_replica0 = (creations if creations is not None
                                    else variable_creations.VariableCreations())
        self.replays = {}
        try:
            yield
        finally:
            self.created_by_replica0, self.replays = saved

    @contextlib.contextmanager
    def lock_step(self):
        """Build one iteration of every replica of an outermost loop that builds its
        replicas itself (a pipeline): dequeues chain across the replicas as in ``step``."""
        self.in_step = True
        self.loop_replicated = True
        self.last_dequeue = {}
        try:
            with self._variables_of_replica0():
                yield
        finally:
            self.in_step = False

    def replicate_program(self, build_copy, replica0_outputs):
        """A program without a loop: build the other replicas of the whole computation and
        make replica 0's outputs depend on them (so one run executes every replica)."""
        replicas = self.resolve()
        others = []
        with self._variables_of_replica0(self.program_creations):
            for index in range(1, replicas):
                with self.replica(index):
                    others.append(build_copy())
        self.finish_pending()
        if not others:
            return replica0_outputs
        # ``assign_add`` and friends return a variable standing for the updated value: read
        # it, or the copy's update would not be part of the run.
        side_effects = [tf.convert_to_tensor(x) if isinstance(x, tf.Variable) else x
                        for out in others for x in tf.nest.flatten(out)]
        side_effects = [x for x in side_effects if isinstance(x, (tf.Tensor, tf.Operation))]
        if not side_effects:
            return replica0_outputs
        everything = tf.group(*side_effects, name="other_replicas")

        def depend(value):
            if isinstance(value, tf.Variable):
                value = tf.convert_to_tensor(value)
            if isinstance(value, tf.Operation):
                return tf.group(value, everything, name=value.name.split("/")[-1])
            if isinstance(value, tf.Tensor):
                with tf.control_dependencies([everything]):
                    return tf.identity(value)
            return value
        if replica0_outputs is None:
            return None
        return tf.nest.map_structure(depend, replica0_outputs)

    # -- variables ------------------------------------------------------------------------

    def handle_for(self, variable, replica):
        """The handle replica ``replica`` uses for ``variable``: its own variable's, else
        (first use) a new copy's.  Keyed by the handle's op name, which every Python object
        standing for the variable shares (``assign`` results included)."""
        handle = variable._handle  # pylint: disable=protected-access
        if getattr(handle, "graph", None) is not self.graph:
            return handle
        name = handle.op.name
        if self.owner.get(name) == replica:
            return handle
        copy = self.copies.get((name, replica))
        if copy is None:
            copy = self._make_copy(variable, replica)
            self.copies[(name, replica)] = copy
            self.owner[copy._handle.op.name] = replica  # pylint: disable=protected-access
            _copies_in(self.graph).setdefault(name, [variable]).append(copy)
            # A later build of the variable (late_compile's) replaces an earlier build's copies.
            latest = _latest_copies_in(self.graph)
            if name not in latest or latest[name][0] is not self:
                latest[name] = (self, {})
            latest[name][1][replica] = copy
        return copy._handle  # pylint: disable=protected-access

    def _make_copy(self, variable, replica):
        handle = variable._handle  # pylint: disable=protected-access
        graph = self.graph
        # A late build's copy starts from the variable's current value (the host's weights at
        # the program's first run); any other copy from the variable's own initial value.
        initial = None if self.late else getattr(variable, "_initial_value", None)
        with graph.as_default(), tf.control_dependencies(None), graph.name_scope(None), \
                tf_ops.colocate_with(None, ignore_existing=True), \
                tf.device(shards.replica_device(handle.device)):
            copy = resource_variable_ops.ResourceVariable(
                initial_value=initial if initial is not None else
                gen_resource_variable_ops.read_variable_op(handle, variable.dtype.base_dtype),
                trainable=False, collections=[], dtype=variable.dtype.base_dtype,
                name="replica%d/%s" % (replica, handle.op.name))
        if self.late:
            self.late_copies.append(copy)  # initialised by ``late_compile``, once per session
            return copy
        master_init = getattr(variable, "_initializer_op", None)
        if master_init is not None:
            # Initialising the variable initialises its copies in the same run, from the
            # same evaluation of the initial value: replicas start identical.
            master_init._add_control_input(copy.initializer)  # pylint: disable=protected-access
        return copy

    # -- infeeds ---------------------------------------------------------------------------

    def dequeue_dependencies(self, infeed):
        previous = self.last_dequeue.get(id(infeed))
        return [] if previous is None else tf.nest.flatten(previous)

    def note_dequeue(self, infeed, element):
        self.last_dequeue[id(infeed)] = element

    # -- cross-replica ops -------------------------------------------------------------

    def reduction(self, value, replica, mean, group_size, name):
        override = "IpuEmulatorCrossReplicaMean" if mean else "IpuEmulatorCrossReplicaSum"
        with self.graph.gradient_override_map({"Identity": override}):
            placeholder = tf.identity(value, name=name or ("cross_replica_mean" if mean
                                                           else "cross_replica_sum"))
        _group_sizes[placeholder.op.name] = group_size
        self.reductions.setdefault(replica, []).append(
            _Reduction(value, placeholder, mean, group_size))
        return placeholder

    def _finish_reductions(self, replicas):
        calls = [self.reductions.get(r, []) for r in range(replicas)]
        self.reductions = {}
        if replicas == 1:
            return
        if len({len(c) for c in calls}) != 1:
            raise RuntimeError("The replicas of a program called cross-replica ops a different "
                               "number of times; every replica must run the same code.")
        for k, items in enumerate(zip(*calls)):
            group_size = items[0].group_size or replicas
            if replicas % group_size:
                self.deferred_errors.append(
                    "The replica group size {} does not divide the number of replicas {}."
                    .format(group_size, replicas))
                continue
            self.all_reduce_bytes += graph_costs.tensor_bytes(items[0].value)
            for start in range(0, replicas, group_size):
                group = items[start:start + group_size]
                total = tf.math.add_n([item.value for item in group])
                if group[0].mean:
                    total = total / tf.cast(group_size, total.dtype)
                for item in group:
                    item.placeholder.op._update_input(0, total)  # pylint: disable=protected-access

    # -- outfeeds ----------------------------------------------------------------------

    def defer_enqueue(self, outfeed, tensors, replica):
        pending = self.outfeeds.get(outfeed)
        if pending is None:
            pending = self.outfeeds[outfeed] = _PendingOutfeed(structure=tensors)
        if replica in pending.flat_by_replica:
            raise ValueError(feed_messages.ENQUEUED_TWICE_MESSAGE)
        pending.flat_by_replica[replica] = [tf.convert_to_tensor(t)
                                            for t in tf.nest.flatten(tensors)]
        placeholder = tf.no_op(name="outfeed_enqueue_replica%d" % replica)
        pending.placeholders.append(placeholder)
        return placeholder

    def _finish_outfeeds(self, replicas):
        for outfeed, pending in self.outfeeds.items():
            per_replica = [pending.flat_by_replica[r] for r in sorted(pending.flat_by_replica)]
            enqueued = per_replica[0]
            if replicas > 1 and len(per_replica) == replicas:
                enqueued = [tf.stack(list(parts)) for parts in zip(*per_replica)]
            enqueue = outfeed._enqueue_replicated(  # pylint: disable=protected-access
                pending.structure, per_replica[0], enqueued)
            for placeholder in pending.placeholders:
                placeholder._add_control_input(enqueue)  # pylint: disable=protected-access
        self.outfeeds = {}

    def finish_pending(self, replicas=None):
        """Wire up the cross-replica ops and outfeeds of the replicas just built."""
        replicas = self.resolve() if replicas is None else replicas
        first_op = len(self.graph.get_operations())
        self._finish_reductions(replicas)
        self._finish_outfeeds(replicas)
        # The collectives are simulated as all-reduces, not as replica 0's compute.
        self.other_replica_ops.update(self.graph.get_operations()[first_op:])

    def finish_program(self, build_copy, outputs):
        """End of ``compile``: replicate a loop-less program, or wire up what replica 0
        built outside its loops (code outside a loop runs once, as replica 0)."""
        if self.loop_replicated or self._has_pipeline():
            # The loop (or pipeline) built its replicas; what was built outside it ran once.
            self.finish_pending(replicas=1)
        else:
            outputs = self.replicate_program(build_copy, outputs)
        program = self.program
        program.replication_factor = self.resolve()
        if self.replicas_from_feeds:
            # The device this program expects; checked against the real one at its first run.
            program.num_ipus = program.replication_factor * self.num_shards
            program.replicas_from_feeds = True
        program.other_replica_ops = set(self.other_replica_ops)
        program.all_reduce_bytes = self.all_reduce_bytes
        program.replication_errors = list(self.deferred_errors)
        program.late_copies = list(self.late_copies)
        return outputs

    def _has_pipeline(self):
        from . import programs
        return bool(programs.pipelines_of(self.program))


# Group sizes of the cross-replica placeholders, for their gradients.
_group_sizes: Dict[str, Optional[int]] = {}
# The copies' registries are kept on their graph, not in a weakref.WeakKeyDictionary keyed by
# it: the variables they list reference their graph, so a weak-keyed entry would keep every
# graph (with its datasets' constants) alive for ever.  On the graph they go when it goes.
def _registry_on(graph, attribute: str) -> dict:
    found = getattr(graph, attribute, None)
    if found is None:
        found = {}
        setattr(graph, attribute, found)
    return found


def _copies_in(graph) -> Dict[str, list]:
    """{handle op name: [variable, copy for replica 1, ...]} of ``graph``."""
    return _registry_on(graph, "_ipu_emulator_replica_copies")


def _latest_copies_in(graph) -> Dict[str, tuple]:
    """{handle op name: (the latest build that copied it, {replica: its copy})}.  The build
    itself, not its ``id()``: an id can be reused once a build is garbage."""
    return _registry_on(graph, "_ipu_emulator_latest_replica_copies")




# --- hooks called by the API front ----------------------------------------------------

def start(program, ordinal: Optional[int]) -> Optional[ReplicatedBuild]:
    """A replicated build for ``program`` when its device has several IPUs, else None.

    The device is the configured ``/device:IPU:{ordinal}``; an unknown ordinal (refused at
    the first run) counts as one IPU.  Before the system is configured, the replication
    factor the graph's feeds declared decides (see the module docstring); none declared
    counts as one IPU.
    """
    from ipu_emulator.runtime import configured_system
    num_ipus = 1
    replicas_from_feeds = False
    if ordinal is not None and configured_system.is_configured():
        for device in configured_system.current().devices:
            if device.ordinal == ordinal:
                num_ipus = device.num_ipus
    elif ordinal is not None:
        declared = _declared_by_graph.get(program.graph)
        if declared:
            num_ipus, replicas_from_feeds = max(declared), True
    program.num_ipus = 1 if replicas_from_feeds else num_ipus
    if num_ipus <= 1:
        return None
    _install_handle_redirect()
    return ReplicatedBuild(program, num_ipus, replicas_from_feeds=replicas_from_feeds)


@contextlib.contextmanager
def building(build: Optional[ReplicatedBuild]):
    """Build replica 0 of the program (the top level of the computation) in this context."""
    if build is None:
        yield
        return
    with tf.compat.v1.variable_creator_scope(build.program_creations.recording_creator()), \
            build.replica(0):
        yield


def loop_build() -> Optional[ReplicatedBuild]:
    """The build whose replicas an outermost on-device loop should contain, if any."""
    build, replica = _active()
    if build is None or build.in_step or replica != 0:
        return None
    return build


def defer_outfeed_enqueue(outfeed, tensors):
    """In a replicated build: record this replica's enqueue and return a stand-in op."""
    build, replica = _active()
    if build is None:
        return None
    return build.defer_enqueue(outfeed, tensors, replica)


@contextlib.contextmanager
def infeed_dequeue(infeed):
    """Order a replica's dequeue after the previous replica's (element i*R + r)."""
    build, _ = _active()
    if build is None or not build.in_step:
        yield None
        return
    with tf.control_dependencies(build.dequeue_dependencies(infeed)):
        holder = []
        yield holder
    if holder:
        build.note_dequeue(infeed, holder[0])


def cross_replica(value, mean, replica_group_size=None, name=None):
    """``cross_replica_sum``/``mean`` of ``value`` over the replicas being built."""
    value = tf.convert_to_tensor(value)
    build, replica = _active()
    if build is None:
        return tf.identity(value, name=name)
    return build.reduction(value, replica, mean, replica_group_size, name)


@contextlib.contextmanager
def compiling_late():
    """Replicated builds made in this context are a program's late build (see
    ``late_compile``): their copies are set from the variables' values, not initialisers."""
    _state.compiling_late = True
    try:
        yield
    finally:
        _state.compiling_late = False


def copy_initializers(graph) -> set:
    """The initialisers of every replica's copies of variables in ``graph``."""
    return {copy.initializer for copies in _copies_in(graph).values() for copy in copies[1:]}


def replica_variables(variable) -> list:
    """``[variable, replica 1's copy, ...]``; just ``[variable]`` if it was never replicated.
    Every copy any build made (a program built again at its first run made new ones)."""
    handle = variable._handle  # pylint: disable=protected-access
    return list(_copies_in(handle.graph).get(handle.op.name, [variable]))


def latest_replica_variables(variable) -> list:
    """``[variable, replica 1's copy, ...]`` of the latest build that copied ``variable``:
    a program built again for its device at its first run (``late_compile``) runs with its
    new copies, not with the unused ones of the build it replaced."""
    handle = variable._handle  # pylint: disable=protected-access
    _, latest = _latest_copies_in(handle.graph).get(handle.op.name, (None, {}))
    return [variable] + [latest[replica] for replica in sorted(latest)]


def replica_values(session, variable) -> list:
    """The value of ``variable`` on every replica (``session.run`` of each copy), as the
    latest build of its program made them (``latest_replica_variables``)."""
    return session.run([v.value() for v in latest_replica_variables(variable)])


# --- the handle redirection ---------------------------------------------------------------

_redirect_installed = [False]
_redirect_lock = threading.Lock()


def _install_handle_redirect():
    with _redirect_lock:
        if _redirect_installed[0]:
            return
        base = resource_variable_ops.BaseResourceVariable

        def handle(self):
            build, replica = _active()
            if not replica:
                return self._handle  # pylint: disable=protected-access
            return build.handle_for(self, replica)
        handle.__doc__ = base.handle.__doc__
        base.handle = property(handle)
        _redirect_installed[0] = True


def _reduction_gradient(mean):
    def gradient(op, grad):
        return cross_replica(grad, mean, _group_sizes.get(op.name))
    return gradient


tf.RegisterGradient("IpuEmulatorCrossReplicaSum")(_reduction_gradient(False))
tf.RegisterGradient("IpuEmulatorCrossReplicaMean")(_reduction_gradient(True))
