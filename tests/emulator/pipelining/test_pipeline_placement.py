"""Where a pipeline's bookkeeping runs: each weight's gradient accumulator is added to, read,
cleared and applied on the device of the stage that owns the weight, and the last stage's
results are outfed from its own device.  Anything else makes tensors cross between the
CPU devices standing for the IPUs on every micro-batch, which costs host time."""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

from ipu_emulator import ipu
from ipu_emulator.ipu.ops import pipelining_ops
from tests.support.variable_users import handle_users

BATCH, FEATURES = 4, 6
X = np.random.RandomState(0).randn(BATCH * 8, FEATURES).astype(np.float32)
Y = (np.arange(BATCH * 8) % 3).astype(np.int32)


pytestmark = pytest.mark.usefixtures("two_ipus")  # see conftest.py


def layers(name, x, widths):
    """``len(widths)`` dense layers, each with its own weight (more layers: more weights)."""
    for k, width in enumerate(widths):
        w = tf.compat.v1.get_variable("%s%d" % (name, k), [x.shape[-1], width],
                                      initializer=tf.compat.v1.glorot_uniform_initializer(seed=k))
        x = tf.matmul(x, w)
    return x


def build(graph, layers_per_stage):
    with graph.as_default():
        data = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(BATCH, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def first(x, y):
            return tf.nn.relu(layers("first", x, [5] * layers_per_stage)), y

        def second(h, y):
            logits = layers("second", h, [5] * (layers_per_stage - 1) + [3])
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))

        def optimizer(loss):
            return pipelining_ops.OptimizerFunctionOutput(
                tf.compat.v1.train.MomentumOptimizer(0.01, 0.9), loss)

        def model():
            return pipelining_ops.pipeline([first, second], 4, repeat_count=2,
                                           infeed_queue=infeed, outfeed_queue=outfeed,
                                           optimizer_function=optimizer, outfeed_loss=True)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            program = ipu.ipu_compiler.compile(model)
        return program, infeed, outfeed.dequeue()


def accumulators(graph):
    return [v for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
            if v.op.name.endswith("_accumulator")]


def test_each_accumulator_is_used_only_on_its_own_stage_device(graph):
    build(graph, layers_per_stage=2)
    buffers = accumulators(graph)
    assert len(buffers) == 4
    for buffer in buffers:
        device = buffer.handle.op.device
        users = handle_users(buffer.handle, loop_only=True)
        kinds = {op.type for op in users}
        assert {"AssignAddVariableOp", "ReadVariableOp", "AssignVariableOp"} <= kinds
        assert {op.device for op in users} == {device}
        for op in users:  # what is added to or written into it comes from the same device
            for tensor in op.inputs[1:]:
                assert tensor.op.device == device, (op.name, tensor.name)
    devices = {b.handle.op.device[-5:] for b in buffers}
    assert devices == {"CPU:0", "CPU:1"}


def test_the_outfeed_is_enqueued_on_the_last_stage_device(graph):
    build(graph, layers_per_stage=1)
    [enqueue] = [op for op in graph.get_operations() if op.type == "QueueEnqueueV2"]
    assert enqueue.device.endswith("CPU:1")


def cross_device_sends(layers_per_stage):
    """Send ops TensorFlow placed in the partitions of one run of the pipeline."""
    graph = tf.Graph()
    program, infeed, dequeue = build(graph, layers_per_stage)
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as sess:
        sess.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
        metadata = config_pb2.RunMetadata()
        sess.run(program, options=config_pb2.RunOptions(output_partition_graphs=True),
                 run_metadata=metadata)
        losses = sess.run(dequeue)
    assert len(metadata.partition_graphs) == 2 and losses.shape == (8,)
    return sum(node.op == "_Send" for part in metadata.partition_graphs for node in part.node)


def test_more_weights_do_not_make_more_tensors_cross_devices():
    # Per micro-batch only activations, their gradients, loop control and the predicate of
    # the weight update cross; nothing per weight.
    assert cross_device_sends(layers_per_stage=3) == cross_device_sends(layers_per_stage=1)
