"""Float16 programs (runtime/float16.py): computed in float64, rounded to float16 where the
IPU stores float16, so they give the same bits on every host and keep float16's overflow,
underflow, loss-scaling and stochastic-rounding behaviour (Graphcore's half-precision training
tutorial; ``IPUConfig.floating_point_behaviour``, ``ipu.scopes.stochastic_rounding`` and
``ipu.scopes.partials_type`` in the SDK's API reference)."""
import re

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator.ipu import config, ipu_compiler, loops, scopes
from ipu_emulator.runtime import float16, programs

IPU = "/device:IPU:0"


def compile_on_ipu(computation, inputs=None):
    with scopes.ipu_scope(IPU):
        return ipu_compiler.compile(computation, inputs=inputs)


def program_of(graph, fetch):
    return programs.registry(graph).program_by_fetch[fetch.name]


def configure(esr=None):
    cfg = config.IPUConfig()
    cfg.auto_select_ipus = 1
    if esr is not None:
        cfg.floating_point_behaviour.esr = esr
    cfg.configure_ipu_system()


def conv_net(images, kernel, dense):
    x = tf.nn.relu(tf.nn.conv2d(images, kernel, [1, 1, 1, 1], "SAME"))
    return tf.matmul(tf.reshape(x, [x.shape[0], -1]), dense)


def conv_inputs(dtype):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 6, 6, 3)).astype(dtype),
            rng.standard_normal((3, 3, 3, 4)).astype(dtype),
            rng.standard_normal((144, 5)).astype(dtype))


def test_float16_program_computes_in_float64_and_rounds_to_float16(graph, sess):
    configure()
    values = conv_inputs(np.float16)
    [logits] = compile_on_ipu(conv_net, [tf.constant(v) for v in values])
    program = program_of(graph, logits)
    convs = [op for op in program.new_ops if op.type in ("Conv2D", "MatMul")]
    # What runs is float64, and marked as standing for float16; the float16 originals left.
    assert [op.get_attr("T") for op in convs] == [tf.float64, tf.float64]
    assert all(float16.is_marked(op) for op in convs)
    assert logits.dtype == tf.float16
    # Each op's result is its float64 result rounded to float32 and then to float16.
    as64 = [tf.constant(v.astype(np.float64)) for v in values]

    def rounded(wide):
        return tf.cast(tf.cast(wide, tf.float32), tf.float16)

    x = tf.cast(tf.nn.relu(rounded(tf.nn.conv2d(as64[0], as64[1], [1, 1, 1, 1], "SAME"))),
                tf.float64)
    expected = rounded(tf.matmul(tf.reshape(x, [2, -1]), as64[2]))
    got, want = sess.run([logits, expected])
    np.testing.assert_array_equal(got, want)
    # and agrees with TensorFlow's own float16 kernels to float16's precision.
    with float16.disabled():
        [native] = compile_on_ipu(conv_net, [tf.constant(v) for v in values])
    assert any(op.type == "Conv2D" and op.get_attr("T") == tf.float16
               for op in program_of(graph, native).new_ops)
    np.testing.assert_allclose(got.astype(np.float32), sess.run(native).astype(np.float32),
                               rtol=1e-2, atol=1e-2)


def test_the_fast_setting_computes_in_float32(graph, sess, monkeypatch):
    configure()
    monkeypatch.setenv(float16.SPEED_SETTING, "fast")
    values = conv_inputs(np.float16)

    def net(images, kernel, dense):
        return tf.reduce_sum(conv_net(images, kernel, dense), axis=1)

    [sums] = compile_on_ipu(net, [tf.constant(v) for v in values])
    ops = [op for op in program_of(graph, sums).new_ops if float16.is_marked(op)]
    assert {op.type: op.get_attr("T") for op in ops if op.type in ("Conv2D", "MatMul", "Sum")} == {
        "Conv2D": tf.float32, "MatMul": tf.float32, "Sum": tf.float32}
    assert sess.run(sums).dtype == np.float16


def test_an_unknown_speed_setting_is_refused_with_the_accepted_values(graph, monkeypatch):
    configure()
    monkeypatch.setenv(float16.SPEED_SETTING, "quick")
    values = conv_inputs(np.float16)
    with pytest.raises(ValueError, match=re.escape(
            "IPU_EMULATOR_FLOAT16='quick': use 'exact' (the default: the same float16 bits on "
            "every host) or 'fast' (computed in float32)")):
        compile_on_ipu(conv_net, [tf.constant(v) for v in values])


