"""``gen_ipu_ops.ipu_event_trace()`` and the ``ipu.utils`` report helpers (issue 26, TF1; the
eager case is in tf2/test_event_trace_tf2.py).  The user guide's sharding layout builds the op
and never runs it; run, it returns the events of the engine runs since its last run, as
``create_ipu_config``'s profiling arguments ask, and the helpers read them."""
import json
import runpy
import sys

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.cli import import_aliases
from ipu_emulator.compat.plugin.poplar.ops import gen_ipu_ops
from ipu_emulator.runtime import event_trace
from tests.support.child_python import ROOT

LAYOUT = ROOT / "tests" / "layouts" / "sharding_event_trace_layout.py"
Event = event_trace.IpuTraceEvent
COMPILE_BEGIN, COMPILE_END, LOAD_ENGINE, EXECUTE = (
    Event.COMPILE_BEGIN, Event.COMPILE_END, Event.LOAD_ENGINE, Event.EXECUTE)


@pytest.fixture(autouse=True)
def empty_queue_and_sdk_names():
    """No events left from another test; the SDK's module names import (as under the runner)."""
    event_trace.clear()
    import_aliases.install()
    try:
        yield
    finally:
        import_aliases.uninstall()
        event_trace.clear()


def run_layout(monkeypatch, *args):
    monkeypatch.setattr(sys, "argv", [str(LAYOUT), *args])
    with tf.Graph().as_default():
        return runpy.run_path(str(LAYOUT), run_name="__main__")


def test_the_sharding_layout_builds_the_trace_op_without_running_it(monkeypatch, capsys):
    names = run_layout(monkeypatch, "--steps", "2")
    assert capsys.readouterr().out.splitlines() == ["step 0: 20.0", "step 1: 20.0"]
    report = names["report"]
    assert report.dtype == tf.string and report.shape.as_list() == [None]
    assert report.device.upper().startswith("/DEVICE:CPU")
    # Nobody ran it: the two runs' events are still queued, for its next run.
    kinds = [Event.FromString(e).type for e in event_trace.take_events()]
    assert kinds == [COMPILE_BEGIN, COMPILE_END, LOAD_ENGINE, EXECUTE, EXECUTE]


def test_the_sharding_layout_runs_the_trace_op_and_extracts_its_strings(monkeypatch, capsys):
    run_layout(monkeypatch, "--steps", "3", "--report")
    out = capsys.readouterr().out
    assert "event types: [1, 2, 5, 6, 6, 6]" in out
    assert "compile reports: 1\nexecute reports: 3\n" in out
    # The text: one block per event, each under a rule, the reports as text lines.
    assert out.count("-" * 70 + "\n=> @ ") == 6
    assert "Compile begin: program_" in out and "Load engine: program_" in out
    assert "\nDuration: 0 us\n" in out
    assert "\nipus: 2\n" in out and "\nstages:\n  0: forward_flops=8" in out
    assert out.count("\niterations: 1\n") == 3
    assert "simulated_ipu_seconds: " in out and "host_wall_seconds: " in out


def sharded_program(graph):
    with tf.device("cpu"):
        x = tf.compat.v1.placeholder(tf.float32, [4])
        report = gen_ipu_ops.ipu_event_trace()

    def body(v):
        with ipu.scopes.ipu_shard(0):
            y = v * 2.0
        with ipu.scopes.ipu_shard(1):
            return tf.reduce_sum(y)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        [total] = ipu.ipu_compiler.compile(body, [x])
    return x, total, report


def configure(**profiling):
    cfg = ipu.utils.create_ipu_config(**profiling)
    cfg = ipu.utils.auto_select_ipus(cfg, 2)
    ipu.utils.configure_ipu_system(cfg)


def test_each_run_of_the_op_returns_the_events_since_the_last(graph):
    configure(profiling=True)
    x, total, report = sharded_program(graph)
    with tf.compat.v1.Session() as sess:
        assert sess.run(report).shape == (0,)
        sess.run(total, {x: np.ones(4)})
        first = sess.run(report)
        assert ipu.utils.extract_all_types_from_event_trace(first) == [
            COMPILE_BEGIN, COMPILE_END, LOAD_ENGINE, EXECUTE]
        assert sess.run(report).shape == (0,)
        sess.run(total, {x: np.ones(4)})
        second = sess.run(report)
    assert ipu.utils.extract_all_types_from_event_trace(second) == [EXECUTE]
    # The default report is JSON; without profile_execution executions carry no report.
    [(module, text)] = ipu.utils.extract_compile_reports(first)
    compiled = json.loads(text)
    assert compiled["program"] == module and compiled["ipus"] == 2
    assert [stage["forward_flops"] for stage in compiled["stages"]] == [4.0, 4.0]  # x * 2, then the sum
    assert ipu.utils.extract_execute_reports(first + second) == []
    events = ipu.utils.extract_all_events(second)
    assert events[0].execute.module_name.decode() == module
    assert events[0].timestamp >= ipu.utils.extract_all_events(first)[0].timestamp


def test_profiled_executions_carry_a_json_report_with_both_clocks(graph):
    configure(profiling=True, profile_execution=True)
    x, total, report = sharded_program(graph)
    with tf.compat.v1.Session() as sess:
        sess.run(total, {x: np.ones(4)})
        events = sess.run(report)
    [(module, text)] = ipu.utils.extract_execute_reports(events)
    executed = json.loads(text)
    assert executed["iterations"] == 1 and executed["program"] == module
    assert executed["host_wall_seconds"] > 0 and executed["simulated_ipu_seconds"] > 0


@pytest.mark.parametrize("profiling, expected", [
    ({}, []),
    ({"enable_ipu_events": True}, [COMPILE_BEGIN, COMPILE_END, LOAD_ENGINE, EXECUTE]),
])
def test_events_only_when_asked_for_and_reports_only_when_profiling(graph, profiling, expected):
    configure(**profiling)
    x, total, report = sharded_program(graph)
    with tf.compat.v1.Session() as sess:
        sess.run(total, {x: np.ones(4)})
        events = sess.run(report)
    assert ipu.utils.extract_all_types_from_event_trace(events) == expected
    assert ipu.utils.extract_compile_reports(events) == []


def test_the_helpers_read_every_event_type_from_a_list_of_bytes():
    from tensorflow.compiler.plugin.poplar.driver.trace_pb2 import DataTransfer, IpuTraceEvent
    assert IpuTraceEvent is Event
    transfer = json.dumps({"tensors": [{"name": "w", "size": 16}]}).encode()
    events = [IpuTraceEvent(timestamp=0.0, type=IpuTraceEvent.HOST_TO_DEVICE_TRANSFER,
                            data_transfer=DataTransfer(data_transfer=transfer)),
              IpuTraceEvent(timestamp=0.0, type=IpuTraceEvent.UNKNOWN)]
    serialized = [event.SerializeToString() for event in events]
    assert ipu.utils.extract_all_io_events(serialized) == [
        (IpuTraceEvent.HOST_TO_DEVICE_TRANSFER, "w")]
    text = ipu.utils.extract_all_strings_from_event_trace(np.array(serialized, dtype=object))
    assert "Host->Device\n" + transfer.decode() in text and "Unknown event" in text
    assert ipu.utils.extract_poplar_serialized_graphs(serialized) == []


def test_tile_memory_from_events_is_not_emulated():
    with pytest.raises(NotImplementedError, match="get_memory_size_from_events"):
        ipu.utils.get_memory_size_from_events([])
