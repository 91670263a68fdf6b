"""runtime.graph_costs: per-iteration FLOPs read off the graph, and what engine runs record."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_compiler, ipu_infeed_queue, loops, scopes
from ipu_emulator.runtime import graph_costs

IPU = "/device:IPU:0"
BATCH, IN, OUT = 8, 16, 4
DENSE_MATMUL = 2 * BATCH * IN * OUT


# --- op_flops, exact ---------------------------------------------------------------------

def test_matmul_flops(graph):
    a = tf.zeros([BATCH, IN])
    b = tf.zeros([IN, OUT])
    assert graph_costs.op_flops(tf.matmul(a, b).op) == DENSE_MATMUL
    at = tf.zeros([IN, BATCH])
    assert graph_costs.op_flops(tf.matmul(at, b, transpose_a=True).op) == DENSE_MATMUL
    bt = tf.zeros([OUT, IN])
    assert graph_costs.op_flops(tf.matmul(a, bt, transpose_b=True).op) == DENSE_MATMUL
    batched = tf.matmul(tf.zeros([3, BATCH, IN]), tf.zeros([3, IN, OUT]))
    assert graph_costs.op_flops(batched.op) == 3 * DENSE_MATMUL


def test_conv2d_flops(graph):
    images = tf.zeros([2, 8, 8, 3])
    kernel = tf.zeros([3, 3, 3, 4])
    same = tf.nn.conv2d(images, kernel, strides=1, padding="SAME")
    assert same.op.type == "Conv2D"
    assert graph_costs.op_flops(same.op) == 2 * (2 * 8 * 8 * 4) * (3 * 3 * 3)  # 27648
    valid = tf.nn.conv2d(images, kernel, strides=2, padding="VALID")
    assert valid.shape.as_list() == [2, 3, 3, 4]
    assert graph_costs.op_flops(valid.op) == 2 * (2 * 3 * 3 * 4) * (3 * 3 * 3)  # 3888


def test_conv2d_gradients_cost_as_much_as_the_forward_op(graph):
    images = tf.zeros([2, 8, 8, 3])
    kernel = tf.Variable(tf.zeros([3, 3, 3, 4]))
    out = tf.nn.conv2d(images, kernel, strides=1, padding="SAME")
    [grad_images, grad_kernel] = tf.gradients(tf.reduce_sum(out), [images, kernel])
    forward = graph_costs.op_flops(out.op)
    assert grad_images.op.type == "Conv2DBackpropInput"
    assert grad_kernel.op.type == "Conv2DBackpropFilter"
    assert graph_costs.op_flops(grad_images.op) == forward
    assert graph_costs.op_flops(grad_kernel.op) == forward
    assert graph_costs.phase_of(grad_kernel.op) == "backward"
    assert graph_costs.phase_of(out.op) == "forward"


def test_free_and_elementwise_ops(graph):
    x = tf.zeros([BATCH, OUT])
    assert graph_costs.op_flops(tf.identity(x).op) == 0
    assert graph_costs.op_flops(tf.reshape(x, [-1]).op) == 0
    assert graph_costs.op_flops((x + 1.0).op) == BATCH * OUT
    assert graph_costs.op_flops(tf.reduce_sum(x).op) == BATCH * OUT


# --- a Dense layer trained in a loop: what the engine run records -------------------------

def dense_program(with_optimizer):
    data = (np.ones([BATCH, IN], np.float32), np.ones([BATCH, OUT], np.float32))
    infeed = ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors(data).repeat())

    def body(total, x, y):
        loss = tf.reduce_mean(tf.square(tf.keras.layers.Dense(OUT)(x) - y))
        if not with_optimizer:
            return total + loss
        train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
        return total + loss, train

    with scopes.ipu_scope(IPU):
        [out] = ipu_compiler.compile(lambda: loops.repeat(3, body, [0.0], infeed))
    return infeed, out


def run_once(graph, infeed, out):
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(infeed.initializer)
        sess.run(tf.compat.v1.global_variables_initializer())
        with record.capture() as runs:
            sess.run(out)
    [run] = runs.runs
    return run


def test_dense_training_step_cost(graph):
    infeed, out = dense_program(with_optimizer=True)
    forward_matmuls = [op for op in graph.get_operations()
                       if op.type == "MatMul" and graph_costs.phase_of(op) == "forward"]
    assert [graph_costs.op_flops(op) for op in forward_matmuls] == [DENSE_MATMUL]

    run = run_once(graph, infeed, out)
    assert run.iterations == 3
    cost = run.step_cost  # per iteration, not per run
    # The forward pass is the MatMul plus a few element-wise ops on [BATCH, OUT] values.
    assert DENSE_MATMUL <= cost.forward_flops <= DENSE_MATMUL + 8 * BATCH * OUT
    # The backward pass has the weight-gradient MatMul (same size) at least.
    assert cost.backward_flops >= DENSE_MATMUL
    # Plain SGD: 2 FLOPs per parameter.
    assert cost.weight_update_flops == 2 * (IN * OUT + OUT)
    assert cost.parameter_bytes == 4 * (IN * OUT + OUT)
    assert cost.total_flops == pytest.approx(
        cost.forward_flops + cost.backward_flops + cost.weight_update_flops)


def test_dense_inference_has_no_backward_or_update(graph):
    infeed, out = dense_program(with_optimizer=False)
    cost = run_once(graph, infeed, out).step_cost
    assert DENSE_MATMUL <= cost.forward_flops <= DENSE_MATMUL + 8 * BATCH * OUT
    assert cost.backward_flops == 0
    assert cost.weight_update_flops == 0


def test_program_cost_counts_the_loop_body_once(graph):
    """Per-iteration cost is the same whatever the trip count."""
    def body(x):
        return tf.matmul(x, tf.ones([IN, IN]))

    with scopes.ipu_scope(IPU):
        [short] = ipu_compiler.compile(
            lambda: loops.repeat(2, body, [tf.ones([BATCH, IN])]))
        [long] = ipu_compiler.compile(
            lambda: loops.repeat(50, body, [tf.ones([BATCH, IN])]))
    with tf.compat.v1.Session(graph=graph) as sess, record.capture() as runs:
        sess.run(short)
        sess.run(long)
    a, b = runs.runs
    assert (a.iterations, b.iterations) == (2, 50)
    assert a.step_cost == b.step_cost
    # The MatMul, plus a couple of scalar loop-counter increments.
    assert 2 * BATCH * IN * IN <= a.step_cost.forward_flops <= 2 * BATCH * IN * IN + 4


# --- gradient accumulation: accumulators are memory, not gradients or activations ---------

def accumulating_program(optimizer):
    data = (np.ones([BATCH, IN], np.float32), np.ones([BATCH, OUT], np.float32))
    infeed = ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors(data).repeat())

    def body(x, y):
        loss = tf.reduce_mean(tf.square(tf.keras.layers.Dense(OUT)(x) - y))
        return optimizer().minimize(loss)

    with scopes.ipu_scope(IPU):
        ipu_compiler.compile(lambda: loops.repeat(4, body, [], infeed))
    return graph_costs.program_cost(tf.compat.v1.get_default_graph().get_operations())


def test_accumulators_are_resident_but_hold_no_gradient_and_no_activation():
    from ipu_emulator.ipu import optimizers
    weight_bytes = 4 * (IN * OUT + OUT)
    sgd = lambda: tf.compat.v1.train.GradientDescentOptimizer(0.01)  # noqa: E731
    with tf.Graph().as_default():
        plain = accumulating_program(sgd)
    with tf.Graph().as_default():
        accumulating = accumulating_program(
            lambda: optimizers.GradientAccumulationOptimizerV2(sgd(), 2))
    assert plain.gradient_bytes == accumulating.gradient_bytes == weight_bytes
    # one accumulator per weight (plus the optimizer's small counter) is extra memory...
    assert accumulating.parameter_bytes - plain.parameter_bytes >= weight_bytes
    # ...but adding a gradient into it is backward work, not an activation kept for later
    # (only the mini-batch counter's scalar bookkeeping is left on the forward side)
    assert 0 <= accumulating.activation_bytes - plain.activation_bytes <= 16
    assert accumulating.backward_flops > plain.backward_flops


def test_a_step_without_optimizer_kernels_counts_a_gradient_per_parameter():
    cost = record.ComputeCost(backward_flops=1.0, parameter_bytes=100, activation_bytes=7)
    assert cost.gradients_held() == 100
    assert record.ComputeCost(parameter_bytes=100).gradients_held() == 0  # inference
    assert record.ComputeCost(backward_flops=1.0, parameter_bytes=100,
                              gradient_bytes=40).gradients_held() == 40


# --- the fixed cost of each op (hardware.OP_CYCLES) ------------------------------------------

def tutorial_mlp_training_step(batch=32):
    """The tutorial MLP's forward pass, gradients and plain SGD, as tf.layers build them."""
    images = tf.zeros([batch, 28, 28])
    labels = tf.zeros([batch], tf.int32)
    x = tf.reshape(images, [batch, 784])
    for units in (256, 128, 64, 32):
        x = tf.compat.v1.layers.dense(x, units, activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(x, 10)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)