@pytest.mark.parametrize("training, data_format", [(True, "NHWC"), (True, "NCHW"),
                                                    (False, "NHWC")])
def test_a_float16_batch_norm_written_out_agrees_with_tensorflows_fused_kernel(
        graph, sess, training, data_format):
    """The batch norm and its gradients, written out in float64, against TensorFlow's fused
    float32 kernel on the same float16 values: the same to float16's precision, the moving
    statistics (``exponential_avg_factor``) included."""
    configure()
    rng = np.random.default_rng(4)
    shape = (4, 6, 5, 3) if data_format == "NHWC" else (4, 3, 6, 5)
    x = rng.normal(2.0, 3.0, shape).astype(np.float16)
    scale, offset = rng.uniform(0.5, 2, 3).astype(np.float32), rng.normal(size=3).astype(np.float32)
    mean, variance = rng.normal(size=3).astype(np.float32), rng.uniform(1, 2, 3).astype(np.float32)
    dy = rng.normal(size=shape).astype(np.float16)

    def norm(x, scale, offset, mean, variance, dy):
        y, batch_mean, batch_variance = tf.compat.v1.nn.fused_batch_norm(
            x, scale, offset, mean, variance, data_format=data_format, is_training=training,
            exponential_avg_factor=0.25 if training else 1.0)
        grads = tf.gradients(y, [x, scale, offset], grad_ys=dy)
        return [y, batch_mean, batch_variance] + grads

    inputs = [x, scale, offset, mean, variance, dy]
    outputs = compile_on_ipu(norm, [tf.constant(v) for v in inputs])
    assert not [op for op in program_of(graph, outputs[0]).new_ops
                if op.type.startswith("FusedBatchNorm")]   # written out, gradient too
    emulated = sess.run(outputs)
    reference = sess.run(norm(*[tf.constant(v.astype(np.float32)) for v in inputs]))
    assert [value.dtype for value in emulated] == [np.float16, np.float32, np.float32,
                                                   np.float16, np.float32, np.float32]
    for got, want in zip(emulated, reference):
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_float16_overflows_to_inf_and_underflows_to_zero(graph, sess):
    configure()

    def computation(big, tiny, row, column):
        return big * big, tiny * tiny, tf.matmul(row, column), tf.reduce_sum(big * tiny)

    def inputs(dtype):
        return [tf.constant(300.0, dtype), tf.constant(1e-4, dtype),
                tf.ones([1, 512], dtype), tf.fill([512, 1], tf.constant(200.0, dtype))]

    square, underflow, dot, _ = sess.run(compile_on_ipu(computation, inputs(tf.float16)))
    assert np.isinf(square) and underflow == 0.0
    # The float32 partial sum (102400) fits; its float16 result does not.
    assert np.isinf(dot[0, 0])
    square, underflow, dot, _ = sess.run(compile_on_ipu(computation, inputs(tf.float32)))
    assert square == 90000.0 and underflow > 0 and dot[0, 0] == 102400.0


def test_loss_scaling_keeps_small_float16_gradients(graph, sess):
    configure()
    weights = tf.compat.v1.get_variable("w", initializer=tf.ones([8], tf.float16),
                                        use_resource=True)

    def gradient(scale):
        def computation():
            loss = tf.reduce_sum(weights * tf.constant(1e-4, tf.float16)) * tf.constant(
                1e-4, tf.float16)
            [grad] = tf.gradients(loss * tf.constant(scale, tf.float16), [weights])
            return tf.cast(grad, tf.float32) / scale  # unscaled in float32
        return compile_on_ipu(computation)[0]

    unscaled, scaled = gradient(1.0), gradient(1024.0)
    sess.run(tf.compat.v1.global_variables_initializer())
    # d loss / d w = 1e-8, below float16's smallest subnormal (6e-8 / 2): lost unscaled.
    np.testing.assert_array_equal(sess.run(unscaled), np.zeros(8))
    np.testing.assert_allclose(sess.run(scaled), np.full(8, 1e-8), rtol=0.01)


def sgd_steps(graph, steps=100, learning_rate=1e-4, override=None):
    """A float16 weight at 1.0, ``steps`` SGD steps each smaller than half a float16 step."""
    tf.compat.v1.set_random_seed(3)
    weight = tf.compat.v1.get_variable("weight", initializer=tf.ones([64], tf.float16),
                                       use_resource=True)

    def body():
        loss = tf.reduce_sum(weight)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(
            tf.constant(learning_rate, tf.float16))
        if override is None:
            return optimizer.minimize(loss)
        with scopes.stochastic_rounding(override):
            return optimizer.minimize(loss)

    program = compile_on_ipu(lambda: loops.repeat(steps, body))
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(program)
        return sess.run(weight).astype(np.float64)


