"""``ipu.pipelining_ops.pipeline``: checks and messages (Graphcore's TensorFlow API reference and
user guide on pipelining), dataflow and numerics equal to plain gradient accumulation on one
device."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu, record
from ipu_emulator.ipu.ops import pipelining_ops
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod

PipelineSchedule = pipelining_ops.PipelineSchedule
BATCH, FEATURES, HIDDEN = 4, 3, 5
RNG = np.random.RandomState(0)
X = RNG.randn(64, FEATURES).astype(np.float32)
Y = RNG.randn(64, 1).astype(np.float32)
W1 = np.linspace(-1, 1, FEATURES * HIDDEN, dtype=np.float32).reshape(FEATURES, HIDDEN)
W2 = np.linspace(-1, 1, HIDDEN, dtype=np.float32).reshape(HIDDEN, 1)
LEARNING_RATE = 0.1


pytestmark = pytest.mark.usefixtures("two_ipus")  # see conftest.py


def dataset():
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True)


def stage1(lr, x, y):
    w1 = tf.compat.v1.get_variable("w1", initializer=tf.compat.v1.constant_initializer(W1),
                                   shape=W1.shape)
    return lr, tf.nn.relu(tf.matmul(x, w1)), y


def stage2(lr, hidden, y):
    w2 = tf.compat.v1.get_variable("w2", initializer=tf.compat.v1.constant_initializer(W2),
                                   shape=W2.shape)
    return lr, tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - y))


def sgd(lr, loss):
    return pipelining_ops.OptimizerFunctionOutput(
        tf.compat.v1.train.GradientDescentOptimizer(lr), loss)


def run_pipeline(graph, runs=1, feed_lr=LEARNING_RATE, **kwargs):
    """Build and run a pipeline; returns (dequeued outfeed per run, {variable: value})."""
    with graph.as_default():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset())
        outfeed = kwargs.pop("outfeed_queue", ipu.ipu_outfeed_queue.IPUOutfeedQueue())
        lr = tf.compat.v1.placeholder(tf.float32, [])
        arguments = dict(computational_stages=[stage1, stage2], gradient_accumulation_count=4,
                         inputs=[lr], infeed_queue=infeed, outfeed_queue=outfeed,
                         optimizer_function=sgd)
        arguments.update(kwargs)

        def model(rate):
            arguments["inputs"] = [rate] if arguments["inputs"] else arguments["inputs"]
            return pipelining_ops.pipeline(**arguments)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            op = ipu.ipu_compiler.compile(model, [lr])
        dequeue = outfeed.dequeue() if outfeed is not None else None
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(infeed.initializer)
            results = []
            for _ in range(runs):
                sess.run(op, {lr: feed_lr})
                if dequeue is not None:
                    results.append(sess.run(dequeue))
            values = {v.op.name: sess.run(v) for v in tf.compat.v1.global_variables()}
    return results, values


def plain_gradient_accumulation(micro_batches, accumulate):
    """The same model on one device without a pipeline: gradients of each micro-batch are
    computed by TensorFlow, summed, and applied every ``accumulate`` micro-batches."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [BATCH, FEATURES])
        y = tf.compat.v1.placeholder(tf.float32, [BATCH, 1])
        _, hidden, _ = stage1(None, x, y)
        _, loss = stage2(None, hidden, y)
        variables = tf.compat.v1.trainable_variables()
        grads = tf.gradients(loss, variables)
        sums = [tf.compat.v1.placeholder(tf.float32, v.shape) for v in variables]
        apply = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE).apply_gradients(
            list(zip(sums, variables)))
        losses = []
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            total = [np.zeros(v.shape, np.float32) for v in variables]
            for m in range(micro_batches):
                feed = {x: X[m * BATCH:(m + 1) * BATCH], y: Y[m * BATCH:(m + 1) * BATCH]}
                value, grad_values = sess.run([loss, grads], feed)
                losses.append(value)
                total = [t + g for t, g in zip(total, grad_values)]
                if (m + 1) % accumulate == 0:
                    sess.run(apply, dict(zip(sums, total)))
                    total = [np.zeros_like(t) for t in total]
            weights = {v.op.name: sess.run(v) for v in variables}
    return np.array(losses), weights


# --- numerics ---------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", list(PipelineSchedule))
def test_pipelined_training_equals_plain_gradient_accumulation(graph, schedule):
    outfed, weights = run_pipeline(graph, runs=2, repeat_count=2, outfeed_loss=True,
                                   pipeline_schedule=schedule)
    losses = np.concatenate(outfed)
    assert losses.shape == (16,)  # 2 runs x 2 passes x 4 micro-batches, one loss each
    expected_losses, expected_weights = plain_gradient_accumulation(16, 4)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
    for name in ("w1", "w2"):
        np.testing.assert_allclose(weights[name], expected_weights[name], rtol=1e-5, atol=1e-6)
    assert not np.allclose(weights["w1"], W1)  # it did train


