"""Notebook 02's code exercise: the solution passes, and each realistic wrong attempt gets its
own hint drawn from what the attempt's program did (run in process, no kernel per attempt)."""
import json
from types import SimpleNamespace

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb02_loops as code_exercises
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell, keeping_the_configuration)

v1 = tf.compat.v1
STEPS = code_exercises.STEPS


def batch_loss(images, labels):
    logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
    return v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)


def minimize(loss):
    return v1.train.GradientDescentOptimizer(0.05).minimize(loss)


def infeed_of(images, labels, drop_remainder=True, batch=32):
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    return ipu.ipu_infeed_queue.IPUInfeedQueue(
        dataset.batch(batch, drop_remainder=drop_remainder))


def looped(drop_remainder=True, initialize=True, repeat_count=None, launches=1,
           compiled=True, batch=32):
    """The tutorial's program as a learner might write it: ``launches`` sess.runs of a repeat
    of ``repeat_count`` steps (all of them by default), fed by an infeed."""
    def train(images, labels, steps):
        infeed = infeed_of(images, labels, drop_remainder, batch)

        def loop_body(total_loss, images, labels):
            loss = batch_loss(images, labels)
            return [total_loss + loss, minimize(loss)]

        def all_steps():
            return ipu.loops.repeat(repeat_count or steps, loop_body, inputs=[0.0],
                                    infeed_queue=infeed)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            program = ipu.ipu_compiler.compile(all_steps) if compiled else all_steps()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            if initialize:
                sess.run(infeed.initializer)
            for _ in range(launches):
                sess.run(program)
    return train


def repeat_on_a_placeholder(images, labels, steps):
    """A repeat without an infeed: the loop trains on a batch fed once through placeholders."""
    batch_images = v1.placeholder(tf.float32, [32, 28, 28])
    batch_labels = v1.placeholder(tf.int32, [32])

    def loop_body(total_loss):
        loss = batch_loss(batch_images, batch_labels)
        return [total_loss + loss, minimize(loss)]

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, loop_body, inputs=[0.0]))
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(program, {batch_images: images[:32], batch_labels: labels[:32]})


def body_without_the_total(images, labels, steps):
    """A body that forgets the loop-carried value comes first."""
    infeed = infeed_of(images, labels)

    def loop_body(images, labels):
        loss = batch_loss(images, labels)
        return [loss, minimize(loss)]

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, loop_body, inputs=[0.0], infeed_queue=infeed))


def the_loss_returned_nothing_carried(images, labels, steps):
    """A body that builds the update but returns the loss, with no loop-carried values."""
    infeed = infeed_of(images, labels)

    def loop_body(images, labels):
        loss = batch_loss(images, labels)
        minimize(loss)
        return loss

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(steps, loop_body, infeed_queue=infeed))


def starting_code():
    namespace = {"tf": v1, "ipu": ipu}
    exec(code_exercises.STARTING_CODE, namespace)  # pylint: disable=exec-used
    return namespace["train"]


WRONG_ATTEMPTS = {
    "the loop left in Python around sess.run": (
        starting_code(), f"{STEPS} engine runs of one step each: the loop is still outside"),
    "a repeat fed from a placeholder, no infeed": (repeat_on_a_placeholder,
                                                    "but no infeed fed it"),
    "a dataset batched without drop_remainder": (
        looped(drop_remainder=False),
        "is not fully defined. If using tf.Dataset.batch, set `drop_remainder=True`. Hint: the "
        "infeed needs batches of one fixed size"),
    "the infeed's initializer not run": (
        looped(initialize=False),
        "FailedPreconditionError: Trying to access an infeed dataset iterator which has not "
        "been created"),
    "a repeat of a few steps, launched several times": (
        looped(repeat_count=5, launches=4),
        "4 engine runs (of 5, 5, 5, 5 steps): the loop is on the IPU, but the host"),
    "a repeat of the wrong count": (looped(repeat_count=10), "asked train for 20 steps"),
    "the loss returned where nothing is carried": (
        the_loss_returned_nothing_carried,
        "with no inputs, return only ops, minimize's result rather than the loss"),
    "a body without the loop-carried total": (
        body_without_the_total, "the loop calls its body with the loop-carried values "
                                "(`inputs`) first"),
    "batches of 16": (looped(batch=16), "each step took 16 images where the starting code's"),
    "a program built but never run": (looped(launches=0), "the session never ran it"),
    "the loop built in ipu_scope, never compiled": (
        looped(compiled=False), "your loop was built inside ipu_scope but not compiled"),
}


def test_the_solution_passes_and_says_what_fed_the_loop_keeping_the_learners_configuration():
    feedback = keeping_the_configuration(
        lambda: code_exercises.check_loop_on_device(code_exercises.solution))
    assert feedback.ok, feedback.text
    assert "one engine run of 20 iterations, fed by the infeed" in feedback.text
    assert "(100,480 bytes: 32 images and their labels)" in feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    code, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_loop_on_device(code), attempt, WRONG_ATTEMPTS)


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_loop_on_device)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_loop_on_device(starting_code()).ok
    half_repeat = SimpleNamespace(repeat=lambda n, *args, **named: ipu.loops.repeat(
        n // 2, *args, **named))   # a solution drifted to half the steps
    monkeypatch.setattr(code_exercises, "loops", half_repeat)
    with pytest.raises(SolutionFailed):
        code_exercises.check_loop_on_device()


def test_the_starting_code_runs_a_step_per_engine_run_and_is_the_notebooks_exercise_cell():
    feedback = code_exercises.check_loop_on_device(starting_code())
    assert "the loop is still outside the IPU program" in feedback.text
    notebook = ROOT / "notebooks" / "02_loops_and_data_pipelines.ipynb"
    assert exercise_cell(notebook) == code_exercises.STARTING_CODE  # what a reset restores


def test_the_solution_the_notebook_shows_passes():
    notebook = json.loads((ROOT / "notebooks" / "02_loops_and_data_pipelines.ipynb").read_text())
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    [shown] = [s for s in sources if s.startswith("<details>") and "def train(" in s]
    namespace = {"tf": v1, "ipu": ipu}
    exec(shown.split("```python\n")[1].split("```")[0], namespace)  # pylint: disable=exec-used
    assert code_exercises.check_loop_on_device(namespace["train"]).ok
