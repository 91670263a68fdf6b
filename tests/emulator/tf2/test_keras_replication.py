"""IPU Keras (TF2) on a device with more IPUs than the model's shards: the model is replicated
(IPUs // shards replicas), the batches are shared out as the SDK's Keras data adapter does
(the steps given count all replicas' batches, ``steps_per_execution`` one replica's), with its
messages, the replicas' gradients are added up before each weight update, the record says how
many replicas ran; and the callbacks' batch hooks see per-replica steps, every step with
``set_asynchronous_callbacks(True)``."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import config, ipu_strategy
from tests.support.ipu_systems import configure_ipus
from tests.support.keras_data import BATCH, arrays, dataset

pytestmark = pytest.mark.tf2


def model(steps_per_execution, stages=None):
    init = tf.keras.initializers.GlorotUniform
    built = tf.keras.Sequential([
        tf.keras.layers.Dense(8, activation="relu", kernel_initializer=init(1)),
        tf.keras.layers.Dense(1, kernel_initializer=init(2))])
    built.build((BATCH, 4))
    if stages:
        built.set_pipeline_stage_assignment(stages)
    built.compile(optimizer=tf.keras.optimizers.SGD(0.02), loss="mse",
                  steps_per_execution=steps_per_execution)
    return built


class Steps(tf.keras.callbacks.Callback):
    """Records the batch hooks' step numbers."""

    def __init__(self):
        super().__init__()
        self.begun, self.ended = [], []

    def on_train_batch_begin(self, batch, logs=None):
        self.begun.append(batch)

    def on_train_batch_end(self, batch, logs=None):
        self.ended.append(batch)


