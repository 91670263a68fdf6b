"""Notebook 01's code exercise: the solution passes, and each realistic wrong attempt gets its
own hint drawn from what the attempt's program did (run in process, no kernel per attempt)."""
import json

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb01_porting as code_exercises, reference
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from ipu_emulator.runtime import configured_system
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell)
from tests.support.ipu_systems import configure_ipus

v1 = tf.compat.v1
STEPS = code_exercises.STEPS
NOTEBOOK = ROOT / "notebooks" / "01_porting_a_simple_example.ipynb"


def configure(ipus=1, apply=True):
    ipu_configuration = ipu.config.IPUConfig()
    if ipus:
        ipu_configuration.auto_select_ipus = ipus
    if apply:
        ipu_configuration.configure_ipu_system()


def ported(drop_remainder=True, ipus=1, apply=True, place="scope", build="compiled",
           returns="both", run="compiled", runs_per_step=1, inputs="batch", give_back=True,
           initialize="once", learning_rate=0.05, shuffle=False, batch=32):
    """Tutorial 1's port as a learner might write it, with one thing changed: where the
    compile call is made (``place``: "scope" or "outside"), what is built (``build``:
    "compiled", "uncompiled" step in the scope, "both" a compiled and a CPU step, "model"
    only the forward pass compiled), what the step returns, what the session runs
    (``run``: "compiled", "cpu", or "unpacked" into two names) and how often."""
    def train(images, labels, steps):
        if ipus is not None:
            configure(ipus, apply)
        dataset = v1.data.Dataset.from_tensor_slices((images, labels))
        dataset = (dataset.shuffle(len(images), seed=3) if shuffle else dataset).repeat()
        dataset = dataset.batch(batch, drop_remainder=drop_remainder)
        next_batch = v1.data.make_one_shot_iterator(dataset).get_next()

        def training_step(images, labels):
            logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
            loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
            train_op = v1.train.GradientDescentOptimizer(learning_rate).minimize(loss)
            return {"both": [loss, train_op], "loss": loss, "ops first": [train_op, loss]}[returns]

        compile_inputs = {"batch": next_batch, "listed": [next_batch]}[inputs]
        if build == "model":
            dense = tf.keras.layers.Dense(10)
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                [logits] = ipu.ipu_compiler.compile(
                    lambda images: dense(tf.keras.layers.Flatten()(images)), [next_batch[0]])
            loss = v1.losses.sparse_softmax_cross_entropy(labels=next_batch[1], logits=logits)
            fetch = [loss, v1.train.GradientDescentOptimizer(0.05).minimize(loss)]
        elif build == "uncompiled":
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                fetch = training_step(*next_batch)
        elif place == "outside":
            fetch = ipu.ipu_compiler.compile(training_step, inputs=compile_inputs)
        else:
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                fetch = ipu.ipu_compiler.compile(training_step, inputs=compile_inputs)
        if build == "both":
            fetch = training_step(*next_batch)   # the CPU step, left in and run

        losses = []
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for _ in range(steps):
                if initialize == "every step":
                    sess.run(v1.global_variables_initializer())
                for _ in range(runs_per_step):
                    if run == "unpacked":
                        loss_now, _ = sess.run(fetch)
                    else:
                        loss_now = sess.run(fetch)[0]
                losses.append(loss_now)
        return losses if give_back else None
    return train


def starting_code():
    namespace = {"tf": v1, "ipu": ipu}
    exec(code_exercises.STARTING_CODE, namespace)  # pylint: disable=exec-used
    return namespace["train"]