def test_mean_reduction_is_the_sum_divided_by_the_count():
    _, summed = run_pipeline(tf.Graph(), outfeed_loss=True)
    for method in ("mean", GradientAccumulationReductionMethod.RUNNING_MEAN):
        _, averaged = run_pipeline(tf.Graph(), outfeed_loss=True, feed_lr=LEARNING_RATE * 4,
                                   reduction_method=method)
        np.testing.assert_allclose(averaged["w2"], summed["w2"], rtol=1e-5)


def test_stages_run_on_the_ipus_of_the_device_mapping(graph):
    run_pipeline(graph, device_mapping=[1, 0], outfeed_loss=True)
    by_name = {op.name: op for op in graph.get_operations()}
    first_matmul = next(op for name, op in by_name.items()
                        if op.type == "MatMul" and "gradients" not in name)
    assert first_matmul.device.endswith("CPU:1")  # stage 0 is mapped to IPU 1
    backward = [op for op in graph.get_operations()
                if op.type == "MatMul" and "gradients" in op.name]
    assert {op.device[-5:] for op in backward} == {"CPU:0", "CPU:1"}
    run = record.last_runs(1).runs[0]
    assert run.pipeline.device_mapping == (1, 0) and run.num_ipus == 2


# --- dataflow ---------------------------------------------------------------------------


def test_training_outfeeds_every_last_stage_output_per_micro_batch(graph):
    [outfed], _ = run_pipeline(graph, repeat_count=2)
    learning_rates, losses = outfed
    np.testing.assert_allclose(learning_rates, [LEARNING_RATE] * 8)
    assert losses.shape == (8,)


def test_outfeed_mask_drops_the_masked_outputs(graph):
    [outfed], _ = run_pipeline(graph, outfeed_mask=[True, False])
    assert len(outfed) == 1 and outfed[0].shape == (4,)


def test_accumulated_outfeed_is_enqueued_once_per_pass(graph):
    [summed], _ = run_pipeline(graph, repeat_count=2, outfeed_loss=True,
                               accumulate_outfeed=True)
    [each], _ = run_pipeline(tf.Graph(), repeat_count=2, outfeed_loss=True)
    assert summed.shape == (2,)
    np.testing.assert_allclose(summed, each.reshape(2, 4).sum(axis=1), rtol=1e-5)


def test_inference_outfeeds_the_last_stage_per_micro_batch(graph):
    def forward1(x, y):
        return x * 2.0, y

    def forward2(x, y):
        return {"prediction": tf.reduce_sum(x, axis=1), "target": y}

    [outfed], _ = run_pipeline(graph, computational_stages=[forward1, forward2], inputs=[],
                               optimizer_function=None, repeat_count=3)
    assert outfed["prediction"].shape == (12, BATCH)
    np.testing.assert_allclose(outfed["prediction"][0], X[:BATCH].sum(axis=1) * 2, rtol=1e-5)
    np.testing.assert_allclose(outfed["target"][1], Y[BATCH:2 * BATCH])


