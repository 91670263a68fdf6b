"""IPU Keras (TF2) on a device with more IPUs than the model's shards: the model is replicated
(IPUs // shards replicas), the batches are shared out and counted per replica with the SDK's
messages, the replicas' gradients are added up before each weight update, the record says how
many replicas ran; and the callbacks' batch hooks see per-replica steps, every step with
``set_asynchronous_callbacks(True)``."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_strategy
from tests.support.ipu_systems import configure_ipus
from tests.support.keras_data import BATCH, dataset

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
        # steps_per_epoch counts one replica's steps: Keras takes twice as many batches.
        steps = Steps()
        replicated.fit(dataset(16).repeat(), steps_per_epoch=4, verbose=0, callbacks=[steps])
        assert int(replicated.optimizer.iterations.numpy()) == 4
        assert (steps.begun, steps.ended) == ([0], [3])   # one call per execution


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
