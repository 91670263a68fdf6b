"""IPU Keras (TF2): models built in an IPUStrategy scope, steps_per_execution, gradient
accumulation, feed options, and the data checks with the SDK's messages."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_strategy
from ipu_emulator.ipu.keras import extensions
from tests.support.keras_data import BATCH, arrays, dataset

pytestmark = pytest.mark.tf2


@pytest.fixture
def strategy():
    return ipu_strategy.IPUStrategy()


def linear_model(steps_per_execution=None, learning_rate=0.05):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, use_bias=False,
                                                       kernel_initializer="zeros")])
    model.build((BATCH, 4))
    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate), loss="mse",
                  steps_per_execution=steps_per_execution)
    return model


def test_only_models_built_in_the_scope_get_the_extensions(strategy):
    with strategy.scope():
        inside = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        inputs = tf.keras.Input((4,))
        functional = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))
    outside = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    assert isinstance(inside, extensions.KerasExtensions)
    assert isinstance(functional, extensions.KerasExtensions)
    assert type(inside).__name__ == "Sequential"
    assert not isinstance(outside, extensions.KerasExtensions)
    plain = ipu_strategy.IPUStrategy(enable_keras_extensions=False)
    with plain.scope():
        assert not isinstance(tf.keras.Sequential([]), extensions.KerasExtensions)


def test_fit_runs_steps_per_execution_batches_per_engine_run(strategy):
    with strategy.scope():
        model = linear_model(steps_per_execution=4)
        with record.capture() as runs:
            history = model.fit(dataset(12), epochs=2, verbose=0)
    losses = history.history["loss"]
    assert losses[1] < losses[0]
    assert runs.engine_runs == 2 * 12 // 4
    assert all(run.iterations == 4 for run in runs.runs)
    assert runs.runs[0].infeed_bytes_per_iteration == BATCH * 4 * 4 + BATCH * 4
    assert runs.runs[0].outfeed_enqueues is None   # Keras's own outfeed is not counted
    with record.capture() as runs:
        model.evaluate(dataset(12), verbose=0)
        model.predict(arrays(12)[0], batch_size=BATCH, verbose=0)
    assert runs.engine_runs == 3 + 3


def test_fit_traces_once_and_trains_as_plain_keras_with_the_same_optimizer_slots(strategy):
    # The optimizer's slots are made before fit's first trace (one trace, not TensorFlow's
    # second one without variable creation), with the names and values Keras gives them.
    def momentum_model():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="zeros",
                                                           name="d")])
        model.build((BATCH, 4))
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05, momentum=0.9), loss="mse",
                      steps_per_execution=2)
        return model

    plain = momentum_model()
    plain_history = plain.fit(dataset(4), epochs=2, verbose=0)
    with strategy.scope():
        model = momentum_model()
        history = model.fit(dataset(4), epochs=2, verbose=0)
    assert model.train_function.experimental_get_tracing_count() == 1
    assert ([v.name for v in model.optimizer.variables]
            == [v.name for v in plain.optimizer.variables])
    np.testing.assert_allclose(history.history["loss"], plain_history.history["loss"],
                               rtol=1e-5)
    for ours, theirs in zip(model.optimizer.variables, plain.optimizer.variables):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-7)


def test_a_distributed_data_set_gives_the_data_sets_own_batches(strategy):
    # On the strategy's one replica, without a multi-device iterator: the same batches in
    # the same order, each epoch.
    x, _ = arrays(3)
    distributed = strategy.experimental_distribute_dataset(dataset(3))
    for _ in range(2):
        batches = [features.numpy() for features, _ in distributed]
        assert len(batches) == 3
        np.testing.assert_array_equal(np.concatenate(batches), x)


def test_data_with_unknown_shapes_or_partial_batches_is_refused(strategy):
    with strategy.scope():
        model = linear_model()
        partial = tf.data.Dataset.from_tensor_slices(arrays(3)).batch(5)
        with pytest.raises(ValueError) as caught:
            model.fit(partial, verbose=0)
        assert str(caught.value) == (
            "The provided set of data contains a shape (None, 4) which is not fully defined. "
            "Executing on IPU requires all dataset elements to have fully defined shapes. If "
            "using batch() make sure to set `drop_remainder=True`.")
        x, y = arrays(3)
        with pytest.raises(ValueError) as caught:
            model.fit(x[:20], y[:20], batch_size=BATCH, verbose=0)
        assert str(caught.value) == (
            "The provided set of data has a partial batch, which could result in data being "
            "dropped. Either adjust the `batch_size` of your model (currently set to 8) or pad "
            "your dataset to ensure there are no partial batches.")
        with pytest.raises(ValueError, match="which is not compatible with the IPU's requirement"):
            model.fit((pair for pair in [(x, y)]), verbose=0)


def test_batches_must_divide_into_executions(strategy):
    with strategy.scope():
        model = linear_model(steps_per_execution=5)
        with pytest.raises(ValueError) as caught:
            model.fit(dataset(12), verbose=0)
        assert str(caught.value) == ("`steps_per_execution` must be a divisor of the number of "
                                     "batches in the dataset provided.")
        with pytest.raises(ValueError, match=r"^Your input does not have enough data\. Make sure "
                                             r"that your dataset or generator can generate at "
                                             r"least 20 batches \(currently it can only generate "
                                             r"12 batches\)"):
            model.fit(dataset(12), steps_per_epoch=20, verbose=0)


def test_the_experimental_name_of_steps_per_execution_is_taken(strategy):
    """TensorFlow 2.4's ``experimental_steps_per_execution`` (the SDK 2.x Keras) still
    sets the batches per engine run, as Keras takes it, with a warning."""
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        model.build((BATCH, 4))
        model.compile(optimizer="sgd", loss="mse", experimental_steps_per_execution=3)
        with record.capture() as runs:
            model.fit(dataset(12), epochs=1, verbose=0)
    assert [run.iterations for run in runs.runs] == [3] * 4


def test_more_steps_per_execution_than_batches_uses_the_batches(strategy, caplog):
    with strategy.scope():
        model = linear_model(steps_per_execution=50)
        with caplog.at_level(logging.WARNING, logger="ipu_emulator"), \
                record.capture() as runs:
            model.fit(dataset(12), verbose=0)
    assert ("`steps_per_execution` has been set to 50 but the dataset provided only contains "
            "12 batches. Using 12 as `steps_per_execution`.") in caplog.text
    assert [run.iterations for run in runs.runs] == [12]
    assert int(model._steps_per_execution.numpy()) == 50, "restored after the call"


def test_run_eagerly_is_refused(strategy):
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        with pytest.raises(RuntimeError) as caught:
            model.compile(loss="mse", run_eagerly=True)
    assert str(caught.value) == ("Keras models cannot run eagerly when using `IPUStrategy`. Set "
                                 "`run_eagerly=False` when calling `compile`.")


def test_gradient_accumulation_applies_the_summed_gradient_once_per_n_steps(strategy):
    accumulation, learning_rate = 3, 0.05
    x, y = arrays(6)
    with strategy.scope():
        model = linear_model(steps_per_execution=6, learning_rate=learning_rate)
        model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=accumulation)
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 6 // accumulation

    expected = np.zeros((4, 1), np.float32)
    for group in range(2):
        total = np.zeros_like(expected)
        for k in range(accumulation):
            s = slice((group * accumulation + k) * BATCH, (group * accumulation + k + 1) * BATCH)
            residual = x[s] @ expected - y[s]
            total += 2 * x[s].T @ residual / residual.size   # d(mse)/dw at the held weights
        expected = expected - learning_rate * total
    np.testing.assert_allclose(model.get_weights()[0], expected, rtol=1e-4, atol=1e-6)


def test_gradient_accumulation_rules(strategy):
    with strategy.scope():
        model = linear_model(steps_per_execution=4)
        for bad in (0, -2, 1.5):
            with pytest.raises(ValueError) as caught:
                model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=bad)
            assert str(caught.value) == (
                "Expected `gradient_accumulation_steps_per_replica` to be a positive integer, "
                "but got {} instead.".format(bad))
        with pytest.raises(ValueError, match=r"^Found `opt` key"):
            model.set_gradient_accumulation_options(opt=None)
        model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=3)
        with pytest.raises(RuntimeError) as caught:
            model.fit(dataset(12), verbose=0)
    assert "the current `steps_per_execution` value (set to 4) is not divisible by " \
           "`gradient_accumulation_steps_per_replica` (3)" in str(caught.value)


def test_feed_options_are_checked(strategy):
    with strategy.scope():
        model = linear_model()
        model.set_infeed_queue_options(prefetch_depth=2)
        model.set_outfeed_queue_options(buffer_depth=2)
        with pytest.raises(ValueError, match=r"^Found `dataset` key in `infeed_queue_kwargs`\. "
                                             r"This argument is automatically set by Keras\.$"):
            model.set_infeed_queue_options(dataset=None)
        with pytest.raises(ValueError, match=r"^prefetch_depth must be greater than zero, but it is 0$"):
            model.set_infeed_queue_options(prefetch_depth=0)
        with pytest.raises(ValueError, match=r"^Found `outfeed_mode` key in `outfeed_queue_kwargs`\. "
                                             r"This argument is not compatible with Keras\.$"):
            model.set_outfeed_queue_options(outfeed_mode=None)


def test_one_step_per_execution_is_hinted(strategy, caplog):
    with strategy.scope(), caplog.at_level(logging.INFO, logger="ipu_emulator"):
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)], name="tiny")
        model.compile(loss="mse")
    assert "The model `tiny` has been configured with only 1 steps per execution." in caplog.text