def test_dict_infeed_elements_are_keyword_arguments_of_stage_zero(graph):
    with graph.as_default():
        data = tf.data.Dataset.from_tensor_slices({"a": X, "b": Y}).batch(
            BATCH, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def first(b, a):
            return tf.reduce_sum(a) + tf.reduce_sum(b)

        def model():
            return pipelining_ops.pipeline([first, lambda total: total * 1.0], 2,
                                           infeed_queue=infeed, outfeed_queue=outfeed)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            op = ipu.ipu_compiler.compile(model)
        dequeue = outfeed.dequeue()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(infeed.initializer)
            sess.run(op)
            totals = sess.run(dequeue)
    expected = [X[i * BATCH:(i + 1) * BATCH].sum() + Y[i * BATCH:(i + 1) * BATCH].sum()
                for i in range(2)]
    np.testing.assert_allclose(totals, expected, rtol=1e-5)


# --- checks made when the pipeline is built, in the SDK's order ---------------------------


def _outfeed(mode=None):
    return ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(gradient_accumulation_count=None), ValueError,
     "gradient_accumulation_count must be specified."),
    (dict(gradient_accumulation_count=-1), ValueError,
     "gradient_accumulation_count must be >= 0."),
    (dict(gradient_accumulation_count=2 ** 31), ValueError,
     "gradient_accumulation_count must be < max int32."),
    (dict(reduction_method="mean", batch_serialization_iterations=2), ValueError,
     "batch_serialization_iterations != 1 is only supported when reduction_method is "
     "GradientAccumulationReductionMethod.SUM"),
    (dict(continuous_weight_updates=True), NotImplementedError,
     "Continuous weight updates are currently not supported."),
    (dict(pipeline_schedule="Grouped"), TypeError,
     "The given pipeline_schedule is not a member of the PipelineSchedule enumeration."),
    (dict(batch_serialization_iterations=2, pipeline_schedule=PipelineSchedule.Grouped),
     NotImplementedError, "Batch serialization is only supported with the `Sequential` schedule."),
    (dict(recomputation_mode=1), TypeError,
     "The given recomputation_mode is not a member of the RecomputationMode enumeration."),
    (dict(computational_stages=stage1), TypeError,
     "computational_stages argument needs to be a list or a tuple."),
    (dict(infeed_queue=object()), TypeError,
     "infeed_queue is not an instance of ipu_infeed_queue.IPUInfeedQueue"),
    (dict(outfeed_queue=[]), TypeError,
     "outfeed_queue is not an instance of ipu_outfeed_queue.IPUOutfeedQueue"),
    (dict(computational_stages=[stage1]), ValueError,
     "Pipeline requires at least two computational stages."),
    (dict(device_mapping=0), TypeError, "device_mapping argument needs to be a list or a tuple."),
    (dict(device_mapping=[0, 1, 2]), ValueError,
     "Each stage must be mapped to an IPU: 3 mappings != 2 stages"),
    (dict(device_mapping=[0, 0], pipeline_schedule=PipelineSchedule.Interleaved),
     NotImplementedError,
     "The pipelining schedule 'Interleaved' does not currently support multiple pipeline "
     "stages on the same device for training graphs. Please use a different pipeline "
     "schedule."),
    (dict(batch_serialization_iterations=2, pipeline_schedule=PipelineSchedule.Sequential,
          device_mapping=[0, 1]), NotImplementedError,
     "When using batch serialization, all the pipeline stages need to be mapped to a single "
     "IPU."),
    (dict(forward_propagation_stages_poplar_options={}), TypeError,
     "forward_propagation_stages_poplar_options must be a list or a tuple of "
     "PipelineStageOptions objects."),
    (dict(backward_propagation_stages_poplar_options=[pipelining_ops.PipelineStageOptions()]),
     ValueError, "backward_propagation_stages_poplar_options must be a list or a tuple of "
     "PipelineStageOptions objects of length 2 (same number as the number of computational "
     "stages) but is 1."),
    (dict(optimizer_function=None, outfeed_mask=[False]), ValueError,
     "An optimizer_function must be provided when outfeed_mask is set."),
    (dict(optimizer_function=None, outfeed_loss=True), ValueError,
     "An optimizer_function must be provided when outfeed_loss is True."),
    (dict(outfeed_loss=True, outfeed_mask=[True, False]), ValueError,
     "Only one of `outfeed_loss` and `outfeed_mask` can be set."),
    (dict(outfeed_queue=None, accumulate_outfeed=True), ValueError,
     "An outfeed_queue must be provided when accumulate_outfeed is True."),
    (dict(outfeed_queue=_outfeed(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST),
          accumulate_outfeed=True), ValueError,
     "To accumulate the outfeed, it must be in IPUOutfeedMode ALL."),
    (dict(outfeed_mask=[True]), ValueError,
     "The last computational stage has 2 outputs, but the `outfeed_mask` has elements 1 - "
     "these need to match in size."),
])
def test_python_side_checks_raise_the_sdk_messages(graph, kwargs, error, message):
    with graph.as_default():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset())
        arguments = dict(computational_stages=[stage1, stage2], gradient_accumulation_count=4,
                         inputs=[tf.constant(0.1)], infeed_queue=infeed,
                         outfeed_queue=_outfeed(), optimizer_function=sgd)
        arguments.update(kwargs)
        with pytest.raises(error) as raised:
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                ipu.ipu_compiler.compile(lambda: pipelining_ops.pipeline(**arguments))
    assert str(raised.value) == message


def test_last_stage_outputs_need_an_outfeed(graph):
    with graph.as_default(), pytest.raises(ValueError, match=(
            r"^The last computational stage has tensor outputs: Tensor\(.*, but no "
            r"outfeed_queue has been provided.$")):
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            ipu.ipu_compiler.compile(lambda: pipelining_ops.pipeline(
                [lambda: tf.constant(1.0), lambda x: x + 1], 2))


