"""The IPU event trace: what ``gen_ipu_ops.ipu_event_trace()`` returns, from the emulator's record.

With SDK 1.x profiling on (``create_ipu_config(profiling=True)`` or
``enable_ipu_events=True``), the Poplar backend queues an ``IpuTraceEvent`` protobuf for each
thing that happens on an IPU (a compilation begins or ends, an engine is loaded, a program is
executed); the ``ipu_event_trace`` op returns the events queued since its last run, serialized,
as a 1-D string tensor, and the ``ipu.utils.extract_*`` helpers parse them.

The emulator queues its own events, from the engine runs it records (``record.EngineRun``):

* the first run of a program: ``COMPILE_BEGIN``, ``COMPILE_END`` and ``LOAD_ENGINE``, then
  ``EXECUTE``; every later run: ``EXECUTE``.  Module names are the emulator's program names.
* ``COMPILE_END.compilation_report``, with ``profiling=True``: the emulator's own report, JSON
  (or ``key: value`` lines with ``use_poplar_text_report=True``): the target, IPUs, replicas
  and each shard's or stage's measured cost.  Not Poplar's graph report: there is no Poplar
  graph, so no tile memory or vertex figures.  ``duration`` is 0: nothing is compiled for an
  IPU here.
* ``EXECUTE.execution_report``, with ``profile_execution`` set: iterations, this machine's wall
  time and the simulated IPU time of the run, each named with its clock.
* no ``HOST_TO_DEVICE_TRANSFER``/``DEVICE_TO_HOST_TRANSFER`` events: the record knows how many
  bytes moved, not which tensors.

The message is built here with the SDK's message, field and enum names (``IpuTraceEvent``
with ``timestamp``, ``type``, ``ordinal`` and one payload of ``compile_begin``,
``compile_end``, ``data_transfer``, ``load_engine`` or ``execute``); its field numbers are the
emulator's, so its bytes are for the emulator's ``ipu.utils`` to parse, not Graphcore's.
"""
import collections
import dataclasses
import json
import threading
import time

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ipu_emulator import record
from ipu_emulator.runtime import configured_system

# --- the message --------------------------------------------------------------------------

_TYPES = ["UNKNOWN", "COMPILE_BEGIN", "COMPILE_END", "HOST_TO_DEVICE_TRANSFER",
          "DEVICE_TO_HOST_TRANSFER", "LOAD_ENGINE", "EXECUTE"]
_PAYLOADS = {  # message name -> its bytes fields (and CompileEnd's duration in microseconds)
    "CompileBegin": ["module_name"],
    "CompileEnd": ["module_name", "compilation_report", "duration", "tensor_map",
                   "instruction_info", "poplar_graph"],
    "DataTransfer": ["data_transfer"],
    "LoadEngine": ["module_name"],
    "Execute": ["module_name", "execution_report"],
}
_PAYLOAD_FIELDS = [("compile_begin", "CompileBegin"), ("compile_end", "CompileEnd"),
                   ("data_transfer", "DataTransfer"), ("load_engine", "LoadEngine"),
                   ("execute", "Execute")]
_PACKAGE = "ipu_emulator.trace"


