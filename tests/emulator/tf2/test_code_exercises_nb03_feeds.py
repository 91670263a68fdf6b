"""Notebook 03's code exercises (TF2, so here with the other TF2 tests, in their child process):
each solution passes, and each realistic wrong attempt gets its own hint drawn from what the
attempt's program did (run in process, no kernel per attempt)."""
import contextlib
import json
import linecache

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb03_feeds as code_exercises
from ipu_emulator.code_exercises.nb03_feeds import loss_and_update, make_model, make_optimizer
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode)
from tests.support.ipu_systems import configure_ipus

pytestmark = pytest.mark.tf2

NOTEBOOK = ROOT / "notebooks" / "03_tf2_infeed_outfeed.ipynb"
STEPS = code_exercises.STEPS


def notebook_namespace():
    """What the exercise cells can use: the notebook's imports and helpers."""
    return {"tf": tf, "ipu": ipu, "np": np, "make_model": make_model,
            "make_optimizer": make_optimizer, "loss_and_update": loss_and_update}


_FEEDBACK = {}


def judged(check, code):
    """``check(code)``, run once in this module: the tests that read different things in one
    attempt's feedback share its run (each run trains)."""
    key = (check.exercise_name, code)
    if key not in _FEEDBACK:
        _FEEDBACK[key] = check(code)
    return _FEEDBACK[key]


def defined(source, name):
    """``name`` from ``source`` run as a notebook cell: like IPython, its lines are kept in
    ``linecache`` so that AutoGraph can read them (it converts a ``tf.range`` loop from source)."""
    filename = f"<exercise cell {len(linecache.cache)}: {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = notebook_namespace()
    exec(compile(source, filename, "exec"), namespace)  # pylint: disable=exec-used
    return namespace[name]


# --- 03.outfeed-loop: attempts a learner may write -------------------------------------------

def looped(steps_per_execution=10, send="every step", dequeue="once", infeed=True,
           give_back="dequeued", loop="tf.range", compile_flag="jit_compile", args="list",
           outfeed_mode=None, count="int", give_back_as="tensor"):
    """Tutorial 3's program with one thing changed: the loss sent ``"every step"``, ``"after
    the loop"`` or ``"never"`` (returned by the run instead); the dequeue ``"once"``, ``"each
    run"`` (only the last one returned) or ``"never"``; the batches from the infeed, or one
    batch handed in by the host for each run."""
    def train(dataset, steps):
        strategy = ipu.ipu_strategy.IPUStrategy()
        host_batches = iter(dataset)

        @tf.function(**{compile_flag: True})
        def training_loop(batches, losses, model, optimizer, count):
            loss = tf.constant(0.0)
            for _ in (tf.range(count) if loop == "tf.range" else range(steps_per_execution)):
                images, labels = next(batches) if infeed else batches
                loss = loss_and_update(model, optimizer, images, labels)
                if send == "every step":
                    losses.enqueue(loss)
            if send == "after the loop":
                losses.enqueue(loss)
            return loss

        with strategy.scope():
            model, returned = make_model(), None
            optimizer = make_optimizer(model)
            batches = iter(dataset)
            losses = ipu.ipu_outfeed_queue.IPUOutfeedQueue(
                **({} if outfeed_mode is None else {"outfeed_mode": outfeed_mode}))
            each = steps_per_execution if count == "int" else tf.constant(steps_per_execution)
            for _ in range(0, steps, steps_per_execution):
                fed = batches if infeed else next(host_batches)
                given = [fed, losses, model, optimizer, each]
                last = strategy.run(training_loop, args=given if args == "list" else tuple(given))
                if dequeue == "each run":
                    returned = losses.dequeue()
                elif dequeue == "each run, all kept":
                    returned = tf.concat([returned, losses.dequeue()], 0) \
                        if returned is not None else losses.dequeue()
                elif send == "never":
                    returned = (returned or []) + [last]
            if dequeue == "once":
                returned = losses.dequeue()
        if give_back == "zeros":
            return tf.zeros_like(returned)
        return returned.numpy() if give_back_as == "numpy" else returned
    return train


def runs_of_different_lengths(dataset, steps):
    """25 steps per execution, and a last, shorter run for the steps left."""
    strategy = ipu.ipu_strategy.IPUStrategy()

    @tf.function
    def training_loop(batches, losses, model, optimizer, count):
        for _ in tf.range(count):
            images, labels = next(batches)
            losses.enqueue(loss_and_update(model, optimizer, images, labels))

    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        batches, losses = iter(dataset), ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        for start in range(0, steps, 25):
            strategy.run(training_loop,
                         args=[batches, losses, model, optimizer, min(25, steps - start)])
        return losses.dequeue()