def test_stages_may_not_capture_tensors_from_outside(graph):
    with graph.as_default():
        outside = tf.constant(3.0, name="outside")
        with pytest.raises(ValueError) as raised:
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                ipu.ipu_compiler.compile(lambda: pipelining_ops.pipeline(
                    [lambda: outside * 2, lambda x: x + 1], 2, outfeed_queue=_outfeed()))
    assert str(raised.value) == (
        'Trying to capture the tensor Tensor("outside:0", shape=(), dtype=float32) which is '
        "not a resource. This tensor needs to be passed as either part of the `input` or "
        "`infeed_queue` of the pipeline.")


def test_optimizer_function_output_checks_its_arguments(graph):
    with graph.as_default():
        loss = tf.constant(1.0)
        with pytest.raises(TypeError, match="^OptimizerFunctionOutput.opt must be a "
                                            "TensorFlow Optimizer or Keras OptimizerV2 object.$"):
            pipelining_ops.OptimizerFunctionOutput("sgd", loss)
        with pytest.raises(TypeError, match="^OptimizerFunctionOutput.loss must be a "
                                            "TensorFlow Tensor object.$"):
            pipelining_ops.OptimizerFunctionOutput(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), 1.0)


# --- gradient accumulation count against the schedule, at the first run (6.5) -----------


@pytest.mark.parametrize("schedule, count, message", [
    (PipelineSchedule.Grouped, 6, "must be a multiple of 4, but it is 6"),
    (PipelineSchedule.Interleaved, 3, "must be a multiple of 2, but it is 3"),
    (PipelineSchedule.Grouped, 0, "must be at least 4, but it is 0"),
])
def test_counts_the_schedule_cannot_run_fail_at_the_first_run(graph, schedule, count, message):
    with pytest.raises(tf.errors.FailedPreconditionError) as raised:
        run_pipeline(graph, gradient_accumulation_count=count, pipeline_schedule=schedule,
                     outfeed_loss=True)
    assert raised.value.message == (
        "The number of iterations of the pipeline %s. This number might be called "
        "`gradient_accumulation_count`, `gradient_accumulation_steps_per_replica` or "
        "`steps_per_execution` depending on the API used." % message)


def test_sequential_accepts_any_positive_count(graph):
    outfed, _ = run_pipeline(graph, gradient_accumulation_count=3, outfeed_loss=True,
                             pipeline_schedule=PipelineSchedule.Sequential)
    assert outfed[0].shape == (3,)


def test_a_count_given_as_a_tensor_is_checked_when_it_runs(graph):
    with graph.as_default():
        count = tf.compat.v1.placeholder_with_default(4, [])
    outfed, _ = run_pipeline(graph, gradient_accumulation_count=count, outfeed_loss=True)
    assert outfed[0].shape == (4,)


def test_pipelining_ops_resolve_under_the_sdk_names():
    from ipu_emulator.cli import import_aliases
    import_aliases.install()
    try:
        import importlib
        module = importlib.import_module("tensorflow.python.ipu.ops.pipelining_ops")
        assert module.pipeline is pipelining_ops.pipeline
        assert ipu.pipelining_ops is pipelining_ops
        assert int(pipelining_ops.PipelineSchedule.Sequential) == 2
        assert pipelining_ops.PipelineStageOptions(matmul_options={"a": "1"}).matmul_options
    finally:
        import_aliases.uninstall()


# --- variable names ------------------------------------------------------------------------


def test_stage_variables_are_named_as_in_the_sdks_function_graphs(graph):
    # The SDK builds each stage as a function graph (Graphcore's TensorFlow source,
    # pipelining_ops._pipeline_stage -> functional_ops._compile_function), which starts at the
    # top-level name scope but shares the variable scope: tf.Variable and Keras weights lose
    # the scope pipeline() was called in, get_variable keeps it.
    def first(x, y):
        scale = tf.Variable(lambda: tf.ones([FEATURES]), name="scale")
        w = tf.compat.v1.get_variable("w", initializer=tf.compat.v1.constant_initializer(W1),
                                      shape=W1.shape)
        return tf.keras.layers.Dense(HIDDEN)(tf.matmul(x * scale, w)), y

    def second(hidden, y):
        return tf.reduce_mean(tf.square(hidden[:, :1] - y))

    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset())
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def model():
        with tf.compat.v1.variable_scope("vs", use_resource=True):
            return pipelining_ops.pipeline(
                [first, second], 4, infeed_queue=infeed, outfeed_queue=outfeed,
                optimizer_function=lambda loss: sgd(LEARNING_RATE, loss),
                outfeed_loss=True)

    with tf.device("/device:IPU:0"):
        op = ipu.ipu_compiler.compile(model, [])
    names = sorted(v.op.name for v in tf.compat.v1.trainable_variables())
    assert names == ["dense/bias", "dense/kernel", "scale", "vs/w"]
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        sess.run(op)
        assert np.isfinite(sess.run(outfeed.dequeue())).all()
