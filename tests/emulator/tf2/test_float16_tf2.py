"""Float16 in TF2: the step a function runs with ``IPUStrategy.run`` (IPU Keras's steps
among them) computes its float16 ops in float64 and rounds their results to float16, as a
compiled TF1 program does (runtime/float16.py), so a ``mixed_float16`` Keras model trains at
float32's speed, not at TensorFlow's slow CPU float16 kernels; float16's overflow stays, and
the simulated IPU does its float16 matrix products at the float16 rate."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_strategy
from ipu_emulator.runtime import float16, tf2_programs

pytestmark = pytest.mark.tf2


@pytest.fixture
def strategy():
    return ipu_strategy.IPUStrategy()


@pytest.fixture
def mixed_float16():
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")


def traced_products(function):
    """The matmuls and convolutions of the steps ``function`` (a ``tf.function``) traced (a
    loop's body when it loops, with the functions they call), but those the rewrite replaced."""
    products = []
    for concrete in function._list_all_concrete_functions():  # pylint: disable=protected-access
        body = tf2_programs.loop_body_graph(concrete.graph)
        ops = tf2_programs._ops_with_nested_calls(body or concrete.graph)  # pylint: disable=protected-access
        products += [op for op in ops if op.type in ("MatMul", "Conv2D", "Conv2DBackpropInput",
                                                     "Conv2DBackpropFilter")
                     and not float16.is_replaced(op)]
    return products


def test_a_float16_step_computes_in_float64_and_keeps_float16_overflow(strategy):
    big = tf.constant(np.full((2, 2), 200.0, np.float16))
    small = tf.constant(np.full((2, 2), 0.1, np.float16))

    def step(a):
        return tf.matmul(a, a)   # 80,000 for the big one: past float16's 65,504

    @tf.function
    def program(a):
        return strategy.run(step, args=(a,))

    with strategy.scope():
        overflowed, exact = program(big), program(small)
    assert overflowed.dtype == tf.float16 and np.all(np.isposinf(overflowed.numpy()))
    # The exact sum of two products of float16 0.1 (0.0999756), rounded once to float16.
    tenth = np.float64(np.float16(0.1))
    np.testing.assert_array_equal(exact.numpy(), np.full((2, 2), np.float16(2 * tenth * tenth)))
    products = traced_products(program)   # one trace: both calls have one signature
    assert [op.get_attr("T") for op in products] == [tf.float64]
    assert float16.is_marked(products[0])


def test_a_program_run_eagerly_computes_its_loops_float16_ops_wide(strategy):
    """``strategy.run(program)`` called eagerly, the model inside the program's own loop (the
    TF2 feeds tutorial's layout): the loop body's ops, made while the program is traced,
    compute in float64, the convolution's gradient too, and a mean sums wide as the IPU's
    does.  (TensorFlow's float16 mean sums in float16: past 65,504 here, so inf.)"""
    images = tf.constant(np.full((8, 8, 8, 64), 8.0, np.float16))
    kernel = tf.Variable(np.full((3, 3, 64, 1), 0.125, np.float16))

    @tf.function
    def program(images):
        total = tf.constant(0.0, tf.float16)
        for _ in tf.range(3):
            with tf.GradientTape() as tape:
                # Up to 576 at each of 512 outputs: their mean fits float16, their sum not.
                loss = tf.reduce_mean(tf.nn.conv2d(images, kernel, 1, "SAME"))
            kernel.assign_sub(1e-4 * tape.gradient(loss, kernel))
            total += loss
        return total

    with strategy.scope():
        total = strategy.run(program, args=(images,))
    # Each step's mean: (36 x 576 + 24 x 384 + 4 x 256) / 64 = 484 (inner, edge and corner
    # outputs), the kernel barely moved by the small updates.
    assert total.dtype == tf.float16 and float(total) == pytest.approx(3 * 484, rel=0.01)
    products = traced_products(program)
    assert {"Conv2D", "Conv2DBackpropFilter"} <= {op.type for op in products}
    assert all(op.get_attr("T") == tf.float64 and float16.is_marked(op) for op in products)


def test_a_mixed_float16_keras_model_trains_and_is_timed_at_the_float16_rate(
        strategy, mixed_float16):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 256).astype(np.int32)
    images = rng.random((256, 8, 8, 3), dtype=np.float32) + labels[:, None, None, None]
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu",
                                   kernel_initializer=tf.keras.initializers.GlorotUniform(1)),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(2, dtype="float32",
                                  kernel_initializer=tf.keras.initializers.GlorotUniform(2))])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), steps_per_execution=8,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        with record.capture() as runs:
            history = model.fit(images, labels, batch_size=16, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    # The convolution and its two gradients compute in float64 (the dense layer is float32).
    products = traced_products(model.train_function)
    convolutions = [op for op in products if op.type.startswith("Conv2D")]
    assert {"Conv2D", "Conv2DBackpropFilter"} <= {op.type for op in convolutions}
    assert all(op.get_attr("T") == tf.float64 and float16.is_marked(op) for op in convolutions)
    cost = runs.runs[0].step_cost
    forward, backward, _ = cost.phase_half_flops
    # The convolution's products are float16; the last layer's are float32, as its dtype says.
    assert 0 < forward < cost.forward_flops and 0 < backward < cost.backward_flops
