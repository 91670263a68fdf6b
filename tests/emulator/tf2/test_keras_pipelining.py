"""IPU Keras pipelining (TF2): Sequential and functional models split into pipeline stages
train with the numerics of gradient accumulation, refuse what the SDK refuses with its
messages, and record runs that simulate as a pipeline over the stages' IPUs."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.ipu import ipu_strategy, keras as ipu_keras
from ipu_emulator.ipu.ops import pipelining_ops
from tests.support.keras_data import BATCH, dataset

pytestmark = pytest.mark.tf2


@pytest.fixture
def strategy(two_ipus):
    return ipu_strategy.IPUStrategy()


def initializer(seed):
    return tf.keras.initializers.GlorotUniform(seed=seed)


def sequential(steps_per_execution=8):
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(8, activation="relu", kernel_initializer=initializer(1)),
        tf.keras.layers.Dense(1, kernel_initializer=initializer(2))])
    model.build((BATCH, 4))
    model.compile(optimizer=tf.keras.optimizers.SGD(0.02), loss="mse",
                  steps_per_execution=steps_per_execution)
    return model


def functional(steps_per_execution=8):
    """Two stages made with ``PipelineStage`` while the model is built."""
    inputs = tf.keras.Input((4,), batch_size=BATCH)
    with ipu_keras.PipelineStage(0):
        hidden = tf.keras.layers.Dense(8, activation="relu", kernel_initializer=initializer(1),
                                       name="hidden")(inputs)
    with ipu_keras.PipelineStage(1):
        outputs = tf.keras.layers.Dense(1, kernel_initializer=initializer(2),
                                        name="head")(hidden)
    model = tf.keras.Model(inputs, outputs)
    model.compile(optimizer=tf.keras.optimizers.SGD(0.02), loss="mse",
                  steps_per_execution=steps_per_execution)
    return model


def test_pipelined_sequential_model_trains_like_gradient_accumulation(strategy):
    with strategy.scope():
        pipelined = sequential()
        pipelined.set_pipeline_stage_assignment([0, 1])
        pipelined.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        history = pipelined.fit(dataset(), epochs=3, shuffle=False, verbose=0)
        # Not pipelined, the same model fills one IPU: the 2-IPU device holds 2 replicas of it,
        # whose summed gradients of 2 batches each make the same update from the same 4 batches.
        accumulated = sequential(steps_per_execution=4)
        accumulated.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=2)
        accumulated.fit(dataset(), epochs=3, shuffle=False, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    assert [a.pipeline_stage for a in pipelined.get_pipeline_stage_assignment()] == [0, 1]
    assert [a.layer for a in pipelined.get_pipeline_stage_assignment()] == pipelined.layers
    # One weight update per 4 micro-batches: 3 epochs of 16 batches.
    assert int(pipelined.optimizer.iterations.numpy()) == 3 * 16 // 4
    for mine, theirs in zip(pipelined.get_weights(), accumulated.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


def test_functional_model_built_with_pipeline_stages(strategy):
    with strategy.scope():
        model = functional()
        assignment = model.get_pipeline_stage_assignment()
        assert [(a.layer.name, a.node_index, a.pipeline_stage) for a in assignment] == [
            ("hidden", 0, 0), ("head", 0, 1)]
        assert all(isinstance(a, ipu_keras.FunctionalLayerPipelineStageAssignment)
                   for a in assignment)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        before = model.evaluate(dataset(), verbose=0)
        model.fit(dataset(), epochs=2, verbose=0)
        assert model.evaluate(dataset(), verbose=0) < before
        accumulated = functional(steps_per_execution=4)
        accumulated.reset_pipeline_stage_assignment()  # a plain model again
        assert [a.pipeline_stage for a in accumulated.get_pipeline_stage_assignment()] == [
            None, None]
        # On the 2-IPU device a plain model runs as 2 replicas: 2 batches each per update.
        accumulated.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=2)
        accumulated.evaluate(dataset(), verbose=0)
        accumulated.fit(dataset(), epochs=2, verbose=0)
    for mine, theirs in zip(model.get_weights(), accumulated.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


def test_functional_assignment_can_be_set_from_the_one_read_back(strategy, capsys):
    with strategy.scope():
        inputs = tf.keras.Input((4,), batch_size=BATCH)
        hidden = tf.keras.layers.Dense(8, name="hidden")(inputs)
        outputs = tf.keras.layers.Dense(1, name="head")(hidden)
        model = tf.keras.Model(inputs, outputs)
        with record.capture() as runs:
            model.compile(optimizer="sgd", loss="mse", steps_per_execution=4)
            model.fit(dataset(4), verbose=0)  # not pipelined: runs on one IPU
        assert runs.runs[-1].stages == () and runs.runs[-1].pipeline is None
        assignment = model.get_pipeline_stage_assignment()
        for stage, item in enumerate(assignment):
            item.pipeline_stage = stage
        model.set_pipeline_stage_assignment(assignment)
        model.print_pipeline_stage_assignment_summary()
        backwards = model.get_pipeline_stage_assignment()
        backwards[0].pipeline_stage, backwards[1].pipeline_stage = 1, 0
        with pytest.raises(ValueError) as caught:
            model.set_pipeline_stage_assignment(backwards)
    assert str(caught.value) == ("Layer head in pipeline stage 0 has a dependency from a "
                                 "pipeline stage 1 which is after the current stage.")
    summary = capsys.readouterr().out
    assert "hidden (Dense) (0)" in summary and "head (Dense) (0)" in summary
    assert [a.pipeline_stage for a in model.get_pipeline_stage_assignment()] == [0, 1]


def test_training_a_pipelined_model_needs_accumulation_steps(strategy):
    with strategy.scope():
        model = sequential()
        model.set_pipeline_stage_assignment([0, 1])
        with pytest.raises(ValueError) as caught:
            model.fit(dataset(), verbose=0)
        model.predict(dataset(), verbose=0)  # inference needs no accumulation
    assert str(caught.value) == (
        "The model which you are attempting to train is pipelined, however "
        "`gradient_accumulation_steps_per_replica` has not been set through "
        "`set_pipelining_options()`. You need to set this value as pipelined models will "
        "perform gradient accumulation when training.")


def test_steps_per_execution_must_divide_into_accumulations(strategy):
    with strategy.scope():
        model = sequential(steps_per_execution=8)
        model.set_pipeline_stage_assignment([0, 1])
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=12)
        with pytest.raises(RuntimeError) as caught:
            model.fit(dataset(), verbose=0)
    assert str(caught.value) == (
        "The pipelined model has been configured to use gradient accumulation for training, "
        "however the current `steps_per_execution` value (set to 8) is not divisible by "
        "`gradient_accumulation_steps_per_replica` (12). You need to adjust either "
        "`steps_per_execution` or`gradient_accumulation_steps_per_replica` to make sure that "
        "`steps_per_execution` is divisible by `gradient_accumulation_steps_per_replica`.")


SUFFIX = ("This number might be called `gradient_accumulation_count`, "
          "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending on the "
          "API used.")


def test_accumulation_steps_follow_the_schedule_rule(strategy):
    with strategy.scope():
        model = sequential(steps_per_execution=8)
        model.set_pipeline_stage_assignment([0, 1])
        # Grouped (the default), training 2 stages: a multiple of 2 x 2 micro-batches.
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=2)
        with pytest.raises(tf.errors.FailedPreconditionError) as caught:
            model.fit(dataset(), verbose=0)
        assert caught.value.message == ("The number of iterations of the pipeline must be a "
                                        "multiple of 4, but it is 2. " + SUFFIX)
        # Interleaved: a multiple of the 2 stages.
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=2,
            pipeline_schedule=pipelining_ops.PipelineSchedule.Interleaved)
        with record.capture() as runs:
            model.fit(dataset(), verbose=0)
        assert runs.runs[-1].pipeline.schedule == "interleaved"
        assert runs.runs[-1].pipeline.gradient_accumulation_count == 2
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4,
                                     pipeline_schedule="grouped")
        with pytest.raises(TypeError) as caught:
            model.fit(dataset(), verbose=0)
        assert str(caught.value) == ("The given pipeline_schedule is not a member of the "
                                     "PipelineSchedule enumeration.")
        # Inference pipelines all the execution's steps: grouped needs a multiple of 2.
        model.compile(optimizer="sgd", loss="mse", steps_per_execution=1)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        with pytest.raises(tf.errors.FailedPreconditionError) as caught:
            model.evaluate(dataset(), verbose=0)
    assert caught.value.message == ("The number of iterations of the pipeline must be a "
                                    "multiple of 2, but it is 1. " + SUFFIX)


def test_stages_need_the_ipus_they_are_mapped_to(strategy):
    with strategy.scope():
        model = sequential()
        model.set_pipeline_stage_assignment([0, 1])
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4,
                                     device_mapping=[0, 2])  # IPU 2: 4 shards
        with pytest.raises(ValueError) as caught:
            model.fit(dataset(), verbose=0)
        assert str(caught.value) == ("Current device has 2 IPUs attached, however the current "
                                     "model requires a multiple of 4 IPUs.")
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4,
                                     device_mapping=[0, 1, 1])
        with pytest.raises(ValueError) as caught:
            model.fit(dataset(), verbose=0)
        assert str(caught.value) == "Each stage must be mapped to an IPU: 3 mappings != 2 stages"
        model.set_pipelining_options(
            gradient_accumulation_steps_per_replica=4,
            forward_propagation_stages_poplar_options=[pipelining_ops.PipelineStageOptions()])
        with pytest.raises(ValueError) as caught:
            model.fit(dataset(), verbose=0)
        assert str(caught.value) == (
            "forward_propagation_stages_poplar_options must be a list or a tuple of "
            "PipelineStageOptions objects of length 2 (same number as the number of "
            "computational stages) but is 1.")
        model.set_pipeline_stage_assignment([0, 0])
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        with pytest.raises(ValueError) as caught:
            model.fit(dataset(), verbose=0)
    assert str(caught.value) == "Pipeline requires at least two computational stages."


def test_pipelining_options_are_checked(strategy):
    with strategy.scope():
        model = sequential()
        for bad in (0, -1, 2.5):
            with pytest.raises(ValueError) as caught:
                model.set_pipelining_options(gradient_accumulation_steps_per_replica=bad)
            assert str(caught.value) == (
                "Expected `gradient_accumulation_steps_per_replica` to be a positive integer, "
                "but got {} instead.".format(bad))
        # (``device_mapping`` and ``accumulate_outfeed`` are named arguments: Python never
        # puts them in ``pipelining_kwargs``.)
        expected = {
            "gradient_accumulation_count": "Set the `gradient_accumulation_steps_per_replica` "
                                           "argument to `set_pipelining_options` instead.",
            "computational_stages": "This argument is automatically set by Keras.",
            "repeat_count": "This argument is automatically set by Keras.",
            "optimizer_function": "This argument is automatically set by Keras.",
            "outfeed_loss": "This argument is not compatible with Keras.",
            "batch_serialization_iterations": "This argument is not compatible with Keras.",
        }
        for key, hint in expected.items():
            with pytest.raises(ValueError) as caught:
                model.set_pipelining_options(gradient_accumulation_steps_per_replica=4,
                                             **{key: 1})
            assert str(caught.value) == "Found `{}` key in `pipelining_kwargs`. {}".format(
                key, hint)
        for bad in ("01", [0, "1"], [0, 1.0]):
            with pytest.raises(ValueError) as caught:
                model.set_pipelining_options(device_mapping=bad)
            assert str(caught.value) == "Expected `device_mapping` to be a list of integers."


def test_stage_assignments_are_checked(strategy):
    with strategy.scope():
        model = sequential()
        with pytest.raises(ValueError) as caught:
            model.set_pipeline_stage_assignment([0, 1, 1])
        assert str(caught.value) == (
            "The size of the provided `pipeline_stage_assignment` (3) does not match the number "
            "of layers in the model (currently 2). Each layer in a Sequential model needs to be "
            "assigned to a pipeline stage.")
        with pytest.raises(ValueError) as caught:
            model.set_pipeline_stage_assignment([1, 0])
        assert str(caught.value) == ("Layer dense_1 in pipeline stage 0 has a dependency from "
                                     "a pipeline stage 1 which is after the current stage."
                                     .replace("dense_1", model.layers[1].name))
        with pytest.raises(ValueError, match=r"^`pipeline_stage_assignment` needs to be a list"):
            model.set_pipeline_stage_assignment("0, 1")
        with pytest.raises(ValueError, match=r"^All elements of `pipeline_stage_assignment`"):
            model.set_pipeline_stage_assignment([0, "1"])
        with pytest.raises(ValueError, match=r"must be a non-negative integer"):
            ipu_keras.PipelineStage(-1)


def test_recorded_run_simulates_a_pipeline_over_two_ipus(strategy):
    with strategy.scope():
        model = functional(steps_per_execution=16)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
        model.fit(dataset(), verbose=0)
    run = record.last_runs(1).runs[0]
    assert run.iterations == 16
    assert run.pipeline.schedule == "grouped" and run.pipeline.device_mapping == (0, 1)
    assert (run.pipeline.gradient_accumulation_count, run.pipeline.repeat_count) == (8, 2)
    assert [stage.layers for stage in run.stages] == [("hidden",), ("head",)]
    hidden, head = run.stages
    # Stage 0 holds the 4x8 kernel: its forward matmul is 2*8*4*8 FLOPs per micro-batch.
    assert hidden.forward_flops >= 2 * BATCH * 4 * 8
    assert hidden.parameter_bytes == (4 * 8 + 8) * 4 and head.parameter_bytes == (8 + 1) * 4
    assert hidden.output_bytes == head.input_bytes == BATCH * 8 * 4
    timeline = record.last_runs(1).simulate()
    assert timeline.lanes == ["host", "IPU0", "IPU1"]
    for lane in ("IPU0", "IPU1"):
        kinds = {event.kind for event in timeline.events if event.lane == lane}
        assert {"forward", "backward"} <= kinds, (lane, kinds)
    # Inference: one pass of the execution's 16 micro-batches, forward only.
    with strategy.scope():
        model.evaluate(dataset(), verbose=0)
    run = record.last_runs(1).runs[0]
    assert not run.pipeline.training and run.pipeline.gradient_accumulation_count == 16
    assert all(stage.backward_flops == 0 for stage in run.stages)
    timeline = record.last_runs(1).simulate()
    assert timeline.lanes == ["host", "IPU0", "IPU1"]
    assert {e.kind for e in timeline.events if e.lane == "IPU1"} & {"forward", "backward"} == {
        "forward"}
