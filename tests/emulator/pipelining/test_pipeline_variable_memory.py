"""What a recorded pipeline says about its variables: each stage's weights and optimizer
state apart (gradient accumulators left to the simulator), and the accumulators' element
size as built.  These drive the memory lessons of notebook 12: offloading the optimizer
state, and float16 accumulators."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu, record
from ipu_emulator.ipu.ops import pipelining_ops

BATCH = 4
X = np.random.RandomState(0).randn(BATCH * 8, 6).astype(np.float32)
Y = (np.arange(BATCH * 8) % 3).astype(np.int32)
# Trainable variables per stage: [6, 5] + [5] on stage 0, [5, 3] + [3] on stage 1.
STAGE_WEIGHT_BYTES = (4 * (6 * 5 + 5), 4 * (5 * 3 + 3))


pytestmark = pytest.mark.usefixtures("two_ipus")  # see conftest.py


def dense(name, x, width):
    w = tf.compat.v1.get_variable(name + "_w", [x.shape[-1], width],
                                  initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
    b = tf.compat.v1.get_variable(name + "_b", [width],
                                  initializer=tf.compat.v1.zeros_initializer())
    return tf.matmul(x, w) + b


def stage1(x, y):
    return tf.nn.relu(dense("first", x, 5)), y


def stage2(h, y):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=dense("second", h, 3)))


def run_pipeline(optimizer="momentum", **pipeline_kwargs):
    """One engine run of 4 micro-batches; returns the recorded run and the graph's
    accumulator variables."""
    graph = tf.Graph()
    with graph.as_default():
        data = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(BATCH, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def optimizer_function(loss):
            opt = (tf.compat.v1.train.MomentumOptimizer(0.01, 0.9) if optimizer == "momentum"
                   else tf.compat.v1.train.GradientDescentOptimizer(0.01))
            return pipelining_ops.OptimizerFunctionOutput(opt, loss)

        def model():
            return pipelining_ops.pipeline(
                [stage1, stage2], 4, infeed_queue=infeed, outfeed_queue=outfeed,
                optimizer_function=optimizer_function, outfeed_loss=True, **pipeline_kwargs)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            op = ipu.ipu_compiler.compile(model)
        accumulators = [v for v in tf.compat.v1.global_variables()
                        if "gradients_accumulation" in v.name]
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            with record.capture() as runs:
                sess.run(op)
    return runs.runs[0], accumulators


def test_stage_costs_separate_weights_from_optimizer_state():
    run, accumulators = run_pipeline("momentum")
    assert len(accumulators) == 4
    weights = tuple(stage.parameter_bytes for stage in run.stages)
    state = tuple(stage.optimizer_state_bytes for stage in run.stages)
    # The accumulators are not weights (the simulator adds them from the settings), and
    # each stage's momentum slots belong to that stage, not to the one that made them.
    assert weights == STAGE_WEIGHT_BYTES
    assert state == STAGE_WEIGHT_BYTES  # momentum keeps one slot per weight


def test_plain_sgd_has_no_optimizer_state():
    run, _ = run_pipeline("sgd")
    assert tuple(s.parameter_bytes for s in run.stages) == STAGE_WEIGHT_BYTES
    assert tuple(s.optimizer_state_bytes for s in run.stages) == (0, 0)


@pytest.mark.parametrize("dtype, element_bytes", [
    (None, 4), (tf.float16, 2), (np.float16, 2), ("float16", 2), (tf.float32, 4),
    (lambda variable: tf.float16, 2),
])
def test_accumulator_element_size_is_read_from_the_built_buffers(dtype, element_bytes):
    run, accumulators = run_pipeline(gradient_accumulation_dtype=dtype)
    assert {v.dtype.base_dtype.size for v in accumulators} == {element_bytes}
    assert run.pipeline.accumulation_dtype_bytes == element_bytes


def test_float16_accumulators_halve_the_simulated_accumulator_memory():
    wide, _ = run_pipeline()
    narrow, _ = run_pipeline(gradient_accumulation_dtype=tf.float16)
    wide_peak = record.ProgramRecord([wide]).simulate().metrics.peak_memory_bytes
    narrow_peak = record.ProgramRecord([narrow]).simulate().metrics.peak_memory_bytes
    assert set(wide_peak) == set(narrow_peak) == {0, 1}
    for ipu_index, stage in enumerate(wide.stages):
        # float32 accumulators take as many bytes as the weights; float16 half of that.
        assert wide_peak[ipu_index] - narrow_peak[ipu_index] == stage.parameter_bytes // 2


def test_offloading_weight_update_variables_streams_the_optimizer_state():
    resident, _ = run_pipeline()
    offloaded, _ = run_pipeline(offload_weight_update_variables=True)
    assert offloaded.pipeline.offload_weights and not resident.pipeline.offload_weights
    plain = record.ProgramRecord([resident]).simulate()
    streamed = record.ProgramRecord([offloaded]).simulate()
    for ipu_index, stage in enumerate(offloaded.stages):
        copies = [e for e in streamed.events_on("IPU%d" % ipu_index)
                  if "optimizer state" in e.name]
        assert [e.name.split(" (")[0] for e in copies] == ["load optimizer state",
                                                            "store optimizer state"]
        assert all(e.args["bytes"] == stage.optimizer_state_bytes > 0 for e in copies)
        assert (streamed.metrics.peak_memory_bytes[ipu_index]
                < plain.metrics.peak_memory_bytes[ipu_index])
    assert not any("optimizer state" in e.name for e in plain.events)