def test_two_replicas_of_a_two_stage_pipeline_on_four_ipus(fresh_ipu_system):
    configure_ipus(4)
    strategy = ipu_strategy.IPUStrategy()
    with strategy.scope():
        pipelined = model(steps_per_execution=4, stages=[0, 1])
        pipelined.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        history = pipelined.fit(dataset(), epochs=2, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    # The accumulators and the optimizer's slots were made before the train function's
    # first trace: TensorFlow did not trace it a second time.
    assert pipelined.train_function.experimental_get_tracing_count() == 1
    # 16 batches = 8 per replica = 2 executions of 4 steps; an update per execution.
    runs = record.last_runs(2).runs
    assert [(r.replicas, r.iterations, r.num_ipus) for r in runs] == [(2, 4, 2)] * 2
    weights = sum(v.numpy().nbytes for v in pipelined.trainable_variables)
    assert runs[-1].all_reduce_bytes == weights
    assert int(pipelined.optimizer.iterations.numpy()) == 2 * 16 // (2 * 4)
    timeline = record.last_runs(1).simulate()
    assert timeline.lanes == ["host", "IPU0", "IPU1", "IPU2", "IPU3"]

    # The same updates as one model on one IPU adding up the gradients of 8 batches.
    configure_ipus(1)
    with ipu_strategy.IPUStrategy().scope():
        single = model(steps_per_execution=8)
        single.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=8)
        single.fit(dataset(), epochs=2, verbose=0)
    for mine, theirs in zip(pipelined.get_weights(), single.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


def test_batches_are_counted_per_replica_with_the_sdk_messages(fresh_ipu_system, caplog):
    configure_ipus(2)
    with ipu_strategy.IPUStrategy().scope():
        replicated = model(steps_per_execution=16)
        with caplog.at_level(logging.WARNING, logger="ipu_emulator"):
            replicated.evaluate(dataset(16), verbose=0)
        assert ("`steps_per_execution` has been set to 16 but the dataset provided to this "
                "replica only contains 8 batches. Using 8 as `steps_per_execution`."
                ) in caplog.text
        assert record.last_runs(1).runs[0].iterations == 8
        replicated.compile(optimizer="sgd", loss="mse", steps_per_execution=4)
        with pytest.raises(ValueError) as caught:
            replicated.fit(dataset(12), verbose=0)        # 6 batches a replica
        assert str(caught.value) == ("`steps_per_execution` must be a divisor of the number "
                                     "of batches in the dataset provided to this replica.")
        # steps_per_epoch counts the batches of both replicas, as the SDK's data adapter
        # does: 4 make 2 steps a replica, and steps_per_execution (4) is cut down to them.
        steps = Steps()
        with caplog.at_level(logging.WARNING, logger="ipu_emulator"):
            replicated.fit(dataset(16).repeat(), steps_per_epoch=4, verbose=0,
                           callbacks=[steps])
        assert ("`steps_per_execution` has been set to 4 but the dataset provided to this "
                "replica only contains 2 batches. Using 2 as `steps_per_execution`."
                ) in caplog.text
        assert int(replicated.optimizer.iterations.numpy()) == 2
        assert (steps.begun, steps.ended) == ([0], [1])   # one call per execution
        assert record.last_runs(1).runs[0].iterations == 2


@pytest.mark.parametrize("ipus", [1, 2])
def test_asynchronous_callbacks_see_every_step(fresh_ipu_system, ipus):
    configure_ipus(ipus)
    with ipu_strategy.IPUStrategy().scope():
        trained = model(steps_per_execution=4)
        synchronous, asynchronous = Steps(), Steps()
        trained.fit(dataset(8 * ipus), verbose=0, callbacks=[synchronous])
        trained.set_asynchronous_callbacks(True)
        trained.fit(dataset(8 * ipus), verbose=0, callbacks=[asynchronous])
    # 8 steps a replica in executions of 4: once per execution, or once per step.
    if ipus == 1:
        assert (synchronous.begun, synchronous.ended) == ([0, 4], [3, 7])
    else:   # Keras alone would count both replicas' batches: 0, 8 and 7, 15
        assert (synchronous.begun, synchronous.ended) == ([0, 4], [3, 7])
    assert asynchronous.begun == asynchronous.ended == list(range(8))


# -- The SDK's step counting on replicas ------------------------------------------------------
# Graphcore's Keras data adapter (``IPUDataHandler``: keras/ipu/extensions/data_adapter.py in
# graphcore/keras, SDK 2.6-3.x; tensorflow/python/ipu/keras/extensions/data_adapter.py before)
# takes the ``steps`` given to fit/evaluate/predict for all replicas together, and each
# replica runs ``steps // replicas`` (its ``_infer_steps``); ``steps_per_execution`` counts one
# replica's batches (its ``_validate_data_handler``).  The SDK's own test
# (tests/keras/extensions/data_adapter_test.py, keras/ipu/model_replication_mnist_test.py:
# ``predict(predict_ds, steps=12)`` on 4 replicas equals the CPU's 12 batches) does the same.


def tutorial_model(learning_rate=0.02):
    """The tutorial's functional model (``keras.Model(*model_fn(...))``), small."""
    inputs = tf.keras.Input((4,))
    init = tf.keras.initializers.GlorotUniform
    x = tf.keras.layers.Dense(8, activation="relu", kernel_initializer=init(1))(inputs)
    outputs = tf.keras.layers.Dense(1, kernel_initializer=init(2))(x)
    built = tf.keras.Model(inputs, outputs)
    built.build((BATCH, 4))
    return built


def test_tutorial_layout_on_two_replicas_counts_steps_for_both(fresh_ipu_system, caplog):
    """Graphcore's TF2 Keras tutorial (tutorials/tensorflow2/keras/completed_example/main.py,
    not pipelined): two IPUs, ``steps_per_execution = train batches // num_ipus``,
    ``fit(steps_per_epoch=train batches)`` on a repeated dataset, then
    ``evaluate(test_dataset, steps=test batches)``: it runs to completion, as on IPUs."""
    num_ipus = 2
    ipu_config = config.IPUConfig()
    ipu_config.auto_select_ipus = num_ipus
    ipu_config.configure_ipu_system()
    train_batches, test_batches = 16, 15           # an odd number of test batches
    strategy = ipu_strategy.IPUStrategy()
    with strategy.scope():
        ipu_model = tutorial_model()
        steps_per_execution = train_batches // num_ipus
        ipu_model.compile(optimizer=tf.keras.optimizers.SGD(0.02), loss="mse",
                          steps_per_execution=steps_per_execution)
        with record.capture() as runs:
            history = ipu_model.fit(dataset(train_batches).repeat(), epochs=2,
                                    steps_per_epoch=train_batches, verbose=0)
        # 16 batches an epoch are 8 steps on each replica: one engine run of 8 an epoch.
        assert [(r.replicas, r.iterations) for r in runs.runs] == [(2, 8)] * 2
        assert int(ipu_model.optimizer.iterations.numpy()) == 2 * 8
        assert history.history["loss"][1] < history.history["loss"][0]

        test = dataset(test_batches, seed=1)
        with caplog.at_level(logging.WARNING, logger="ipu_emulator"), \
                record.capture() as runs:
            loss = ipu_model.evaluate(test, steps=test_batches, verbose=0)
        # 15 batches: 7 a replica, the 15th dropped; steps_per_execution cut from 8 to 7.
        assert ("Dataset of length 15 is being evenly distributed between 2 replicas. The "
                "remaining 1 batch will be dropped.") in caplog.text
        assert ("`steps_per_execution` has been set to 8 but the dataset provided to this "
                "replica only contains 7 batches. Using 7 as `steps_per_execution`."
                ) in caplog.text
        assert [(r.replicas, r.iterations) for r in runs.runs] == [(2, 7)]
        x_test, y_test = arrays(test_batches, seed=1)
        kept = 14 * BATCH                                  # the first 14 batches ran
        expected = np.mean((ipu_model(x_test[:kept]).numpy() - y_test[:kept]) ** 2)
        np.testing.assert_allclose(loss, expected, rtol=1e-5)

        # predict(steps=...) too: 7 steps a replica, the first 14 batches' predictions.
        images = tf.data.Dataset.from_tensor_slices(x_test).batch(BATCH, drop_remainder=True)
        with record.capture() as runs:
            predictions = ipu_model.predict(images, steps=test_batches, verbose=0)
        assert predictions.shape == (kept, 1)
        np.testing.assert_allclose(predictions, ipu_model(x_test[:kept]).numpy(), rtol=1e-5)
        assert [(r.replicas, r.iterations) for r in runs.runs] == [(2, 7)]


def test_too_little_data_for_the_steps_gives_the_sdk_errors(two_ipus):
    with ipu_strategy.IPUStrategy().scope():
        replicated = model(steps_per_execution=4)
        # 32 steps are 16 a replica; the SDK compares them with the dataset's 15 batches.
        with pytest.raises(ValueError) as caught:
            replicated.evaluate(dataset(15), steps=32, verbose=0)
        assert str(caught.value) == (
            "Your input does not have enough data. Make sure that your dataset or generator "
            "can generate at least 16 batches (currently it can only generate 15 batches). "
            "You may need to use the repeat() function when building your dataset.")
        # steps_per_epoch other than the dataset's length: the iterator goes on from epoch to
        # epoch, so 3 epochs of 4 steps a replica need 12 of the 10 batches.
        with pytest.raises(ValueError, match=r"at least 12 batches \(currently it can only "
                                             r"generate 10 batches\)"):
            replicated.fit(dataset(10), steps_per_epoch=8, epochs=3, verbose=0)
        # One batch cannot be shared out between two replicas.
        with pytest.raises(ValueError) as caught:
            replicated.predict(dataset(1), verbose=0)
        assert str(caught.value) == (
            "The provided dataset contains 1 items, but all 2 replicas are requested to run 1 "
            "steps each. Make sure the dataset contains at least 2 items.")
        # A dataset of unknown size needs the steps.
        with pytest.raises(ValueError) as caught:
            replicated.evaluate(dataset(8).filter(lambda x, y: True), verbose=0)
        assert str(caught.value) == ("Could not infer the size of the data. You must specify "
                                     "the number of steps to run.")


def test_arrays_share_their_batches_out_and_drop_the_rest(two_ipus):
    """Arrays of 15 batches on two replicas: 7 steps each, the 15th batch dropped every epoch
    (the SDK warns only for datasets of known length; arrays have none to it)."""
    x, y = arrays(15)
    with ipu_strategy.IPUStrategy().scope():
        replicated = model(steps_per_execution=7)
        with record.capture() as runs:
            replicated.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    assert [(r.replicas, r.iterations) for r in runs.runs] == [(2, 7)] * 2
    assert int(replicated.optimizer.iterations.numpy()) == 2 * 7


def test_validation_steps_count_both_replicas(two_ipus):
    with ipu_strategy.IPUStrategy().scope():
        replicated = model(steps_per_execution=4)
        validation = dataset(20, seed=1)
        with record.capture() as runs:
            history = replicated.fit(dataset(16), validation_data=validation,
                                     validation_steps=16, verbose=0)
        # Training: 8 steps a replica in runs of 4; validation: 16 batches, 8 a replica.
        assert [(r.replicas, r.iterations) for r in runs.runs] == [(2, 4)] * 4
        val_loss = replicated.evaluate(validation, steps=16, verbose=0)
        np.testing.assert_allclose(history.history["val_loss"][0], val_loss, rtol=1e-6)
        # validation_split: as the SDK's fit, the arrays are split first; the replicas share
        # out the 16 training batches (8 each) and the 4 validation batches (2 each).
        x, y = arrays(20)
        with record.capture() as runs:
            replicated.fit(x, y, batch_size=BATCH, validation_split=0.2, verbose=0)
        assert [r.iterations for r in runs.runs] == [4, 4, 2]


def test_validation_is_first_checked_as_for_one_replica(two_ipus):
    """The SDK's fit makes its validation data handler with the handler's default replication
    factor, 1 (keras/ipu/extensions/extensions_base.py, ``_fit_delegate``: "Create
    data_handler for evaluation and cache it"), before evaluate shares the batches out: 21
    validation batches fail ``steps_per_execution`` 5 there, though 10 a replica would not.
    And while fit runs, the model's steps per execution is the one cut to fit's epoch."""
    with ipu_strategy.IPUStrategy().scope():
        replicated = model(steps_per_execution=5)
        with record.capture() as runs, pytest.raises(ValueError) as caught:
            replicated.fit(dataset(20), validation_data=dataset(21, seed=1), verbose=0)
        assert str(caught.value) == ("`steps_per_execution` must be a divisor of the number "
                                     "of batches in the dataset provided.")
        assert [r.iterations for r in runs.runs] == [5, 5]     # after the first epoch
        # Compiled with 8, fit's 4 steps a replica make it 4: 6 validation steps a replica
        # (12 batches) do not divide into runs of 4.
        replicated.compile(optimizer="sgd", loss="mse", steps_per_execution=8)
        with pytest.raises(ValueError) as caught:
            replicated.fit(dataset(8), validation_data=dataset(12, seed=1), verbose=0)
        assert str(caught.value) == ("`steps_per_execution` must be a divisor of the number "
                                     "of batches in the dataset provided to this replica.")
        replicated.evaluate(dataset(12, seed=1), verbose=0)    # alone, 8 is cut to 6


@pytest.mark.parametrize("method", ["mean", "running_mean"])
def test_replicas_gradients_are_added_up_as_the_sdk_test_has_it(fresh_ipu_system, method):
    """The SDK's own test of Keras gradient accumulation on replicas (graphcore/keras
    keras/ipu/gradient_accumulation_test.py, ``testModels``; the same in
    tensorflow/python/ipu/tests/keras/keras_gradient_accumulation_test.py) matches the CPU's
    big batches only with the learning rate divided by the replication factor: each
    replica's accumulated (mean) gradient is summed over the replicas, not averaged."""
    learning_rate, accumulation, replicas = 0.05, 16, 2
    big = tf.data.Dataset.from_tensor_slices(arrays(32)).batch(BATCH * accumulation)
    cpu = tutorial_model()
    cpu.compile(optimizer=tf.keras.optimizers.SGD(learning_rate), loss="mse")
    cpu.fit(big, epochs=1, verbose=0)                      # 2 updates of 16 batches each

    configure_ipus(replicas)
    with ipu_strategy.IPUStrategy().scope():
        ipu_model = tutorial_model()
        ipu_model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate / replicas),
                          loss="mse", steps_per_execution=accumulation // replicas * 2)
        ipu_model.set_gradient_accumulation_options(
            gradient_accumulation_steps_per_replica=accumulation // replicas,
            gradient_accumulation_reduction_method=method)
        ipu_model.fit(dataset(32), epochs=1, verbose=0)
    assert int(ipu_model.optimizer.iterations.numpy()) == 2
    for mine, theirs in zip(ipu_model.get_weights(), cpu.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
