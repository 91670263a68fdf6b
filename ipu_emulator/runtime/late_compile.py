"""Compile at the first run: a program built for another device is built again for this one.

On an IPU system ``ipu_compiler.compile`` only records the computation.  Poplar compiles it
when it first runs, for the device configured by then, and only then fixes how many
replicas it has (the device's IPUs over the program's shards: Graphcore's TensorFlow user
guide, "Selecting the number of replicas").  So the
order never mattered there, and Graphcore's scripts often build the whole model first and
configure the IPUs just before opening the session.

The emulator builds the computation into the TensorFlow graph when ``compile`` is called
(its ops are the real numerics), so such a program was built without knowing its device.
At the program's first run (``session_run``), if the device now gives it another
replication factor than the one it was built with (or, for ``/device:IPU:1`` onwards, other
IPUs), it is built again (``program.rebuild``,
provided by ``ipu_compiler``), with the same variables, and runs in place of the first
build from then on: every fetch of the old program or of its outfeed dequeues is swapped
for the new one's.  The new replicas' copies of the weights start from the weights'
values when the new program first runs in a session, as an IPU system copies the host's
weights to every replica.

Programs whose feeds declared a ``replication_factor`` (SDK 2.0 and earlier) are left as
built: there a factor that does not fit the device is the SDK's error (``replication``).
"""
from __future__ import annotations

import tensorflow as tf
from tensorflow.python.util import nest

from ipu_emulator.runtime import configured_system
from . import programs, replication, shards


def _device_replication_factor(program):
    """The replicas the configured device gives ``program``; None when that is not
    decided here (an unknown device, or shards that do not divide it: both are the
    first-run errors of ``model_parallel``/``system``)."""
    try:
        num_ipus = configured_system.device(program.device_ordinal).num_ipus
    except tf.errors.InvalidArgumentError:
        return None
    num_shards = shards.num_shards(program)
    if replication.shard_mismatch_message(num_ipus, num_shards):
        return None
    return replication.replication_factor(num_ipus, num_shards)


def needs_rebuild(program) -> bool:
    """Does the device configured now give ``program`` other replicas, or other IPUs (a
    device after ``/device:IPU:0`` built for before the system was configured)?"""
    if program.rebuild is None or program.replicas_from_feeds:
        return False
    factor = _device_replication_factor(program)
    if factor is None:
        return False
    return (factor != program.replication_factor
            or shards.cpu_offset(program.device_ordinal) != program.cpu_offset)


def program_for_device(program):
    """The program that runs in place of ``program`` on the device as configured now
    (``program`` itself, a build made earlier, or one built now)."""
    while program.replaced_by is not None:
        program = program.replaced_by
    if not needs_rebuild(program):
        return program
    graph = program.graph
    variables_before = {v.op.name for v in _all_variables(graph)}
    with replication.compiling_late():
        new_program, replaced = program.rebuild()
    program.replaced_by = new_program
    programs.registry(graph).replaced_fetches.update(replaced)
    made_anew = [v for v in _all_variables(graph) if v.op.name not in variables_before]
    new_program.late_initializers = _late_initializers(graph, new_program.late_copies,
                                                       made_anew)
    return new_program


def substitute(graph, fetches):
    """``fetches`` with every fetch of a replaced program (or dequeue) swapped for its
    replacement's, following chains of rebuilds."""
    replaced = programs.registry(graph).replaced_fetches
    if not replaced:
        return fetches

    def swap(item):
        name = getattr(item, "name", item if isinstance(item, str) else None)
        while isinstance(name, str) and name in replaced:
            item = replaced[name]
            name = item.name
        return item
    return nest.map_structure(swap, fetches)


def _all_variables(graph):
    keys = (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.LOCAL_VARIABLES)
    return [v for key in keys for v in graph.get_collection(key)]


def _late_initializers(graph, copies, made_anew):
    """The ops to run, in order, before the new build first runs in a session: initialise
    the variables it made anew, then its replicas' copies (from their variables' values)."""
    with graph.as_default(), graph.name_scope(None):
        return [tf.group(*ops, name=name)
                for ops, name in (([v.initializer for v in made_anew], "new_variables"),
                                  ([c.initializer for c in copies], "replicas_from_host_weights"))
                if ops]


__all__ = ["needs_rebuild", "program_for_device", "substitute"]
