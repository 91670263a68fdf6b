"""loops.repeat and loops.while_loop (Graphcore's TensorFlow API reference, ``ipu.loops``)."""
import functools

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, loops, scopes

IPU = "/device:IPU:0"
BODY_ERROR = ("Supplied loop body function cannot be called with the specified inputs. You "
              "specified {n} inputs: {names}, but the loop body needs {needs}.")
BODY_INFEED_ERROR = ("Supplied loop body function cannot be called with the specified inputs. "
                     "You specified {n} inputs: {names} and {k} additional inputs from infeed, "
                     "but the computation needs {needs}.")
CONDITION_ERROR = ("Supplied loop condition function cannot be called with the specified "
                   "inputs. You specified {n} inputs: {names}, but the loop condition needs "
                   "{needs}.")
ORDER_ERROR = ("IPU loop body must return zero or more Tensor values followed by zero or more "
               "Operations.")


def compile_on_ipu(computation, inputs=None):
    with scopes.ipu_scope(IPU):
        return ipu_compiler.compile(computation, inputs=inputs)


def make_infeed(element):
    """An initialised-later infeed over 10 copies of ``element`` (tuple, dict or tensor)."""
    return ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors(element).repeat(10))


def names_of(tensors):
    return str([t.name for t in tensors])


# --- infeed unpacking ---------------------------------------------------------------------

def test_tuple_element_is_unpacked_after_loop_carried_values(graph, sess):
    infeed = make_infeed((np.float32(2.0), np.float32(3.0)))
    seen = {}

    def body(total, a, b):
        seen["args"] = (a.dtype, b.dtype)
        return total + a * 10.0 + b

    [out] = compile_on_ipu(lambda: loops.repeat(4, body, [0.0], infeed))
    sess.run(infeed.initializer)
    assert sess.run(out) == 4 * 23.0


def test_single_tensor_element_is_one_argument(graph, sess):
    infeed = make_infeed(np.array([1.0, 2.0], np.float32))

    def body(total, x):
        return total + tf.reduce_sum(x)

    [out] = compile_on_ipu(lambda: loops.repeat(3, body, [0.0], infeed))
    sess.run(infeed.initializer)
    assert sess.run(out) == 9.0


def test_dict_element_is_passed_as_keyword_arguments(graph, sess):
    infeed = make_infeed({"first": np.float32(1.0), "second": np.float32(100.0)})

    def body(total, second, first):  # parameter order differs from the dict's
        return total + first - second

    [out] = compile_on_ipu(lambda: loops.repeat(2, body, [0.0], infeed))
    sess.run(infeed.initializer)
    assert sess.run(out) == 2 * (1.0 - 100.0)


def test_several_loop_carried_values_come_first_in_order(graph, sess):
    infeed = make_infeed(np.float32(1.0))

    def body(count, total, x):
        return count + 1, total + x * 2.0

    [outs] = compile_on_ipu(lambda: [loops.repeat(5, body, [0, 0.0], infeed)])
    sess.run(infeed.initializer)
    assert sess.run(outs) == [5, 10.0]


# --- arity errors ---------------------------------------------------------------------------

def test_body_arity_without_infeed(graph):
    inputs = [tf.constant(1.0, name="a"), tf.constant(2.0, name="b")]
    with pytest.raises(TypeError) as info:
        loops.repeat(2, lambda x: x, inputs)
    assert str(info.value) == BODY_ERROR.format(n=2, names="['a:0', 'b:0']",
                                                needs="exactly 1 argument")
    with pytest.raises(TypeError) as info:
        loops.while_loop(lambda x, y: True, lambda x, y, z: (x, y), inputs)
    assert str(info.value) == BODY_ERROR.format(n=2, names="['a:0', 'b:0']",
                                                needs="exactly 3 arguments")


def test_body_arity_at_least_and_at_most(graph):
    a = tf.constant(1.0, name="a")

    def needs_two_or_more(x, y, *rest):
        return x

    with pytest.raises(TypeError) as info:
        loops.repeat(2, needs_two_or_more, [a])
    assert str(info.value) == BODY_ERROR.format(n=1, names="['a:0']",
                                                needs="at least 2 arguments")

    def one_with_default(x, y=1.0):
        return x

    with pytest.raises(TypeError) as info:
        loops.repeat(2, lambda: 1.0, [a])
    assert str(info.value) == BODY_ERROR.format(n=1, names="['a:0']",
                                                needs="exactly 0 arguments")
    b, c = tf.constant(2.0, name="b"), tf.constant(3.0, name="c")
    with pytest.raises(TypeError) as info:
        loops.repeat(2, one_with_default, [a, b, c])
    assert str(info.value) == BODY_ERROR.format(n=3, names="['a:0', 'b:0', 'c:0']",
                                                needs="at most 2 arguments")

    def one_required_with_default(x, y, z=1.0):
        return x

    with pytest.raises(TypeError) as info:
        loops.repeat(2, one_required_with_default, [])
    assert str(info.value) == BODY_ERROR.format(n=0, names="[]", needs="at least 2 arguments")

    def needs_one(x, *rest):
        return x

    with pytest.raises(TypeError) as info:
        loops.repeat(2, needs_one, [])
    assert str(info.value) == BODY_ERROR.format(n=0, names="[]", needs="at least 1 argument")


