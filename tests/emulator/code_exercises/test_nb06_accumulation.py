"""Notebook 06's code exercise: the solution passes, and each realistic wrong attempt gets its
own hint drawn from what the attempt's program did (the record's weight updates, accumulation
count, mini-batches and engine runs), or from the SDK's own error (run in process, no kernel
per attempt).  Most attempts are the starting code edited as a learner would."""
import json
from types import SimpleNamespace

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb06_accumulation as code_exercises
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell, keeping_the_configuration)

v1 = tf.compat.v1
NOTEBOOK = ROOT / "notebooks" / "06_single_ipu_gradient_accumulation.ipynb"
START = code_exercises.STARTING_CODE
PLAIN_OPTIMIZER = "optimizer = tf.train.GradientDescentOptimizer(0.01)"


def edited(count=None, repeat=20, launches=1, learning_rate="0.01", returned="minimize"):
    """The starting code with the optimizer wrapped to accumulate ``count`` mini-batches (None:
    not wrapped), a loop of ``repeat`` mini-batches, launched ``launches`` times per run; the
    learning rate and what the step returns as written."""
    code = START.replace("repeat(20,", f"repeat({repeat},")
    if count is not None:
        code = code.replace(PLAIN_OPTIMIZER, (
            "optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(\n"
            f"            tf.train.GradientDescentOptimizer({learning_rate}), "
            f"num_mini_batches={count})"))
    if returned == "the loss":   # minimize built, never returned: nothing runs it
        code = code.replace("return optimizer.minimize(loss)",
                            "optimizer.minimize(loss)\n        return tf.group(loss)")
    if launches != 1:
        code = code.replace("            sess.run(train_on_ipu)",
                            f"            for _ in range({launches}):\n"
                            f"                sess.run(train_on_ipu)")
    return train_of(code)


def train_of(code):
    namespace = {"tf": v1, "ipu": ipu}
    exec(code, namespace)  # pylint: disable=exec-used
    return namespace["train"]


def accumulated_by_hand(images, labels, runs):
    """The accumulation written by hand: a one-mini-batch program adds the gradients to
    variables, and every 16 sess.runs a second program applies their sum."""
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))
    layer = tf.keras.layers.Dense(10)
    optimizer = v1.train.GradientDescentOptimizer(0.01)
    sums = []

    def add_gradients(images, labels):
        logits = layer(tf.keras.layers.Flatten()(images))
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        adds = []
        for gradient, variable in optimizer.compute_gradients(loss):
            with tf.init_scope():
                total = tf.Variable(tf.zeros(variable.shape), trainable=False)
            sums.append((total, variable))
            adds.append(total.assign_add(gradient))
        return tf.group(adds)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        accumulate = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(1, add_gradients, infeed_queue=infeed))
        apply = ipu.ipu_compiler.compile(
            lambda: optimizer.apply_gradients([(t.read_value(), v) for t, v in sums]))
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(infeed.initializer)
        for _ in range(runs):
            for _ in range(2):
                for _ in range(16):
                    sess.run(accumulate)
                sess.run(apply)


def accumulating_without_a_loop(images, labels, runs):
    """The wrapped optimizer in a program of one step, fed by a host iterator: no loop."""
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    next_batch = v1.data.make_one_shot_iterator(dataset.batch(32, drop_remainder=True)).get_next()

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        return ipu.optimizers.GradientAccumulationOptimizerV2(
            v1.train.GradientDescentOptimizer(0.01), num_mini_batches=16).minimize(loss)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        step = ipu.ipu_compiler.compile(training_step, inputs=next_batch)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(runs * 32):
            sess.run(step)


