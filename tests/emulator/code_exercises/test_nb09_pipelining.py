"""Notebook 09's code exercise: the solution passes, and each realistic wrong attempt gets its
own hint drawn from what the attempt's program did or the SDK's own error (run in process, no
kernel per attempt)."""
import functools

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb09_pipelining as code_exercises
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell, keeping_the_configuration)

Schedule = ipu.pipelining_ops.PipelineSchedule
WIDTHS = [("dense256", 256), ("dense128", 128), ("dense64", 64), ("dense32", 32)]


def model(dense_layers_first=3, schedule=Schedule.Grouped, accumulation_count=16,
          repeat_count=4, bare_optimizer=False, extra_stage=False, **options):
    """A pipelined model as a learner might write it: the first stage builds flatten and
    the first ``dense_layers_first`` dense layers (3: up to dense64, as the tutorial), the second
    the rest; ``bare_optimizer`` returns the optimizer without OptimizerFunctionOutput;
    ``extra_stage`` adds a stage that passes its inputs on; ``options`` go to the pipeline."""
    cut = dense_layers_first

    def stage1(learning_rate, images, labels):
        with tf.compat.v1.variable_scope("flatten"):
            activations = tf.keras.layers.Flatten()(images)
        for name, width in WIDTHS[:cut]:
            with tf.compat.v1.variable_scope(name):
                activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(activations)
        return learning_rate, activations, labels

    def middle(*outputs):
        return outputs

    def stage2(learning_rate, activations, labels):
        for name, width in WIDTHS[cut:]:
            with tf.compat.v1.variable_scope(name):
                activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(activations)
        with tf.compat.v1.variable_scope("logits"):
            logits = tf.keras.layers.Dense(10)(activations)
        with tf.compat.v1.variable_scope("softmax_ce"):
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits))
        return learning_rate, loss

    def optimizer_function(learning_rate, loss):
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
        if bare_optimizer:
            return optimizer
        return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    def pipelined_model(learning_rate, infeed, outfeed):
        return ipu.pipelining_ops.pipeline(
            computational_stages=[stage1, middle, stage2] if extra_stage else [stage1, stage2],
            gradient_accumulation_count=accumulation_count, repeat_count=repeat_count,
            inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=optimizer_function, pipeline_schedule=schedule,
            outfeed_loss=True, **options)
    return pipelined_model


def starting_code():
    namespace = {"tf": tf.compat.v1, "ipu": ipu}
    exec(code_exercises.STARTING_CODE, namespace)  # pylint: disable=exec-used
    return namespace["pipelined_model"]


WRONG_ATTEMPTS = {
    "step 2's sharded loop, unchanged": (starting_code, "still a repeat loop over ipu_shard"),
    "the cut one layer late": (lambda: model(dense_layers_first=4),
                               "dense32 ran in your first stage, on IPU0"),
    "the Interleaved schedule": (lambda: model(schedule=Schedule.Interleaved),
                                 "the schedule was Interleaved; the tutorial asks for Grouped"),
    "a count Grouped refuses": (
        lambda: model(accumulation_count=6),
        "FailedPreconditionError: The number of iterations of the pipeline must be a multiple "
        "of 4, but it is 6."),
    "another count Grouped accepts": (lambda: model(accumulation_count=8),
                                      "updated the weights every 8 micro-batches"),
    "the repeat count left out": (lambda: model(repeat_count=1),
                                  "each sess.run made 1 pass of 16 micro-batches"),
    "the bare optimizer returned": (lambda: model(bare_optimizer=True),
                                    "return the optimizer and the loss together"),
    "the stages swapped between the IPUs": (lambda: model(device_mapping=[1, 0]),
                                            "your first stage ran on IPU1"),
    "a third stage on two IPUs": (lambda: model(extra_stage=True),
                                  "so the pipeline has two stages, one per IPU"),
}


def test_the_solution_passes_and_says_what_ran_keeping_the_learners_configuration():
    feedback = keeping_the_configuration(
        lambda: code_exercises.check_pipelined_model(code_exercises.solution))
    assert feedback.ok, feedback.text
    assert "a Grouped pipeline of two stages" in feedback.text
    assert "4 passes of 16 micro-batches" in feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    make, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_pipelined_model(make()), attempt, WRONG_ATTEMPTS)


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_pipelined_model)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_pipelined_model(starting_code()).ok
    monkeypatch.setattr(code_exercises, "SCHEDULE", "interleaved")
    with pytest.raises(SolutionFailed):
        code_exercises.check_pipelined_model()


def test_the_starting_code_is_the_notebooks_exercise_cell():
    notebook = ROOT / "notebooks" / "09_pipelining.ipynb"
    assert exercise_cell(notebook) == code_exercises.STARTING_CODE  # what a reset restores