def _messages():
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="ipu_emulator/trace.proto",
                                               package=_PACKAGE, syntax="proto3")
    for name, fields in _PAYLOADS.items():
        message = proto.message_type.add(name=name)
        for number, field_name in enumerate(fields, start=1):
            kind = F.TYPE_INT64 if field_name == "duration" else F.TYPE_BYTES
            message.field.add(name=field_name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    event = proto.message_type.add(name="IpuTraceEvent")
    kinds = event.enum_type.add(name="Type")
    for number, name in enumerate(_TYPES):
        kinds.value.add(name=name, number=number)
    event.field.add(name="timestamp", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="type", number=2, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                    type_name=".%s.IpuTraceEvent.Type" % _PACKAGE)
    event.field.add(name="ordinal", number=3, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    event.oneof_decl.add(name="payload")
    for number, (field_name, message_name) in enumerate(_PAYLOAD_FIELDS, start=4):
        event.field.add(name=field_name, number=number, type=F.TYPE_MESSAGE,
                        label=F.LABEL_OPTIONAL, type_name=".%s.%s" % (_PACKAGE, message_name),
                        oneof_index=0)
    pool = descriptor_pool.DescriptorPool()  # the emulator's own: no clash with TensorFlow's
    pool.Add(proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(
        "%s.%s" % (_PACKAGE, name))) for name in list(_PAYLOADS) + ["IpuTraceEvent"]}


_CLASSES = _messages()
IpuTraceEvent = _CLASSES["IpuTraceEvent"]
CompileBegin = _CLASSES["CompileBegin"]
CompileEnd = _CLASSES["CompileEnd"]
DataTransfer = _CLASSES["DataTransfer"]
LoadEngine = _CLASSES["LoadEngine"]
Execute = _CLASSES["Execute"]

# --- the queue ----------------------------------------------------------------------------

# The backend keeps events until ``ipu_event_trace`` runs; a script that never runs it would
# keep them all, so the oldest are dropped past this many runs.
QUEUE_LIMIT = 10_000
_lock = threading.Lock()
_queue = collections.deque(maxlen=QUEUE_LIMIT)  # (wall time at the run's end, run, profiling)


def _queue_run(run):
    profiling = configured_system.current().profiling
    if profiling is None or not profiling.enable_ipu_trace_events:
        return
    with _lock:
        _queue.append((time.time(), run, profiling))


record.on_engine_run(_queue_run)


def clear():
    """Drop the queued events (the system was configured anew)."""
    with _lock:
        _queue.clear()


def _report(fields, text):
    """JSON, or with ``text`` one ``key: value`` line each (a list: one indented line each)."""
    if not text:
        return json.dumps(fields, sort_keys=True).encode()

    def line(value):
        if isinstance(value, dict):
            return ", ".join("%s=%s" % (k, line(v)) for k, v in value.items())
        if isinstance(value, float):
            return "%g" % value
        return str(value)

    lines = []
    for key, value in fields.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append("%s:" % key)
            lines.extend("  %d: %s" % (index, line(item)) for index, item in enumerate(value))
        else:
            lines.append("%s: %s" % (key, line(value)))
    return ("\n".join(lines) + "\n").encode()


def _cost_fields(cost):
    return {key: value for key, value in dataclasses.asdict(cost).items()
            if isinstance(value, (int, float))}


def compilation_report(run, text=False):
    """The emulator's compile report of the program ``run`` ran (bytes, JSON or text)."""
    system = configured_system.current()
    fields = {
        "program": run.program,
        "compiler": "ipu_emulator (no Poplar graph: no tile memory or vertex figures)",
        "target": system.ipu_version,
        "ipus": run.num_ipus,
        "replicas": run.replicas,
        "step_cost": _cost_fields(run.step_cost),
        "stages": [_cost_fields(stage) for stage in run.stages],
    }
    if run.pipeline is not None:
        fields["pipeline"] = {"schedule": run.pipeline.schedule,
                              "gradient_accumulation_count":
                                  run.pipeline.gradient_accumulation_count,
                              "device_mapping": list(run.pipeline.device_mapping)}
    return _report(fields, text)


def execution_report(run, text=False):
    """The emulator's execution report of one engine run (bytes, JSON or text)."""
    simulated = record.ProgramRecord(runs=[run]).simulate(
        target=configured_system.current().ipu_version)
    fields = {
        "program": run.program,
        "iterations": run.iterations,
        "replicas": run.replicas,
        "host_wall_seconds": run.host_seconds,  # this machine's clock
        "simulated_ipu_seconds": simulated.metrics.makespan,  # the simulator's clock
    }
    return _report(fields, text)


def _events_of(end, run, profiling):
    start = end - (run.host_seconds or 0.0)
    text = profiling.enable_poplar_reports_text
    events = []
    if run.first_run:
        events.append(IpuTraceEvent(timestamp=start, type=IpuTraceEvent.COMPILE_BEGIN,
                                    compile_begin=CompileBegin(module_name=run.program.encode())))
        report = (compilation_report(run, text) if profiling.enable_compilation_trace
                  else b"")
        events.append(IpuTraceEvent(timestamp=start, type=IpuTraceEvent.COMPILE_END,
                                    compile_end=CompileEnd(module_name=run.program.encode(),
                                                           compilation_report=report,
                                                           duration=0)))
        events.append(IpuTraceEvent(timestamp=start, type=IpuTraceEvent.LOAD_ENGINE,
                                    load_engine=LoadEngine(module_name=run.program.encode())))
    profiled = profiling.execution_trace_type.name != "NO_PROFILE"
    events.append(IpuTraceEvent(timestamp=end, type=IpuTraceEvent.EXECUTE,
                                execute=Execute(module_name=run.program.encode(),
                                                execution_report=execution_report(run, text)
                                                if profiled else b"")))
    return events


def take_events():
    """The events of the engine runs since the last call, serialized, oldest first."""
    with _lock:
        queued = list(_queue)
        _queue.clear()
    return [event.SerializeToString() for end, run, profiling in queued
            for event in _events_of(end, run, profiling)]


def ipu_event_trace(name=None):
    """``gen_ipu_ops.ipu_event_trace``: a 1-D string tensor of the serialized events queued
    since it last ran.  Built in a graph, it runs at each ``Session.run`` that fetches it;
    called eagerly, it runs at once."""
    import tensorflow as tf  # lazy: the message above needs no TensorFlow

    def serialized():
        return tf.constant(take_events(), dtype=tf.string)

    with tf.name_scope(name or "IpuEventTrace"):
        events = tf.py_function(serialized, [], tf.string)
        events.set_shape([None])
        return events