def test_round_to_nearest_loses_small_weight_updates(graph):
    configure()
    np.testing.assert_array_equal(sgd_steps(graph), np.ones(64))


def test_stochastic_rounding_keeps_small_weight_updates_on_average(graph):
    configure(esr=config.StochasticRoundingBehaviour.ON)
    weights = sgd_steps(graph)
    # 100 steps of 1e-4: 0.99 on average (each weight within a few float16 steps of it).
    assert abs(weights.mean() - 0.99) < 0.001
    assert np.all(np.abs(weights - 0.99) < 0.01)
    assert len(np.unique(weights)) > 1


def small_updates(graph, update, steps=100):
    """A float16 weight at 1.0 after ``steps`` loop iterations of ``update(weight)``."""
    tf.compat.v1.set_random_seed(3)
    weight = tf.compat.v1.get_variable("weight", initializer=tf.ones([64], tf.float16),
                                       use_resource=True)
    program = compile_on_ipu(lambda: loops.repeat(steps, lambda: update(weight)))
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(program)
        return sess.run(weight).astype(np.float64)


def minimizing(optimizer):
    return lambda weight: optimizer().minimize(tf.reduce_sum(weight))


# Updates each smaller than half a float16 step at 1.0 (2**-12), and what 100 of them add up
# to: momentum's steps grow to lr / (1 - 0.9), 91 x 1e-4 in all; Adam's are lr each.
SMALL_UPDATES = {
    "momentum": (minimizing(lambda: tf.compat.v1.train.MomentumOptimizer(
        tf.constant(1e-5, tf.float16), 0.9)), 0.0091),
    "Adam": (minimizing(lambda: tf.compat.v1.train.AdamOptimizer(1e-4, epsilon=1e-3)), 0.01),
    "assign_sub": (lambda weight: weight.assign_sub(tf.fill([64], tf.constant(1e-4, tf.float16)),
                                                    read_value=False),
                   0.01),
}


@pytest.mark.parametrize("kind", SMALL_UPDATES)
def test_float16_updates_are_rounded_like_every_float16_result(graph, kind):
    """Momentum and Adam on float16 weights, and a float16 accumulator's ``assign_sub``,
    computed wide and rounded: to nearest, the small updates are lost; stochastically,
    kept on average."""
    update, _ = SMALL_UPDATES[kind]
    configure()
    np.testing.assert_array_equal(small_updates(graph, update), np.ones(64))


@pytest.mark.parametrize("kind", SMALL_UPDATES)
def test_float16_updates_are_rounded_stochastically_with_esr(graph, kind):
    update, total = SMALL_UPDATES[kind]
    configure(esr=config.StochasticRoundingBehaviour.ON)
    weights = small_updates(graph, update)
    assert abs(weights.mean() - (1 - total)) < 0.002
    assert len(np.unique(weights)) > 1


def test_stochastic_rounding_scope_overrides_the_configuration(graph):
    configure(esr=config.StochasticRoundingBehaviour.ON)
    np.testing.assert_array_equal(sgd_steps(graph, override=False), np.ones(64))


def test_stochastic_rounding_scope_turns_it_on_for_its_ops(graph):
    configure()
    assert abs(sgd_steps(graph, override=True).mean() - 0.99) < 0.001


def test_a_float64_result_rounds_through_float32_as_the_ipus_partials(graph, sess):
    """``round_to_nearest`` of a float64 result: first to float32 (the IPU's partial), then to
    float16.  Just off a float16 midpoint the two roundings differ from one rounding to
    nearest, which shows the test sees the path."""
    rng = np.random.default_rng(5)
    steps = rng.integers(0, 1023, 10_000)
    nudges = rng.choice([-1, 1], 10_000) * rng.uniform(0, 2.0 ** -30, 10_000)
    wide = 1 + (2 * steps + 1) * 2.0 ** -11 + nudges   # beside the midpoints in [1, 2)
    got = sess.run(float16.round_to_nearest(graph, tf.constant(wide), "rounded", {}))
    np.testing.assert_array_equal(got, wide.astype(np.float32).astype(np.float16))
    assert not np.array_equal(got, wide.astype(np.float16))


