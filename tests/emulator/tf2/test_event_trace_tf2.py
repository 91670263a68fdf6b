"""``gen_ipu_ops.ipu_event_trace()`` in TF2 (issue 26): called eagerly it runs at once and
returns the events of the ``IPUStrategy`` runs since it last ran; inside a ``tf.function`` it is
an op of the function; the ``ipu.utils`` helpers take the eager tensor as they take a NumPy
array (the TF1 cases: programs/test_event_trace.py)."""
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.compat.plugin.poplar.ops import gen_ipu_ops
from ipu_emulator.runtime import event_trace

pytestmark = pytest.mark.tf2
Event = event_trace.IpuTraceEvent


@pytest.fixture(autouse=True)
def profiled_system():
    event_trace.clear()
    cfg = ipu.utils.create_ipu_config(profiling=True, profile_execution=True)
    ipu.utils.configure_ipu_system(ipu.utils.auto_select_ipus(cfg, 1))
    yield
    event_trace.clear()


def test_eager_trace_returns_the_strategys_runs_since_the_last_call():
    strategy = ipu.ipu_strategy.IPUStrategy()
    square = tf.function(lambda x: x * x)
    assert gen_ipu_ops.ipu_event_trace().shape == (0,)
    for _ in range(2):
        strategy.run(square, args=(tf.constant([3.0]),))
    events = gen_ipu_ops.ipu_event_trace()
    assert isinstance(events, tf.Tensor) and events.dtype == tf.string
    assert ipu.utils.extract_all_types_from_event_trace(events) == [
        Event.COMPILE_BEGIN, Event.COMPILE_END, Event.LOAD_ENGINE, Event.EXECUTE, Event.EXECUTE]
    assert len(ipu.utils.extract_execute_reports(events)) == 2
    assert "Execute: " in ipu.utils.extract_all_strings_from_event_trace(events)
    assert gen_ipu_ops.ipu_event_trace().shape == (0,)


def test_inside_a_function_the_trace_runs_with_each_call():
    strategy = ipu.ipu_strategy.IPUStrategy()
    strategy.run(tf.function(lambda x: x + 1.0), args=(tf.constant(1.0),))
    read = tf.function(lambda: gen_ipu_ops.ipu_event_trace(name="trace"))
    assert len(read()) == 4
    assert len(read()) == 0
