"""ipu_compiler.compile and ipu_scope (Graphcore's TensorFlow API reference,
``ipu.ipu_compiler`` and ``ipu.scopes``)."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import config, ipu_compiler, scopes
from ipu_emulator.runtime import programs

IPU = "/device:IPU:0"

MIXED_ORDER = ("XLA computation function must return zero or more Tensor values followed by "
               "zero or more Operations.")
NOT_PLACED = ("A computation has been compiled, however it was not placed on an IPU device. "
              "This computation will not be executed on an IPU.")


def compile_on_ipu(computation, inputs=None):
    with scopes.ipu_scope(IPU):
        return ipu_compiler.compile(computation, inputs=inputs)


def resource_variable(name, value):
    return tf.compat.v1.get_variable(name, initializer=tf.constant(value), use_resource=True)


# --- return conventions ---------------------------------------------------------------

def test_single_tensor_becomes_one_element_list(graph, sess):
    x = tf.compat.v1.placeholder(tf.float32, [2])
    result = compile_on_ipu(lambda a: a * 2.0, [x])
    assert isinstance(result, list) and len(result) == 1
    [out] = result
    assert isinstance(out, tf.Tensor)
    np.testing.assert_allclose(sess.run(out, {x: [1.0, 2.0]}), [2.0, 4.0])


def test_flat_list_of_tensors_is_a_list_in_order(graph, sess):
    result = compile_on_ipu(lambda a, b: (a + b, a - b, a * b), [3.0, 2.0])
    assert isinstance(result, list) and len(result) == 3
    assert sess.run(result) == [5.0, 1.0, 6.0]


def test_ops_only_or_none_gives_one_operation(graph, sess):
    def ops_only():
        v = resource_variable("v", 1.0)
        return v.assign_add(1.0).op

    op = compile_on_ipu(ops_only)
    assert isinstance(op, tf.Operation)

    def returns_none():
        tf.constant(1.0) + 1.0

    op_none = compile_on_ipu(returns_none)
    assert isinstance(op_none, tf.Operation)

    with graph.as_default():
        with tf.compat.v1.variable_scope("", reuse=True):
            v = tf.compat.v1.get_variable("v", use_resource=True)
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(op)
    sess.run(op)
    sess.run(op_none)
    assert sess.run(v) == 3.0


def test_ops_after_tensors_become_control_dependencies(graph, sess):
    counter = {}

    def step(x):
        v = resource_variable("counter", 0.0)
        counter["v"] = v
        update = v.assign_add(1.0).op
        return x * 10.0, update

    result = compile_on_ipu(step, [1.5])
    assert isinstance(result, list) and len(result) == 1, "the op is not returned"
    [out] = result
    sess.run(tf.compat.v1.global_variables_initializer())
    assert sess.run(out) == 15.0          # fetch only the tensor...
    assert sess.run(out) == 15.0
    assert sess.run(counter["v"]) == 2.0  # ...and the update ran each time


def test_tensor_after_op_is_rejected(graph):
    def bad():
        v = resource_variable("w", 0.0)
        return v.assign_add(1.0).op, tf.constant(1.0)

    with pytest.raises(ValueError) as info:
        compile_on_ipu(bad)
    assert str(info.value) == MIXED_ORDER


def test_nested_dict_result_keeps_structure(graph, sess):
    def comp(a, b):
        return {"sum": a + b, "pair": (a * b, a - b)}

    result = compile_on_ipu(comp, [3.0, 2.0])
    assert isinstance(result, dict) and set(result) == {"sum", "pair"}
    assert isinstance(result["pair"], tuple) and len(result["pair"]) == 2
    values = sess.run(result)
    assert values == {"sum": 5.0, "pair": (6.0, 1.0)}


def test_operation_in_nested_result_is_rejected(graph):
    def comp():
        v = resource_variable("n", 0.0)
        op = v.assign_add(1.0).op
        return {"x": tf.constant(1.0), "update": op}

    with pytest.raises(ValueError) as info:
        compile_on_ipu(comp)
    message = str(info.value)
    assert message.startswith(
        "xla.compile does not support Operation as return value in non-flat output "
        "structure. You can set returned Operations as control dependencies of returned "
        "Tensors so Operations are triggered when Tensors are evaluated. Operation found: \"")
    assert message.endswith('"') and "AssignAddVariableOp" in message


def test_unconvertible_return_value_is_rejected(graph):
    with pytest.raises(ValueError) as info:
        compile_on_ipu(lambda: object())
    assert str(info.value).startswith(
        "XLA computation function return values must all either be Operations or "
        'convertible to Tensors. Got error: "')


def test_inputs_must_be_a_list(graph):
    with pytest.raises(TypeError) as info:
        compile_on_ipu(lambda a: a, inputs=tf.constant(1.0))
    assert str(info.value) == "inputs must be a list"


def test_tuple_inputs_and_nested_inputs_are_accepted(graph, sess):
    [out] = compile_on_ipu(lambda a, pair: a + pair[0] * pair[1], (1.0, [2.0, 3.0]))
    assert sess.run(out) == 7.0


def test_compile_outside_ipu_scope_raises(graph):
    with pytest.raises(Exception) as info:
        ipu_compiler.compile(lambda: tf.constant(1.0) + 1.0, [])
    assert str(info.value).startswith(NOT_PLACED)
    assert "ipu_scope" in str(info.value)


def test_compile_under_a_cpu_scope_raises(graph):
    with pytest.raises(Exception) as info:
        with scopes.ipu_scope("/device:CPU:0"):
            ipu_compiler.compile(lambda: tf.constant(1.0) + 1.0, [])
    assert str(info.value).startswith(NOT_PLACED)


def test_compile_under_a_plain_ipu_device_scope_builds_an_ipu_program(graph, sess):
    # The SDK accepts any IPU device scope: compile checks that the ops it built are on a
    # device of type IPU (Graphcore's TensorFlow source, tensorflow/python/ipu/
    # ipu_compiler.py, compile; pipelining_ops.pipeline's docstring compiles under
    # ops.device("/device:IPU:0")).
    with tf.device("cpu"):
        x = tf.compat.v1.placeholder(tf.float32, [2])

    def step(a):
        weight = tf.compat.v1.get_variable("w", initializer=tf.constant(3.0))
        return a * weight

    with tf.compat.v1.variable_scope("model"), tf.device("/device:IPU:0"):
        [out] = ipu_compiler.compile(step, [x])
        assert scopes.current_ipu_ordinal() is None  # the device scope is the user's
    [weight] = tf.compat.v1.global_variables()
    assert weight.name == "model/w:0" and "ResourceVariable" in type(weight).__name__
    sess.run(tf.compat.v1.global_variables_initializer())
    np.testing.assert_allclose(sess.run(out, {x: [1.0, 2.0]}), [3.0, 6.0])
    [run] = record.last_runs(1).runs  # one engine run of this program
    assert run.program == programs.registry(graph).program_by_fetch[out.name].name


def test_a_device_scope_inside_the_ipu_one_decides(graph):
    with tf.device("/device:IPU:0"), tf.device("/device:CPU:0"):
        with pytest.raises(Exception) as info:
            ipu_compiler.compile(lambda: tf.constant(1.0) + 1.0, [])
    assert str(info.value).startswith(NOT_PLACED)
    with tf.device("/device:CPU:0"), tf.device("/device:IPU:0"):
        assert isinstance(ipu_compiler.compile(lambda: tf.constant(1.0) + 1.0, []), list)


def configure_one_ipu(connection_type):
    """One Mk2 IPU, reached through ``connection_type``."""
    cfg = config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.device_connection.type = connection_type
    cfg.device_connection.version = "ipu2"
    cfg.configure_ipu_system()


def test_never_connected_device_refuses_to_run_a_program(fresh_ipu_system, graph):
    # DeviceConnectionType.NEVER compiles only: executing the program is an InvalidArgument
    # error (Graphcore's TensorFlow source, tensorflow/compiler/plugin/poplar/driver/
    # poplar_executable.cc, PoplarExecutable::ExecuteAsyncOnStream).
    configure_one_ipu(config.DeviceConnectionType.NEVER)
    x = tf.compat.v1.placeholder(tf.float32, [2])
    with scopes.ipu_scope(IPU):
        [out] = ipu_compiler.compile(lambda a: a * 2.0, [x])
    with tf.compat.v1.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run(out, {x: [1.0, 2.0]})
        assert sess.run(x, {x: [1.0, 2.0]}).tolist() == [1.0, 2.0]  # host ops still run
    assert info.value.message == ("Trying to run an executable on a device that was "
                                  "configured for compilation only.")


def test_ipu_scope_makes_resource_variables(graph):
    with scopes.ipu_scope(IPU):
        v = tf.compat.v1.get_variable("r", shape=[2])
        assert scopes.current_ipu_ordinal() == 0
    assert scopes.current_ipu_ordinal() is None
    assert "ResourceVariable" in type(v).__name__


def test_contrib_era_ops_ipu_scope_is_the_same_scope():
    from ipu_emulator.ipu import ops
    assert ops.ipu_scope is scopes.ipu_scope


def test_pre_compile_executions_return_zeros_and_change_nothing(fresh_ipu_system, graph):
    configure_one_ipu(config.DeviceConnectionType.PRE_COMPILE)
    weight = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.ones_initializer(),
                                       use_resource=True)

    def step(x):
        loss = tf.reduce_sum(x * weight)
        with tf.control_dependencies([weight.assign_add(1.0)]):
            return [tf.identity(loss), tf.fill([2, 3], 7.0)]

    x = tf.compat.v1.placeholder(tf.float32, [4])
    with scopes.ipu_scope("/device:IPU:0"):
        loss, block = ipu_compiler.compile(step, [x])
    with tf.compat.v1.Session() as sess:
        sess.run(weight.initializer)
        result = sess.run({"loss": loss, "block": block, "host": weight.read_value()},
                          {x: np.ones(4, np.float32)})
        assert sess.run(weight) == 1.0  # the program never ran
    assert result["loss"] == 0.0 and result["loss"].dtype == np.float32
    np.testing.assert_array_equal(result["block"], np.zeros((2, 3), np.float32))
    assert result["host"] == 1.0  # fetches outside the program run as usual


def ops_run(sess, fetch):
    """The names and types of the ops a run of ``fetch`` executed (its partition graphs)."""
    metadata = tf.compat.v1.RunMetadata()
    sess.run(fetch, options=tf.compat.v1.RunOptions(output_partition_graphs=True),
             run_metadata=metadata)
    return {(node.name, node.op) for part in metadata.partition_graphs for node in part.node}


def test_a_program_of_ops_runs_its_updates_and_no_read_nobody_asked_for(graph, sess):
    # The program's sinks, run at every run, leave out the read and the is-initialised
    # check TensorFlow makes with each variable: they would read every weight each time.
    def step():
        used = resource_variable("used", 1.0)
        resource_variable("unused", 5.0)
        used.assign_add(1.0)

    program = compile_on_ipu(step)
    sess.run(tf.compat.v1.global_variables_initializer())
    ran = ops_run(sess, program)
    assert any(kind == "AssignAddVariableOp" for _, kind in ran)
    assert not any(kind == "VarIsInitializedOp" for _, kind in ran), sorted(ran)
    assert not any(name.startswith(("used/Read", "unused/")) for name, _ in ran), sorted(ran)
    with graph.as_default(), tf.compat.v1.variable_scope("", reuse=True):
        used = tf.compat.v1.get_variable("used", use_resource=True)
    assert sess.run(used) == 2.0