NEXT_ON_THE_HOST = '''
def train(dataset, steps):
    strategy = ipu.ipu_strategy.IPUStrategy()

    @tf.function(jit_compile=True)
    def training_step(images, labels, model, optimizer):
        return loss_and_update(model, optimizer, images, labels)

    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        batches = iter(dataset)              # an infeed, read by the host below
        for _ in range(steps):
            images, labels = next(batches)
            strategy.run(training_step, args=[images, labels, model, optimizer])
'''

NOT_A_TF_FUNCTION = '''
def train(dataset, steps):
    strategy = ipu.ipu_strategy.IPUStrategy()

    def training_loop(batches, losses, model, optimizer):
        for _ in tf.range(10):
            losses.enqueue(loss_and_update(model, optimizer, *next(batches)))

    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        batches, losses = iter(dataset), ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        for _ in range(steps // 10):
            strategy.run(training_loop, args=[batches, losses, model, optimizer])
        return losses.dequeue()
'''

OUTFEED_ATTEMPTS = {
    "the loop left in Python around strategy.run": (
        defined(code_exercises.STARTING_CODE, "train"),
        f"{STEPS} engine runs of one step each, each given its batch by the host"),
    "a loop fed by one batch from the host per run": (
        looped(infeed=False), "but no infeed fed them"),
    "steps per execution that do not divide the steps": (
        looped(steps_per_execution=8), "64 steps, but the check asked train for 60"),
    "runs of different lengths": (runs_of_different_lengths, "runs of different lengths"),
    "one step per execution": (looped(steps_per_execution=1),
                               "fed by the infeed: the loop is on the IPU, but it runs one "
                               "step per launch"),
    "the last loss returned, no outfeed": (looped(send="never", dequeue="never"),
                                           "it sent no loss through an outfeed"),
    "the outfeed enqueued after the loop": (looped(send="after the loop"),
                                            "the outfeed received one loss per run, not one "
                                            "per step"),
    "the outfeed never dequeued": (looped(dequeue="never"), "train returned none of them"),
    "a Python range inside the tf.function": (
        looped(loop="Python range"),
        "ValueError: An outfeed can only be enqueued once. Hint: a program enqueues to an "
        "outfeed in one place. Two enqueue calls do not, and nor does a Python `for _ in "
        "range(...)` loop"),
    "zeros returned in place of the losses": (looped(give_back="zeros"),
                                              f"but train returned {STEPS} other values"),
    "the outfeed dequeued but never enqueued": (
        looped(send="never", dequeue="once"),
        "ValueError: Trying to dequeue an outfeed which has not been enqueued. Hint: nothing "
        "was ever enqueued to the outfeed you dequeued"),
    "a dequeue after every run": (looped(dequeue="each run"),
                                  "but train returned 10 values. Each dequeue empties the outfeed"),
    "next() on the infeed in host code": (
        defined(NEXT_ON_THE_HOST, "train"),
        "RuntimeError: Accessing dataset elements can not be accessed in eager mode when "
        "inside 'IPUStrategy'."),
    "a plain Python function given to strategy.run": (
        defined(NOT_A_TF_FUNCTION, "train"),
        "ValueError: IPUStrategyV1.run(fn, ...) does not support eager execution. Either "
        "convert `fn` into a tf.function"),
}


def test_the_solution_passes_and_says_what_ran():
    # The learner's notebook had configured 4 IPUs: the check runs on one of its own, then
    # configures the learner's again.
    configure_ipus(4)
    feedback = code_exercises.check_outfeed_loop(code_exercises.solution)
    assert feedback.ok, feedback.text
    assert feedback.text.startswith("Right: 6 engine runs of 10 steps each, each taking its "
                                    "batches from the infeed")
    assert "one dequeue brought back all 60" in feedback.text
    assert_the_learners_ipus_are_configured(4)


def assert_the_learners_ipus_are_configured(count):
    from ipu_emulator.runtime import configured_system
    assert [d.num_ipus for d in configured_system.current().devices] == [count]


OUTFEED_ALTERNATIVES = {
    "the tutorial's own spelling, experimental_compile": looped(
        compile_flag="experimental_compile"),
    "strategy.run's args as a tuple": looped(args="tuple"),
    "the outfeed's mode ALL said outright": looped(
        outfeed_mode=ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL),
    "the count given as a tensor": looped(count="tensor"),
    "the losses returned as a NumPy array": looped(give_back_as="numpy"),
}


@pytest.mark.parametrize("alternative", OUTFEED_ALTERNATIVES)
def test_a_correct_outfeed_loop_written_another_way_is_right(alternative):
    feedback = code_exercises.check_outfeed_loop(OUTFEED_ALTERNATIVES[alternative])
    assert feedback.ok, feedback.text