def test_op_cycles_of_a_recorded_step_agree_with_the_layer_model(graph):
    from ipu_emulator.sim import hardware
    from ipu_emulator.sim.builtin_models import builtin_model
    from ipu_emulator.sim.cost_model import stage_costs
    tutorial_mlp_training_step()
    # The step's ops, without the variables' creation and initial values.
    step = [op for op in graph.get_operations()
            if "Initializer" not in op.name and op.type not in ("VariableV2", "Assign")]
    recorded = graph_costs.program_cost(step).phase_op_cycles
    [modelled] = stage_costs(builtin_model("tutorial-mlp"), [], batch_size=32)
    cycles = hardware.OP_CYCLES
    assert recorded[0] == modelled.op_cycles[0]  # the same forward ops
    # Backward: tf.gradients also builds the first layer's unused input gradient (a matmul),
    # and without gradient accumulation there are no accumulator adds (one per variable).
    assert recorded[1] == modelled.op_cycles[1] + cycles["matmul"] - 10 * cycles["variable"]
    assert recorded[2] == modelled.op_cycles[2] == 10 * cycles["variable"]  # 10 SGD kernels


def test_op_kinds(graph):
    a, b = tf.zeros([BATCH, IN]), tf.zeros([IN, OUT])
    logits = tf.matmul(a, b)
    biased = tf.nn.bias_add(logits, tf.zeros([OUT]))
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros([BATCH], tf.int32),
                                                          logits=biased)
    kinds = [graph_costs.op_kind(t.op) for t in (logits, tf.nn.relu(biased), loss,
                                                 tf.reduce_mean(loss))]
    assert kinds == ["matmul", "elementwise", "loss", "reduction"]
    accumulator = tf.Variable(tf.zeros([OUT]))
    add = tf.add(accumulator.read_value(), tf.ones([OUT]))
    accumulator.assign(add)
    assert graph_costs.op_kind(add.op) == "variable"  # summed back into a variable