def pipelined_as_the_tutorial(optimizer="gradient descent", outfeed_loss=True, lr_scale=1.0):
    """The tutorial's step 3 with the optimizer, outfeed_loss or the learning rate changed."""
    def pipelined_model(learning_rate, infeed, outfeed):
        def optimizer_function(learning_rate, loss):
            made = {"gradient descent": lambda: tf.compat.v1.train.GradientDescentOptimizer(
                        learning_rate * lr_scale),
                    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(learning_rate, 0.9),
                    "adam": lambda: tf.compat.v1.train.AdamOptimizer(0.001),
                    "step 2's accumulating one": lambda: (
                        ipu.optimizers.GradientAccumulationOptimizerV2(
                            tf.compat.v1.train.GradientDescentOptimizer(learning_rate),
                            num_mini_batches=16))}[optimizer]()
            return ipu.pipelining_ops.OptimizerFunctionOutput(made, loss)

        return ipu.pipelining_ops.pipeline(
            computational_stages=[code_exercises.tutorial_stage1, code_exercises.tutorial_stage2],
            gradient_accumulation_count=16, repeat_count=4, inputs=[learning_rate],
            infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=optimizer_function,
            pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped,
            outfeed_loss=outfeed_loss)
    return pipelined_model


@pytest.mark.parametrize("optimizer,shown", [("momentum", "Momentum"), ("adam", "Adam")])
def test_another_optimizer_is_accepted_and_named(optimizer, shown):
    """The task leaves the optimizer free: its slots are no stage's layers, and the verdict
    says the weights were not compared."""
    feedback = code_exercises.check_pipelined_model(pipelined_as_the_tutorial(optimizer))
    assert feedback.ok, feedback.text
    assert f"with {shown} as your optimizer" in feedback.text


def test_the_loss_not_outfed_alone_is_caught():
    feedback = code_exercises.check_pipelined_model(pipelined_as_the_tutorial(
        outfeed_loss=False))
    assert not feedback.ok and "task c asks for outfeed_loss=True" in feedback.text


def test_a_learning_rate_sixteen_times_smaller_is_caught_by_the_weights():
    feedback = code_exercises.check_pipelined_model(pipelined_as_the_tutorial(
        lr_scale=1 / 16))
    assert not feedback.ok and "times smaller. The pipeline adds up" in feedback.text


def test_step_2s_accumulating_optimizer_left_in_optimizer_function_is_named():
    feedback = code_exercises.check_pipelined_model(pipelined_as_the_tutorial(
        "step 2's accumulating one"))
    assert not feedback.ok
    assert "wraps its optimizer in GradientAccumulationOptimizerV2" in feedback.text


def spelled_otherwise(learning_rate, infeed, outfeed):
    """Step 3 written another way: the stages positional, the device mapping and the Grouped
    schedule left to their defaults, the optimizer function a lambda."""
    return ipu.pipelining_ops.pipeline(
        [code_exercises.tutorial_stage1, code_exercises.tutorial_stage2], 16,
        repeat_count=4, inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=lambda lr, loss: ipu.pipelining_ops.OptimizerFunctionOutput(
            tf.compat.v1.train.GradientDescentOptimizer(lr), loss),
        outfeed_loss=True)


def test_the_pipeline_spelled_otherwise_is_right():
    feedback = code_exercises.check_pipelined_model(spelled_otherwise)
    assert feedback.ok, feedback.text


def test_the_gradients_averaged_by_the_pipeline_are_right_and_said():
    """The task does not name the reduction: the SDK's MEAN is accepted (compared with the
    reference run that averages too), while a learning rate divided by 16 is not."""
    averaged = functools.partial(code_exercises.solution, reduction_method="mean")
    feedback = code_exercises.check_pipelined_model(averaged)
    assert feedback.ok and "with a mean of the gradients" in feedback.text, feedback.text


def pipeline_without_its_inputs(learning_rate, infeed, outfeed):
    """Step 3 with inputs=[learning_rate] left out: stage1 is called without it."""
    return ipu.pipelining_ops.pipeline(
        [code_exercises.tutorial_stage1, code_exercises.tutorial_stage2], 16, repeat_count=4,
        infeed_queue=infeed, outfeed_queue=outfeed, outfeed_loss=True,
        optimizer_function=lambda lr, loss: ipu.pipelining_ops.OptimizerFunctionOutput(
            tf.compat.v1.train.GradientDescentOptimizer(lr), loss))


def test_the_pipeline_without_its_inputs_gets_the_hint_about_stage_arguments():
    feedback = code_exercises.check_pipelined_model(pipeline_without_its_inputs)
    assert not feedback.ok and "give the pipeline inputs=[learning_rate]" in feedback.text
