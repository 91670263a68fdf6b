"""Every ``Session.run`` of a compiled program becomes one recorded engine run.

``BaseSession.run`` is wrapped once, when the API front is imported.  Runs that fetch
nothing of the emulator's pass straight through (one dictionary lookup per fetch).  For the
others the hook:

* raises the SDK's errors where the device would (unsupported infeed types when the feed is
  initialised; unsupported device types when the program is first run),
* fetches the programs' hidden loop trip counters along with the user's fetches,
* translates TensorFlow's own errors into the SDK's (an uninitialised or exhausted infeed,
  a LAST-mode outfeed with nothing in it),
* measures the host wall time and records an ``EngineRun`` for the simulator.
"""
from __future__ import annotations

import functools
import time

import numpy as np
import tensorflow as tf
from tensorflow.python.client import session as tf_session
from tensorflow.python.util import nest

from ipu_emulator import record
from ipu_emulator.runtime import configured_system
from . import (feed_messages, first_run, graph_costs, late_compile, memory_release, model_parallel,
               programs)

_original_run = tf_session.BaseSession.run

# ``DeviceConnectionType.NEVER``: the programs compile (and are checked) but no device is ever
# attached, so executing one fails (Graphcore's TensorFlow source,
# ``tensorflow/compiler/plugin/poplar/driver/poplar_executable.cc``,
# ``PoplarExecutable::ExecuteAsyncOnStream``: an ``InvalidArgument`` status).
COMPILE_ONLY_MESSAGE = ("Trying to run an executable on a device that was configured for "
                        "compilation only.")


def unwrapped_run(session, fetches, feed_dict=None):
    """``Session.run`` as TensorFlow has it: no engine run recorded (a check reading the
    weights a program left)."""
    return _original_run(session, fetches, feed_dict)


def install():
    """Wrap ``BaseSession.run`` (idempotent)."""
    if getattr(tf_session.BaseSession.run, "_ipu_emulator_hook", False):
        return
    tf_session.BaseSession.run = _run
    tf_session.BaseSession.run._ipu_emulator_hook = True  # pylint: disable=protected-access


class _Fetched:
    """The emulator objects a ``Session.run`` call touches."""

    def __init__(self):
        self.programs = []
        self.initialized_infeeds = []
        self.deleted_infeeds = []
        self.dequeued_outfeeds = []


def _classify(graph, fetches):
    reg = programs.existing_registry(graph)
    if reg is None or reg.is_empty():
        return None
    found = _Fetched()
    for item in nest.flatten(fetches):
        name = getattr(item, "name", item if isinstance(item, str) else None)
        if name is None:
            continue
        program = reg.program_by_fetch.get(name)
        if program is not None and program not in found.programs:
            found.programs.append(program)
        infeed = reg.infeed_by_initializer.get(name)
        if infeed is not None:
            found.initialized_infeeds.append(infeed)
        infeed = reg.infeed_by_deleter.get(name)
        if infeed is not None:
            found.deleted_infeeds.append(infeed)
        outfeed = reg.outfeed_by_dequeue.get(name)
        if outfeed is not None and outfeed not in found.dequeued_outfeeds:
            found.dequeued_outfeeds.append(outfeed)
    if not (found.programs or found.initialized_infeeds or found.deleted_infeeds
            or found.dequeued_outfeeds):
        return None
    return found


def _session_state(session):
    state = getattr(session, "_ipu_emulator_state", None)
    if state is None:
        state = {"deleted_feeds": set(), "program_runs": {}}
        session._ipu_emulator_state = state  # pylint: disable=protected-access
    return state


@functools.wraps(_original_run)
def _run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    found = _classify(self.graph, fetches)
    if found is None:
        return _original_run(self, fetches, feed_dict, options, run_metadata)
    fetches, found = _compile_for_device(self.graph, fetches, found)
    state = _session_state(self)

    for infeed in found.initialized_infeeds:
        message = infeed.unsupported_dtype_message()
        if message is not None:
            raise tf.errors.FailedPreconditionError(None, None, message)
        state["deleted_feeds"].discard(infeed.feed_id)
    for program in found.programs:
        _check_before_run(program, state)
        if not state["program_runs"].get(program.name):
            for initializer in program.late_initializers:  # a late build's new variables
                _original_run(self, initializer)
    model_parallel.check_session(self, found.programs)
    for outfeed in found.dequeued_outfeeds:
        if not _outfeed_has_run(outfeed, state) and outfeed.outfeed_mode.value == "all":
            outfeed.warn_dequeue_before_run()

    if found.programs and configured_system.current().compile_only:
        raise tf.errors.InvalidArgumentError(None, None, COMPILE_ONLY_MESSAGE)
    if found.programs and configured_system.current().pre_compile:
        for program in found.programs:  # compiled (and checked) once, never executed
            state["program_runs"][program.name] = state["program_runs"].get(program.name, 0) + 1
        return _pre_compiled(self, fetches, found, feed_dict, options, run_metadata)

    counters = [c for p in found.programs for c in p.trip_counters]
    started = time.perf_counter()
    try:
        with memory_release.engine_run():
            if counters:
                results, trip_counts = _original_run(
                    self, (fetches, counters), feed_dict, options, run_metadata)
            else:
                results, trip_counts = _original_run(
                    self, fetches, feed_dict, options, run_metadata), []
    except tf.errors.OpError as error:
        raise _translate(error, found) from None
    host_seconds = time.perf_counter() - started

    for infeed in found.deleted_infeeds:
        state["deleted_feeds"].add(infeed.feed_id)
    _record_runs(found.programs, trip_counts, host_seconds, state)
    return results