def test_stochastic_round_is_unbiased_and_keeps_inf_and_nan(graph, sess):
    tf.compat.v1.set_random_seed(5)
    exact = np.array([1.0 + 2.0 ** -12, 1e-8, -3.0 - 2.0 ** -11])
    step = np.array([2.0 ** -10, 2.0 ** -24, 2.0 ** -9])  # float16's steps there
    count = 20000
    samples = tf.tile(tf.constant(exact, tf.float32)[None], [count, 1])
    rounded = float16.stochastic_round(graph, samples, "sr", {})
    special = float16.stochastic_round(
        graph, tf.constant([np.inf, -np.inf, np.nan, 65504.0], tf.float32), "special", {})
    got, edge = sess.run([rounded, special])
    assert got.dtype == np.float16
    # Each value rounds to one of its two float16 neighbours, and to its own value on average.
    assert set(np.unique(got[:, 0])) == {np.float16(1.0), np.float16(1.0 + 2.0 ** -10)}
    assert set(np.unique(got[:, 1])) == {np.float16(0.0), np.float16(2.0 ** -24)}
    up = np.abs(exact - np.trunc(exact / step) * step) / step  # chance of rounding away
    spread = step * np.sqrt(up * (1 - up) / count)  # standard deviation of the mean
    assert np.all(np.abs(got.astype(np.float64).mean(axis=0) - exact) < 4 * spread)
    assert np.isposinf(edge[0]) and np.isneginf(edge[1]) and np.isnan(edge[2])
    assert edge[3] == 65504.0


def stochastic_runs(seed, runs=2):
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(seed)
        rounded = float16.stochastic_round(graph, tf.fill([4096], 1.0 + 2.0 ** -11), "sr", {})
        with tf.compat.v1.Session(graph=graph) as sess:
            return [sess.run(rounded) for _ in range(runs)]


def test_stochastic_rounding_differs_between_runs_and_repeats_with_a_graph_seed():
    first, second = stochastic_runs(seed=7)
    assert not np.array_equal(first, second)
    # Halfway between two float16 values: each element goes either way, about half of them up.
    assert 0.45 < np.mean(first > 1.0) < 0.55
    np.testing.assert_array_equal(stochastic_runs(seed=7, runs=1)[0], first)


def test_float16_programs_cost_float16_bytes(graph):
    configure()
    costs = {}
    for dtype in (np.float32, np.float16):
        [logits] = compile_on_ipu(conv_net, [tf.constant(v) for v in conv_inputs(dtype)])
        costs[dtype] = program_of(graph, logits).cost()
    assert costs[np.float16].forward_flops == costs[np.float32].forward_flops
    assert costs[np.float16].bytes_accessed == pytest.approx(
        costs[np.float32].bytes_accessed / 2, rel=0.01)


def test_float16_matrix_products_are_timed_at_the_float16_rate(graph):
    """The IPU's matrix units do float16 matmuls and convolutions four times as fast as
    float32 ones: the simulated forward pass of the float16 conv net does its products in a
    quarter of the time (the ReLU and every op's fixed cycles stay as they were)."""
    from ipu_emulator.sim.hardware import IPU2
    from ipu_emulator.sim.timeline import phase_durations
    configure()
    costs = {}
    for dtype in (np.float32, np.float16):
        [logits] = compile_on_ipu(conv_net, [tf.constant(v) for v in conv_inputs(dtype)])
        costs[dtype] = program_of(graph, logits).cost()
    half, full = costs[np.float16], costs[np.float32]
    assert full.phase_half_flops == (0.0, 0.0, 0.0)
    # The convolution and the matmul: 2 x 36 positions x 27 x 4, and 2 x 2 x 144 x 5.
    assert half.phase_half_flops == (2 * 36 * 27 * 4 * 2 + 2 * 2 * 144 * 5, 0.0, 0.0)
    relu = half.forward_flops - half.phase_half_flops[0]
    assert relu == 2 * 6 * 6 * 4

    def arithmetic_seconds(cost):
        fixed = cost.phase_op_cycles[0] / IPU2.clock_hz
        return dict(phase_durations(cost, IPU2))["forward"] - fixed

    products = half.phase_half_flops[0]
    assert arithmetic_seconds(full) == pytest.approx(
        (products + relu) / IPU2.achievable_fp32_flops)
    assert arithmetic_seconds(half) == pytest.approx(
        products / IPU2.achievable_fp16_flops + relu / IPU2.achievable_fp32_flops)
    assert IPU2.achievable_fp16_flops == 4 * IPU2.achievable_fp32_flops