def test_body_arity_with_infeed(graph):
    infeed = make_infeed((np.float32(1.0), np.float32(2.0)))
    a = tf.constant(1.0, name="a")
    with pytest.raises(TypeError) as info:
        loops.repeat(2, lambda total, x: total, [a], infeed)
    assert str(info.value) == BODY_INFEED_ERROR.format(
        n=1, names="['a:0']", k=2, needs="exactly 2 arguments")
    with pytest.raises(TypeError) as info:
        loops.while_loop(lambda total: True, lambda x: x, [a], infeed)
    assert str(info.value) == BODY_INFEED_ERROR.format(
        n=1, names="['a:0']", k=2, needs="exactly 1 argument")


def test_body_arity_counts_self_as_the_sdk_does(graph):
    """XLA's check_function_argument_count (the SDK's) reads TensorFlow's
    tf_inspect.getargspec, which counts ``self`` for a bound method and an object's
    __call__: the SDK refuses a method as a loop body; a partial's bound arguments are not
    counted."""
    class Step:
        def body(self, total, x):
            return total + x

        def __call__(self, total, x):
            return total + x

    a = tf.constant(1.0, name="a")
    for body in (Step().body, Step()):
        with pytest.raises(TypeError) as info:
            loops.repeat(2, body, [a, a])
        assert str(info.value) == BODY_ERROR.format(n=2, names="['a:0', 'a:0']",
                                                    needs="exactly 3 arguments")
    added = loops.repeat(2, functools.partial(lambda scale, total: total * scale, 2.0), [a])
    assert added.shape == ()


def test_condition_arity(graph):
    a = tf.constant(1.0, name="a")
    with pytest.raises(TypeError) as info:
        loops.while_loop(lambda: True, lambda x: x, [a])
    assert str(info.value) == CONDITION_ERROR.format(n=1, names="['a:0']",
                                                     needs="exactly 0 arguments")
    with pytest.raises(TypeError) as info:
        loops.while_loop(lambda x, y: True, lambda x: x, [a])
    assert str(info.value) == CONDITION_ERROR.format(n=1, names="['a:0']",
                                                     needs="exactly 2 arguments")


def test_condition_arity_with_infeed_notes_that_infeed_is_not_passed(graph):
    infeed = make_infeed(np.float32(1.0))
    a = tf.constant(1.0, name="a")
    # The body takes the infeed element; the condition wrongly expects it too.
    with pytest.raises(TypeError) as info:
        loops.while_loop(lambda total, x: True, lambda total, x: total + x, [a], infeed)
    assert str(info.value) == CONDITION_ERROR.format(
        n=1, names="['a:0']", needs="exactly 2 arguments") + (
        " Note that infeed is not passed to the loop condition.")


# --- body results ----------------------------------------------------------------------

def test_body_returning_op_before_tensor_is_rejected(graph):
    def body(x):
        return tf.no_op(), x + 1.0

    with pytest.raises(ValueError) as info:
        loops.repeat(2, body, [1.0])
    assert str(info.value) == ORDER_ERROR


def test_body_dtype_mismatch(graph):
    with pytest.raises(TypeError) as info:
        loops.repeat(2, lambda x, n: (x, tf.cast(n, tf.float32)), [1.0, 2])
    assert str(info.value) == (
        "Mismatch between input types and output types for loop body: "
        "[tf.float32, tf.int32] vs [tf.float32, tf.float32].")


def test_infeed_that_is_never_dequeued(graph, monkeypatch):
    infeed = make_infeed(np.float32(1.0))
    # A body that takes the element but a queue whose dequeue was bypassed.
    monkeypatch.setattr(infeed, "_dequeue", lambda: tf.constant(1.0))
    with pytest.raises(ValueError) as info:
        loops.repeat(2, lambda total, x: total + x, [0.0], infeed)
    assert str(info.value) == "The infeed queue has not been dequeued."


def test_body_ops_are_control_dependencies_of_the_carried_values(graph, sess):
    holder = {}

    def body(x):
        v = tf.compat.v1.get_variable("steps", initializer=0, use_resource=True)
        holder["v"] = v
        return x + 1.0, v.assign_add(1).op

    [out] = compile_on_ipu(lambda: loops.repeat(3, body, [0.0]))
    sess.run(tf.compat.v1.global_variables_initializer())
    assert sess.run(out) == 3.0
    assert sess.run(holder["v"]) == 3