WRONG_ATTEMPTS = {
    "the CPU program, untouched": (starting_code(), "the whole step still ran on the CPU"),
    "the IPU system never configured": (
        ported(ipus=None),
        'nothing in it configured the IPU system, so the SDK made a device by itself and '
        'logged "No IPU device was configured for /device:IPU:0, creating a device with a '
        'single IPU."'),
    "compiled outside ipu_scope": (
        ported(place="outside"),
        "Exception: A computation has been compiled, however it was not placed on an IPU "
        "device. This computation will not be executed on an IPU."),
    "the step built in ipu_scope, never compiled": (
        ported(build="uncompiled"), "built inside ipu_scope but not compiled"),
    "compiled, but the session runs the CPU step": (
        ported(build="both"), "the session never ran the compiled op"),
    "only the model compiled, loss and update on the host": (
        ported(build="model"), "computed only part of the step"),
    "batched without drop_remainder": (ported(drop_remainder=False),
                                       "has no fixed shape: (?, 28, 28)"),
    "the step returns the loss, not the update": (ported(returns="loss"),
                                                  "the weights never changed"),
    "the step returns its op before its tensor": (
        ported(returns="ops first"),
        "ValueError: XLA computation function must return zero or more Tensor values followed "
        "by zero or more Operations."),
    "the compiled op's result unpacked into loss and update": (
        ported(run="unpacked"),
        "not enough values to unpack (expected 2, got 1) Hint: compile returns a list"),
    "the compiled op run twice per step": (ported(runs_per_step=2),
                                           f"{2 * STEPS} engine runs for {STEPS} steps"),
    "the batch passed inside a list": (ported(inputs="listed"),
                                       "not a list holding the pair"),
    "a device of two IPUs": (ported(ipus=2), "a device of 2 IPUs, as 2 replicas"),
    "an IPUConfig without auto_select_ipus": (ported(ipus=0), "selected no IPUs"),
    "the variables initialized again every step": (
        ported(initialize="every step"), "it initialized the variables 21 times"),
    "a learning rate ten times smaller": (ported(learning_rate=0.005), "times smaller"),
    "batches of 64": (ported(batch=64), "each step took 64 images where the starting code's"),
    "the batches shuffled": (ported(shuffle=True),
                             "as if the steps saw other batches or computed another loss"),
    "the losses not returned": (ported(give_back=False), "train returned None, not the loss"),
}


def test_the_solution_passes_and_says_what_ran():
    feedback = code_exercises.check_port(code_exercises.solution)
    assert feedback.ok, feedback.text
    assert f"{STEPS} engine runs, one per training step, on the IPU your code" in feedback.text
    assert "(100,480 bytes: 32 images and their labels)" in feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    code, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_port(code), attempt, WRONG_ATTEMPTS)


def test_an_ipuconfig_never_applied_gets_the_hint_of_no_configuration():
    feedback = code_exercises.check_port(ported(apply=False))
    assert "nothing in it configured the IPU system" in feedback.text
    assert "does nothing until it is applied" in feedback.text


def test_the_functional_configuration_api_configures_the_system_too(monkeypatch):
    def configure_the_old_way(ipus, apply):
        options = ipu.utils.create_ipu_config()
        options = ipu.utils.auto_select_ipus(options, num_ipus=ipus)
        ipu.utils.configure_ipu_system(options)

    monkeypatch.setitem(globals(), "configure", configure_the_old_way)
    assert code_exercises.check_port(ported()).ok


def test_an_exception_shows_the_sdks_message_and_a_hint_not_a_traceback():
    text = code_exercises.check_port(ported(place="outside")).text
    assert text.startswith("Not yet. Your code raised Exception: A computation has been "
                           "compiled, however it was not placed on an IPU device.")
    assert "Hint: compile was called outside the IPU scope" in text
    assert "Traceback" not in text


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_port)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_port(starting_code()).ok
    monkeypatch.setattr(reference, "TOLERANCE", -1.0)   # a check the solution cannot pass
    with pytest.raises(SolutionFailed):
        code_exercises.check_port()


def test_the_starting_code_is_the_notebooks_exercise_cell():
    assert exercise_cell(NOTEBOOK) == code_exercises.STARTING_CODE  # what a reset restores


def test_the_notebooks_own_configuration_is_kept_and_the_attempt_starts_unconfigured():
    configure_ipus(4)
    assert not code_exercises.check_port(ported(ipus=None)).ok   # 4 IPUs were not its doing
    assert [d.num_ipus for d in configured_system.current().devices] == [4]


def test_the_solution_the_notebook_shows_passes():
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    [shown] = [s for s in sources if s.startswith("<details>") and "def train(" in s]
    namespace = {"tf": v1, "ipu": ipu}
    exec(shown.split("```python\n")[1].split("```")[0], namespace)  # pylint: disable=exec-used
    assert code_exercises.check_port(namespace["train"]).ok