def test_a_dequeue_after_every_run_keeping_them_all_is_right_and_said():
    feedback = code_exercises.check_outfeed_loop(looped(dequeue="each run, all kept"))
    assert feedback.ok and "6 dequeues brought back all 60" in feedback.text, feedback.text


def test_any_steps_per_execution_that_divides_the_steps_passes():
    for steps_per_execution in (20, STEPS):
        feedback = code_exercises.check_outfeed_loop(looped(steps_per_execution))
        assert feedback.ok, feedback.text


@pytest.mark.parametrize("attempt", OUTFEED_ATTEMPTS)
def test_each_wrong_outfeed_attempt_gets_its_own_hint(attempt):
    code, _ = OUTFEED_ATTEMPTS[attempt]
    assert_own_hint(judged(code_exercises.check_outfeed_loop, code), attempt, OUTFEED_ATTEMPTS)


def test_an_error_shows_the_sdks_message_and_a_hint_without_a_traceback():
    code, _ = OUTFEED_ATTEMPTS["next() on the infeed in host code"]   # NEXT_ON_THE_HOST
    text = judged(code_exercises.check_outfeed_loop, code).text
    assert "Hint: only the IPU program reads an infeed" in text
    assert "Traceback" not in text and "File \"" not in text


# --- 03.keras-steps-per-execution -------------------------------------------------------------

def keras_attempt(drop_remainder=True, steps_per_execution=None, where="compile",
                  scope="whole", arrays=False, call="fit", learning_rate=0.01,
                  spelled="objects"):
    """The Keras program with one thing changed: ``steps_per_execution`` given to ``compile``
    or to ``fit``; ``scope``: the strategy's scope around everything (``"whole"``), only
    around compile and fit (``"compile and fit"``, the model built before it) or nowhere
    (``"none"``); ``arrays``: the arrays given to fit instead of the dataset."""
    def train_keras(images, labels):
        dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(
            32, drop_remainder=drop_remainder)
        strategy = ipu.ipu_strategy.IPUStrategy()
        options = {"steps_per_execution": steps_per_execution} if steps_per_execution else {}
        model = make_model() if scope != "whole" else None
        with strategy.scope() if scope != "none" else contextlib.nullcontext():
            model = model or make_model()
            model.compile(optimizer=("sgd" if spelled == "strings"   # SGD's default rate: 0.01
                                     else tf.keras.optimizers.SGD(learning_rate)),
                          loss=("sparse_categorical_crossentropy" if spelled != "loss object"
                                else tf.keras.losses.SparseCategoricalCrossentropy()),
                          **(options if where == "compile" else {}))
            fit_options = options if where == "fit" else {}
            if arrays:
                return model.fit(images, labels, batch_size=32, epochs=2, verbose=0,
                                 **fit_options)
            if call == "evaluate":
                return model.evaluate(dataset, verbose=0)
            if call == "half an epoch":
                return model.fit(dataset.repeat(), epochs=2, steps_per_epoch=20, verbose=0,
                                 **fit_options)
            if call == "fit, epoch by epoch":
                for _ in range(2):
                    history = model.fit(dataset, epochs=1, verbose=0, **fit_options)
                return history
            return model.fit(dataset, epochs=2, verbose=0, **fit_options)
    return train_keras


KERAS_ATTEMPTS = {
    "a dataset batched without drop_remainder (the starting code)": (
        defined(code_exercises.KERAS_STARTING_CODE, "train_keras"),
        "ValueError: The provided set of data contains a shape (None, 28, 28) which is not "
        "fully defined. Executing on IPU requires all dataset elements to have fully defined "
        "shapes. If using batch() make sure to set `drop_remainder=True`. Hint: an IPU "
        "program is compiled for one batch shape"),
    "steps_per_execution left at 1": (keras_attempt(),
                                      "fit made 80 engine runs of one step each: "
                                      "steps_per_execution is still 1"),
    "steps per execution that do not divide the epoch": (
        keras_attempt(steps_per_execution=16),
        "ValueError: `steps_per_execution` must be a divisor of the number of batches in the "
        "dataset provided. Hint: fit runs whole executions only"),
    "steps_per_execution given to fit": (
        keras_attempt(steps_per_execution=10, where="fit"),
        "steps_per_execution is an argument of compile, not of fit"),
    "no strategy scope at all": (keras_attempt(steps_per_execution=10, scope="none"),
                                 "fit made no engine run on the IPU"),
    "the model built outside the strategy's scope": (
        keras_attempt(steps_per_execution=10, scope="compile and fit"),
        "was not created in the distribution strategy scope"),
    "evaluate instead of fit": (keras_attempt(steps_per_execution=10, call="evaluate"),
                                "but the weights never changed"),
    "steps_per_epoch covering half the data": (
        keras_attempt(steps_per_execution=10, call="half an epoch"),
        "40 steps where two epochs of the 40 whole batches are 80"),
    "a learning rate ten times smaller": (
        keras_attempt(steps_per_execution=10, learning_rate=0.001),
        "times smaller"),
    "the arrays given to fit, with a partial last batch": (
        keras_attempt(steps_per_execution=10, arrays=True),
        "ValueError: The provided set of data has a partial batch, which could result in "
        "data being dropped."),
}