def test_partials_type_takes_float16_or_float32(graph):
    for accepted in (np.float16, np.float32):
        with scopes.partials_type(accepted):
            tf.constant(1.0)
    with pytest.raises(ValueError, match=re.escape(
            "Only support float16, float32, provided <class 'numpy.int32'>")):
        with scopes.partials_type(np.int32):
            pass


def test_floating_point_and_partials_options_configure(graph):
    cfg = config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.floating_point_behaviour.set_all = True
    cfg.convolutions.poplar_options = {"partialsType": "half"}
    cfg.matmuls.poplar_options = {"partialsType": "half"}
    cfg.configure_ipu_system()
    [result] = compile_on_ipu(lambda a: a * a, [tf.constant(2.0, tf.float16)])
    with tf.compat.v1.Session(graph=graph) as sess:
        assert sess.run(result) == 4.0


def test_half_precision_tutorial_layout_trains_through_the_runner(tmp_path):
    """One child: the TF1 layout (float16 model, float32 parameters, loss scaling, the
    floating-point and float16 partials options configured, then an IPUEstimator in
    float16).  Stochastic rounding is checked in process, above (through the runner it
    would add a second or two of compiling its rounding loops to the child's run)."""
    from tests.support.child_python import ROOT, run_emulator
    layout = ROOT / "tests" / "layouts" / "half_precision_layout.py"
    result = run_emulator("run", "--tf1", "--seed", "1", layout, cwd=tmp_path).check()
    assert "logits dtype: float16 parameters: float32" in result.stdout
    assert "estimator: global_step 8" in result.stdout
    first, last = map(float, re.search(r"final: first ([0-9.]+) last ([0-9.]+)",
                                       result.stdout).groups())
    assert np.isfinite(first) and last < first


@pytest.mark.parametrize("esr", [None, config.StochasticRoundingBehaviour.ON],
                         ids=["nearest", "stochastic"])
def test_float16_pipeline_stages_keep_their_ops(graph, esr):
    """A float16 model pipelined over two IPUs: the ops made for each stage's float16 ops
    (stochastic rounding's compiled loops too) run in that stage, and training moves the
    loss."""
    from ipu_emulator.ipu import ipu_infeed_queue, ipu_outfeed_queue
    from ipu_emulator.ipu.ops import pipelining_ops
    cfg = config.IPUConfig()
    cfg.auto_select_ipus = 2
    if esr is not None:
        cfg.floating_point_behaviour.esr = esr
    cfg.configure_ipu_system()
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((64, 3)), rng.standard_normal((64, 1))
    data = tf.data.Dataset.from_tensor_slices(
        (x.astype(np.float32), y.astype(np.float32))).repeat().batch(4, drop_remainder=True)
    infeed, outfeed = ipu_infeed_queue.IPUInfeedQueue(data), ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(features, labels):
        w1 = tf.compat.v1.get_variable("w1", [3, 5], tf.float16)
        return tf.nn.relu(tf.matmul(tf.cast(features, tf.float16), w1)), labels

    def stage2(hidden, labels):
        w2 = tf.compat.v1.get_variable("w2", [5, 1], tf.float16)
        error = tf.cast(tf.matmul(hidden, w2), tf.float32) - labels
        return tf.reduce_mean(tf.square(error))

    def optimizer(loss):
        return pipelining_ops.OptimizerFunctionOutput(
            tf.compat.v1.train.GradientDescentOptimizer(0.05), loss)

    op = compile_on_ipu(lambda: pipelining_ops.pipeline(
        [stage1, stage2], 4, repeat_count=4, infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer))
    [build] = programs.pipelines_of(program_of(graph, op))
    made = [o for o in program_of(graph, op).new_ops if float16.is_marked(o)]
    assert made and all(o.name in build.stage_of_op for o in made)
    assert {build.stage_of_op[o.name] for o in made if o.type == "MatMul"} == {0, 1}
    rounding_loops = {build.stage_of_op[o.name] for o in made if o.type == "PartitionedCall"}
    assert rounding_loops == (set() if esr is None else {0, 1})
    dequeue = outfeed.dequeue()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
        sess.run(op)
        losses = np.ravel(sess.run(dequeue))
    assert len(losses) == 16 and np.all(np.isfinite(losses))
    assert losses[-4:].mean() < losses[:4].mean()