# --- return conventions -----------------------------------------------------------------

def test_return_convention(graph, sess):
    holder = {}

    def counting_body():
        v = tf.compat.v1.get_variable("calls", initializer=0, use_resource=True)
        holder["v"] = v
        return v.assign_add(1).op

    def no_inputs():
        result = loops.repeat(4, counting_body)
        holder["no_inputs"] = result
        return result

    op = compile_on_ipu(no_inputs)
    assert isinstance(holder["no_inputs"], tf.Operation)
    assert isinstance(op, tf.Operation)

    one = loops.repeat(2, lambda x: x * 2.0, [1.0])
    assert isinstance(one, tf.Tensor)
    one_scalar = loops.repeat(2, lambda x: x * 2.0, 1.0)  # a non-list input is wrapped
    assert isinstance(one_scalar, tf.Tensor)
    several = loops.repeat(2, lambda x, y: (x + 1, y * 2.0), [0, 1.0])
    assert isinstance(several, list) and len(several) == 2

    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(op)
    assert sess.run(holder["v"]) == 4
    sess.run(op)
    assert sess.run(holder["v"]) == 8  # variables are not re-initialised by a run
    assert sess.run([one, one_scalar]) == [4.0, 4.0]
    assert sess.run(several) == [2, 4.0]


def test_repeat_with_placeholder_count(graph, sess):
    n = tf.compat.v1.placeholder(tf.int32, [])
    [out] = compile_on_ipu(lambda: loops.repeat(n, lambda x: x + 1.0, [0.0]))
    assert sess.run(out, {n: 3}) == 3.0
    assert sess.run(out, {n: 11}) == 11.0
    assert [r.iterations for r in record.last_runs(2).runs] == [3, 11]


def test_while_loop_with_a_real_condition_records_its_trip_count(graph, sess):
    limit = tf.compat.v1.placeholder(tf.float32, [])

    def cond(i, total):
        return total < limit

    def body(i, total):
        return i + 1, total + 2.5

    [i, total] = compile_on_ipu(lambda: loops.while_loop(cond, body, [0, 0.0]))
    with record.capture() as runs:
        assert sess.run([i, total], {limit: 10.0}) == [4, 10.0]
        assert sess.run([i, total], {limit: 1.0}) == [1, 2.5]
    assert [r.iterations for r in runs.runs] == [4, 1]


def test_while_loop_maximum_iterations_caps_the_trip_count(graph, sess):
    [out] = compile_on_ipu(
        lambda: loops.while_loop(lambda x: x < 100.0, lambda x: x + 1.0, [0.0],
                                 maximum_iterations=6))
    with record.capture() as runs:
        assert sess.run(out) == 6.0
    assert runs.runs[0].iterations == 6


# --- numerics: the loop runs exactly the same steps as step-by-step training -------------

def test_repeat_with_infeed_trains_exactly_like_one_run_per_step(graph, sess, regression):
    infeed = ipu_infeed_queue.IPUInfeedQueue(regression.dataset())
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue()

    def body(total, x, y):
        loss, train = regression.model(x, y)
        return total + loss, outfeed.enqueue(loss), train

    [total] = compile_on_ipu(lambda: loops.repeat(regression.steps, body, [0.0], infeed))
    losses_op = outfeed.dequeue()
    w, b = regression.variables(graph)

    sess.run(infeed.initializer)
    sess.run(tf.compat.v1.global_variables_initializer())
    with record.capture() as runs:
        loop_total = sess.run(total)
    assert runs.engine_runs == 1 and runs.runs[0].iterations == regression.steps
    loop_losses = sess.run(losses_op)
    loop_w, loop_b = sess.run([w, b])

    step_losses, step_w, step_b = regression.step_by_step()
    assert not np.array_equal(loop_w, regression.w0), "training changed nothing"
    np.testing.assert_array_equal(loop_w, step_w)
    np.testing.assert_array_equal(loop_b, step_b)
    np.testing.assert_array_equal(loop_losses, np.array(step_losses))
    assert loop_total == pytest.approx(sum(step_losses), rel=1e-6)


def test_loop_that_runs_no_iterations_records_zero(graph, sess):
    n = tf.compat.v1.placeholder(tf.int32, [])
    [out] = compile_on_ipu(lambda: loops.repeat(n, lambda x: x + 1.0, [5.0]))
    [never] = compile_on_ipu(
        lambda: loops.while_loop(lambda x: x < 0.0, lambda x: x + 1.0, [5.0]))
    with record.capture() as runs:
        assert sess.run(out, {n: 0}) == 5.0
        assert sess.run(never) == 5.0
    assert [r.iterations for r in runs.runs] == [0, 0]