def _compile_for_device(graph, fetches, found):
    """Programs built for another device than the one configured now run as built again
    for it (``late_compile``); the fetches of the old builds are swapped for the new."""
    replaced = [late_compile.program_for_device(p) is not p for p in found.programs]
    if not any(replaced) and not programs.registry(graph).replaced_fetches:
        return fetches, found
    fetches = late_compile.substitute(graph, fetches)
    return fetches, _classify(graph, fetches)


def _pre_compiled(session, fetches, found, feed_dict, options, run_metadata):
    """``DeviceConnectionType.PRE_COMPILE``: the SDK compiles the programs but has no device
    to run them on, so each execution returns zeros (Graphcore's TensorFlow API reference,
    ``DeviceConnectionType``) and changes nothing.
    Other fetches in the same call run as usual."""
    registry = programs.registry(session.graph)
    flat = nest.flatten(fetches)
    results, others = [None] * len(flat), []
    for index, item in enumerate(flat):
        element = session.graph.as_graph_element(item) if isinstance(item, str) else item
        if registry.program_by_fetch.get(element.name) in found.programs:
            if isinstance(element, tf.Tensor):
                shape = [d if d is not None else 0 for d in element.shape.as_list()]
                results[index] = np.zeros(shape, element.dtype.as_numpy_dtype)
        else:
            others.append(index)
    if others:
        values = _original_run(session, [flat[i] for i in others], feed_dict, options,
                               run_metadata)
        for index, value in zip(others, values):
            results[index] = value
    return nest.pack_sequence_as(fetches, results)


def _check_before_run(program, state):
    for infeed in program.infeeds:
        if infeed.feed_id in state["deleted_feeds"]:
            raise feed_messages.infeed_not_created(infeed.feed_id)
    if state["program_runs"].get(program.name, 0) == 0:
        first_run.check(program)  # what the SDK's compiler refuses


def _outfeed_has_run(outfeed, state):
    return any(outfeed in p.outfeeds and state["program_runs"].get(p.name)
               for p in _programs_seen(state))


def _programs_seen(state):
    return state.setdefault("programs", [])


def _translate(error, found):
    text = error.message or ""
    infeeds = [f for p in found.programs for f in p.infeeds]
    if infeeds and isinstance(error, tf.errors.FailedPreconditionError) and "iterator has not been initialized" in text:
        return tf.errors.FailedPreconditionError(
            error.node_def, error.op,
            feed_messages.INFEED_NOT_CREATED_MESSAGE.format(infeeds[0].feed_id))
    if infeeds and isinstance(error, tf.errors.OutOfRangeError):
        return tf.errors.OutOfRangeError(error.node_def, error.op,
                                         feed_messages.INFEED_OUT_OF_RANGE_MESSAGE)
    last_mode = [o for o in found.dequeued_outfeeds if o.outfeed_mode.value == "get_last"]
    if last_mode and isinstance(error, tf.errors.InvalidArgumentError) and "out of bounds" in text:
        return tf.errors.FailedPreconditionError(
            error.node_def, error.op, last_mode[0].LAST_BEFORE_RUN_MESSAGE)
    return error


def _record_runs(found_programs, trip_counts, host_seconds, state):
    counts = iter(trip_counts)
    seen = _programs_seen(state)
    for program in found_programs:
        # A program without an on-device loop is one iteration; a loop's real trip count
        # may be 0 (a false condition, ``repeat(0)``): then none of its body ran.
        loop_counts = [int(next(counts)) for _ in program.trip_counters]
        iterations = max(loop_counts) if loop_counts else 1
        runs_so_far = state["program_runs"].get(program.name, 0)
        state["program_runs"][program.name] = runs_so_far + 1
        if program not in seen:
            seen.append(program)
        in_loop = bool(program.trip_counters)
        infeed_bytes = sum(f.element_bytes() for f in program.infeeds)
        loop_outfeed = sum(o.element_bytes() for o in program.outfeeds if o in program.outfeeds_in_loop)
        once_outfeed = sum(o.element_bytes() for o in program.outfeeds if o not in program.outfeeds_in_loop)
        input_bytes = sum(graph_costs.tensor_bytes(t) for t in program.input_tensors)
        output_bytes = sum(graph_costs.tensor_bytes(t) for t in program.output_tensors)
        fields = dict(num_ipus=program.num_ipus)
        fields.update(model_parallel.run_fields(program))
        record.add_engine_run(record.EngineRun(
            program=program.name,
            iterations=iterations,
            step_cost=program.cost(),
            infeed_bytes_per_iteration=infeed_bytes if in_loop else 0,
            outfeed_bytes_per_iteration=loop_outfeed if in_loop else 0,
            input_bytes=input_bytes + (0 if in_loop else infeed_bytes),
            output_bytes=output_bytes + once_outfeed + (0 if in_loop else loop_outfeed),
            host_seconds=host_seconds / max(1, len(found_programs)),
            first_run=runs_so_far == 0,
            replicas=program.replication_factor,
            all_reduce_bytes=program.all_reduce_bytes,
            gradient_accumulation_count=program.gradient_accumulation_count,
            gradient_accumulation_reduction=program.gradient_accumulation_reduction,
            **fields,
        ))