def test_the_keras_solution_passes_and_says_what_fit_did():
    configure_ipus(4)   # the learner's own configuration, configured again after the check
    feedback = code_exercises.check_keras_steps_per_execution(code_exercises.keras_solution)
    assert feedback.ok, feedback.text
    assert feedback.text.startswith("Right: fit made 8 engine runs of 10 steps each: 80 steps "
                                    "of whole batches, launched 8 times instead of 80, and the "
                                    "weights ended where the tutorial's fit leaves them.")
    assert_the_learners_ipus_are_configured(4)


KERAS_ALTERNATIVES = {
    "the optimizer named by a string": keras_attempt(steps_per_execution=10, spelled="strings"),
    "the loss as an object": keras_attempt(steps_per_execution=10, spelled="loss object"),
    "two calls of fit, one epoch each": keras_attempt(steps_per_execution=10,
                                                      call="fit, epoch by epoch"),
}


@pytest.mark.parametrize("alternative", KERAS_ALTERNATIVES)
def test_a_correct_keras_program_written_another_way_is_right(alternative):
    feedback = code_exercises.check_keras_steps_per_execution(KERAS_ALTERNATIVES[alternative])
    assert feedback.ok, feedback.text


def test_any_divisor_of_the_epoch_passes():
    for steps_per_execution in (4, 20, 40):
        feedback = code_exercises.check_keras_steps_per_execution(
            keras_attempt(steps_per_execution=steps_per_execution))
        assert feedback.ok, feedback.text


@pytest.mark.parametrize("attempt", KERAS_ATTEMPTS)
def test_each_wrong_keras_attempt_gets_its_own_hint(attempt):
    code, _ = KERAS_ATTEMPTS[attempt]
    assert_own_hint(judged(code_exercises.check_keras_steps_per_execution, code), attempt,
                    KERAS_ATTEMPTS)


# --- both -------------------------------------------------------------------------------------

CHECKS = [code_exercises.check_outfeed_loop, code_exercises.check_keras_steps_per_execution]


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.exercise_name)
def test_an_untouched_or_misused_cell_asks_for_code(check):
    assert_asks_for_code(check)


def test_in_solutions_mode_the_checks_run_the_solutions(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_outfeed_loop(defined(code_exercises.STARTING_CODE, "train")).ok
    assert code_exercises.check_keras_steps_per_execution(
        defined(code_exercises.KERAS_STARTING_CODE, "train_keras")).ok
    monkeypatch.setattr(code_exercises, "TUTORIAL_STEPS_PER_EXECUTION", 7)  # a drifted solution
    with pytest.raises(SolutionFailed):
        code_exercises.check_outfeed_loop()


def exercise_cells():
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in notebook["cells"]
            if "code-exercise" in c["metadata"].get("tags", [])]


def test_the_notebooks_exercise_cells_are_the_starting_codes():
    assert exercise_cells() == [code_exercises.STARTING_CODE,
                                code_exercises.KERAS_STARTING_CODE]  # what a reset restores


def test_the_solutions_the_notebook_shows_pass():
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) for c in notebook["cells"]]
    shown = [s for s in sources if s.startswith("<details>") and "```python" in s]
    codes = [s.split("```python\n")[1].split("```")[0] for s in shown]
    assert len(codes) == 2
    assert code_exercises.check_outfeed_loop(defined(codes[0], "train")).ok
    assert code_exercises.check_keras_steps_per_execution(defined(codes[1], "train_keras")).ok


# That the learner's own IPU configuration is kept: in the two solutions' tests above.


def test_a_variables_values_are_left_out_of_an_error_message():
    code, _ = KERAS_ATTEMPTS["the model built outside the strategy's scope"]
    text = judged(code_exercises.check_keras_steps_per_execution, code).text
    assert "numpy=" not in text and "array(" not in text, text
    assert "ValueError: Variable (<tf.Variable 'dense" in text and "dtype=float32>)" in text