WRONG_ATTEMPTS = {
    "the starting code: the optimizer not wrapped": (
        train_of(START), "each run changed the weights 20 times, once per mini-batch"),
    "not wrapped, the loop made 32 mini-batches": (
        edited(repeat=32), "each run changed the weights 32 times, once per mini-batch"),
    "wrapped, the loop not a multiple of 16": (
        edited(count=16, repeat=20),
        # the SDK's message, folded to its first line
        "FailedPreconditionError: Detected a gradient accumulation operation with 16 number of "
        "mini batches inside a loop with 20 iterations. Hint: the loop would stop in the "
        "middle of a group"),
    "the learning rate divided by 16 beside the accumulation": (
        edited(count=16, repeat=32, learning_rate="0.01 / 16"),
        "times smaller. The wrapper adds the 16 mini-batches' gradients up"),
    "minimize built but the loss returned": (
        edited(count=16, repeat=32, returned="the loss"), "the weights never changed"),
    "the wrong count": (
        edited(count=8, repeat=32),
        "your optimizer added up 8 mini-batches per weight update (4 updates per run)"),
    "one group per run": (
        edited(count=16, repeat=16),
        "each run made 16 mini-batches, so it changed the weights once. Task b"),
    "one group per sess.run, two sess.runs per run": (
        edited(count=16, repeat=16, launches=2),
        "your program made 6 engine runs (of 16, 16, 16, 16, 16, 16 mini-batches)"),
    "accumulated by hand across sess.run calls": (
        accumulated_by_hand,
        "your program made 102 engine runs where the check asked train for 3 runs: 96 "
        "mini-batches and 6 weight updates, the gradients added up across sess.run calls"),
    "accumulating without a loop": (
        accumulating_without_a_loop,
        "Detected a gradient accumulation operation which is not inside a training loop. The "
        "model with the gradient accumulation operation needs to be wrapped in a training loop. "
        "Hint:"),
    "a count of zero": (
        edited(count=0, repeat=32),
        "ValueError: num_mini_batches must be a positive number. Hint: num_mini_batches is "
        "how many mini-batches make one weight update"),
}


def test_the_solution_passes_and_counts_the_weight_updates_keeping_the_learners_configuration():
    feedback = keeping_the_configuration(
        lambda: code_exercises.check_accumulating_training(code_exercises.solution))
    assert feedback.ok, feedback.text
    assert ("3 engine runs of 32 mini-batches each, and the optimizer added up 16 of them per "
            "update: each run changed the weights twice (6 in all, instead of 96)") in feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    code, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_accumulating_training(code), attempt, WRONG_ATTEMPTS)


def test_the_record_counts_the_weight_updates_of_what_ran():
    """``EngineRun.weight_updates``, read by the check, from real emulated runs: the loop's
    mini-batches over the accumulation count; none for a program that only adds gradients
    up; one for the program that applies them."""
    def updates(train):
        return [(run.iterations, run.gradient_accumulation_count, run.weight_updates)
                for run in code_exercises.run_training(train).runs.runs]
    assert updates(code_exercises.solution) == [(32, 16, 2)] * 3
    assert updates(train_of(START)) == [(20, 1, 20)] * 3
    by_hand = set(updates(accumulated_by_hand))
    assert by_hand == {(1, 1, 0), (1, 1, 1)}


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_accumulating_training)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_accumulating_training(train_of(START)).ok
    monkeypatch.setattr(code_exercises, "optimizers", SimpleNamespace(
        GradientAccumulationOptimizerV2=lambda optimizer, num_mini_batches: optimizer))
    with pytest.raises(SolutionFailed):   # a solution that lost its wrapper
        code_exercises.check_accumulating_training()


def test_the_starting_code_is_the_notebooks_exercise_cell():
    assert exercise_cell(NOTEBOOK) == START   # what a reset restores


def test_the_solution_the_notebook_shows_passes():
    notebook = json.loads(NOTEBOOK.read_text())
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    [shown] = [s for s in sources if s.startswith("<details>") and "def train(" in s]
    feedback = code_exercises.check_accumulating_training(
        train_of(shown.split("```python\n")[1].split("```")[0]))
    assert feedback.ok, feedback.text


def test_one_engine_run_more_than_asked_is_caught_at_the_boundary():
    """Right with the runs asked for, not with one more (the rule's boundary)."""
    solved = edited(count=16, repeat=32)
    assert code_exercises.check_accumulating_training(solved).ok
    one_more = START.replace("repeat(20,", "repeat(32,").replace(PLAIN_OPTIMIZER, (
        "optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(\n"
        "            tf.train.GradientDescentOptimizer(0.01), num_mini_batches=16)"))
    one_more += "\n        sess.run(train_on_ipu)               # one run too many"
    feedback = code_exercises.check_accumulating_training(train_of(one_more))
    assert not feedback.ok and "made 4 engine runs" in feedback.text, feedback.text
