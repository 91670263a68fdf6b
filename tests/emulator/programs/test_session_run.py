"""The session hook: every Session.run of a compiled program is one recorded engine run."""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.client import session as tf_session

from ipu_emulator import record
from ipu_emulator.ipu import (ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, loops,
                              scopes)
from ipu_emulator.runtime import session_run

IPU = "/device:IPU:0"


def compile_on_ipu(computation, inputs=None):
    with scopes.ipu_scope(IPU):
        return ipu_compiler.compile(computation, inputs=inputs)


@pytest.fixture
def looped(graph):
    """A compiled ``repeat(n)`` over an infeed, with an outfeed; returns its handles."""
    data = np.arange(40, dtype=np.float32).reshape(10, 4)
    infeed = ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data).repeat())
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
    n = tf.compat.v1.placeholder(tf.int32, [])

    def body(total, x):
        s = tf.reduce_sum(x)
        return total + s, outfeed.enqueue(s)

    [total] = compile_on_ipu(lambda: loops.repeat(n, body, [0.0], infeed))
    return {"infeed": infeed, "outfeed": outfeed, "n": n, "total": total,
            "dequeue": outfeed.dequeue(), "plain": tf.constant(2.0) * 3.0}


def test_hook_is_installed_once():
    assert tf_session.BaseSession.run is session_run._run
    session_run.install()
    assert tf_session.BaseSession.run is session_run._run


def test_each_run_is_one_engine_run(looped, sess):
    sess.run(looped["infeed"].initializer)
    before = len(record.history)
    with record.capture() as runs:
        sess.run(looped["total"], {looped["n"]: 3})
        sess.run(looped["total"], {looped["n"]: 5})
        sess.run([looped["total"], looped["total"]], {looped["n"]: 2})  # one program, one run
    assert len(record.history) == before + 3
    assert list(record.history)[-3:] == runs.runs
    assert [r.iterations for r in runs.runs] == [3, 5, 2]
    assert runs.iterations == 10
    assert [r.first_run for r in runs.runs] == [True, False, False]
    assert all(r.host_seconds > 0 for r in runs.runs)
    assert len({r.program for r in runs.runs}) == 1
    assert runs.runs[0].infeed_bytes_per_iteration == 4 * 4
    assert runs.runs[0].outfeed_bytes_per_iteration == 4


def test_runs_without_emulator_fetches_are_not_recorded(looped, sess):
    before = len(record.history)
    with record.capture() as runs:
        assert sess.run(looped["plain"]) == 6.0
        sess.run(looped["infeed"].initializer)       # host-side: not an engine run
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(looped["total"], {looped["n"]: 4})
        assert sess.run(looped["dequeue"]).shape == (4,)  # host-side dequeue
    assert len(record.history) == before + 1
    assert runs.engine_runs == 1 and runs.runs[0].iterations == 4


def test_graph_without_emulator_objects_passes_straight_through(graph, sess):
    x = tf.constant([1.0, 2.0]) * 2.0
    before = len(record.history)
    np.testing.assert_array_equal(sess.run(x), [2.0, 4.0])
    assert len(record.history) == before


def test_program_without_a_loop_is_one_iteration(graph, sess):
    x = tf.compat.v1.placeholder(tf.float32, [2, 3])
    [y] = compile_on_ipu(lambda a: tf.reduce_sum(a * 2.0), [x])
    with record.capture() as runs:
        sess.run(y, {x: np.ones([2, 3])})
    [run] = runs.runs
    assert run.iterations == 1 and run.first_run
    assert run.input_bytes == 2 * 3 * 4 and run.output_bytes == 4


def test_failed_run_is_not_recorded(looped, sess):
    # The infeed was never initialised: the SDK error, and no engine run.
    with record.capture() as runs:
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(looped["total"], {looped["n"]: 2})
    assert runs.engine_runs == 0


def test_new_session_compiles_again(looped, graph):
    with tf.compat.v1.Session(graph=graph) as first:
        first.run(looped["infeed"].initializer)
        with record.capture() as runs:
            first.run(looped["total"], {looped["n"]: 1})
            first.run(looped["total"], {looped["n"]: 1})
    with tf.compat.v1.Session(graph=graph) as second:
        initializer = looped["infeed"]._initializer  # the property may be read only once
        second.run(initializer)
        with record.capture() as more:
            second.run(looped["total"], {looped["n"]: 1})
    assert [r.first_run for r in runs.runs + more.runs] == [True, False, True]


def test_captures_nest(looped, sess):
    sess.run(looped["infeed"].initializer)
    with record.capture() as outer:
        sess.run(looped["total"], {looped["n"]: 1})
        with record.capture() as inner:
            sess.run(looped["total"], {looped["n"]: 2})
    assert outer.engine_runs == 2 and inner.engine_runs == 1
    assert inner.runs[0] is outer.runs[1]


def test_program_without_a_loop_moves_its_infeed_element_as_input(graph, sess):
    # No on-device loop: the infeed's one element is copied in once, with the program's
    # inputs, not per iteration (a bug that dropped those bytes, 128 B -> 0, passed every test).
    data = np.arange(64, dtype=np.float32).reshape(2, 32)
    infeed = ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    [total] = compile_on_ipu(lambda: tf.reduce_sum(infeed._dequeue()))
    sess.run(infeed.initializer)
    with record.capture() as runs:
        assert sess.run(total) == sum(range(32))
    [run] = runs.runs
    assert run.iterations == 1 and run.infeed_bytes_per_iteration == 0
    assert run.input_bytes == 32 * 4 == 128
