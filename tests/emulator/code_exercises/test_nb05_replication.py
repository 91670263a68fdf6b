"""Notebook 05's code exercise: the solution passes, and each realistic wrong attempt gets its
own hint drawn from what the attempt's program did, or from the SDK's own error (run in
process, no kernel per attempt).  The attempts are the starting code with some of the
tutorial's tasks done, as a learner would edit it."""
import json
from types import SimpleNamespace

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb05_replication as code_exercises
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell, keeping_the_configuration)

v1 = tf.compat.v1
NOTEBOOK = ROOT / "notebooks" / "05_replicated_graphs.ipynb"
START = code_exercises.STARTING_CODE
PLAIN_OPTIMIZER = "optimizer = tf.train.GradientDescentOptimizer(0.05)"
CROSS_REPLICA = ("optimizer = ipu.optimizers.CrossReplicaOptimizer(\n"
                 "            tf.train.GradientDescentOptimizer(0.05))")
INFEED_NAME = 'feed_name="training_infeed")'
OUTFEED_NAME = 'feed_name="loss_outfeed")'


def edited(device=1, infeed=None, outfeed=None, cross_replica=False, loss_mean=False,
           launches=1, give_back=None, learning_rate=None):
    """The starting code with some tasks done: a device of ``device`` IPUs, the queues told
    ``infeed``/``outfeed`` replicas (None: not told), the optimizer wrapped or not, the loss
    averaged over the replicas instead, the program launched ``launches`` times."""
    code = START.replace("auto_select_ipus = 1", f"auto_select_ipus = {device}")
    if infeed is not None:
        code = code.replace(INFEED_NAME, INFEED_NAME[:-1] + f", replication_factor={infeed})")
    if outfeed is not None:
        code = code.replace(OUTFEED_NAME, OUTFEED_NAME[:-1] + f", replication_factor={outfeed})")
    if cross_replica:
        code = code.replace(PLAIN_OPTIMIZER, CROSS_REPLICA)
    if loss_mean:
        code = code.replace("optimizer.minimize(loss)",
                            "optimizer.minimize(ipu.cross_replica_ops.cross_replica_mean(loss))")
    if learning_rate is not None:
        code = code.replace("GradientDescentOptimizer(0.05)",
                            f"GradientDescentOptimizer({learning_rate})")
    if give_back is not None:   # what train returns instead of the dequeued losses
        code = code.replace("return sess.run(read_losses)", f"return {give_back}")
    if launches != 1:
        code = code.replace("        sess.run(train_on_ipu)",
                            f"        for _ in range({launches}):\n"
                            f"            sess.run(train_on_ipu)")
    return train_of(code)


def train_of(code):
    namespace = {"tf": v1, "ipu": ipu}
    exec(code, namespace)  # pylint: disable=exec-used
    return namespace["train"]


WRONG_ATTEMPTS = {
    "the learning rate doubled for two replicas": (
        edited(device=2, infeed=2, outfeed=2, cross_replica=True, learning_rate=0.1),
        "times larger. CrossReplicaOptimizer applies the mean"),
    "the outfeed never dequeued": (
        edited(device=2, infeed=2, outfeed=2, cross_replica=True, give_back="None"),
        "but train returned None, not the 10 x 2 losses"),
    "zeros returned for the losses": (
        edited(device=2, infeed=2, outfeed=2, cross_replica=True,
               give_back="[[0.0, 0.0]] * steps"),
        "but train returned 20 values (the first 0.000)"),
    "the starting code: one IPU, one replica": (
        train_of(START), "your program ran as one replica on a device of 1 IPU"),
    "replicated, without CrossReplicaOptimizer": (
        edited(device=2, infeed=2, outfeed=2),
        "no all-reduce ran: each replica applied its own gradients, so after the first step "
        "their weights drifted apart"),
    "the queues told 2 replicas, the device left at one IPU": (
        edited(device=1, infeed=2, outfeed=2, cross_replica=True),
        "Current program has been created with replication_factor 1, however the "
        "IPUInfeedQueue has been configured with replication_factor 2. Either reduce the number "
        "of IPUs in your TensorFlow device, or set the `replication_factor` to  1 when creating "
        "IPUInfeedQueue. Hint: the IPUInfeedQueue was told 2 replicas, but the device has one "
        "IPU"),
    "a device of 4 IPUs, the queues told 2": (
        edited(device=4, infeed=2, outfeed=2, cross_replica=True),
        "created with replication_factor 4, however the IPUInfeedQueue has been configured with "
        "replication_factor 2. Either reduce the number of IPUs in your TensorFlow device, or "
        "set the `replication_factor` to  4 when creating IPUInfeedQueue. Hint: the "
        "IPUInfeedQueue was told 2 replicas, but the device makes 4"),
    "the outfeed not told the replicas": (
        edited(device=2, infeed=2, cross_replica=True),
        "Current program has been created with replication_factor 2, however the "
        "IPUOutfeedQueue has been configured with replication_factor 1. Either reduce the "
        "number of IPUs in your TensorFlow device, or set the `replication_factor` to 2 when "
        "creating IPUOutfeedQueue. Hint: the device of 2 IPUs runs 2 replicas, and the "
        "IPUOutfeedQueue was not told"),
    "a device of 3 IPUs": (
        edited(device=3, infeed=3, outfeed=3, cross_replica=True),
        "Unsupported number of IPUs requested - could not find an IPU device with 3 IPUs for the "
        "TensorFlow virtual device /device:IPU:0. Use `gc-info -l` to view the available device "
        "configurations. Hint: multi-IPU devices come in powers of two"),
    "the loss averaged over the replicas, not the gradients": (
        edited(device=2, infeed=2, outfeed=2, loss_mean=True),
        "an all-reduce ran, but of 8 bytes per step: the model's gradients are 31,400 bytes"),
    "the replicated program launched twice": (
        edited(device=2, infeed=2, outfeed=2, cross_replica=True, launches=2),
        "your program made 2 engine runs (of 10, 10 steps): keep the whole loop in one "
        "sess.run"),
}


def test_the_solution_passes_and_says_what_each_replica_did_keeping_the_learners_configuration():
    feedback = keeping_the_configuration(
        lambda: code_exercises.check_replicated_training(code_exercises.solution))
    assert feedback.ok, feedback.text
    assert ("your program ran as 2 replicas on a device of 2 IPUs, in one engine run of 10 "
            "steps. At every step each replica took its own mini-batch from the infeed (20 in "
            "all, 100,480 bytes each)") in feedback.text
    assert "all-reduced their gradients (31,400 bytes each)" in feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    code, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_replicated_training(code), attempt, WRONG_ATTEMPTS)


def test_queues_left_untold_pass_with_a_note_on_the_sdk_versions():
    """Neither queue told: SDK 2.1 and later read the count from the device (the emulator
    builds the program again for it), so the replicas train in sync; the answer says that
    the tutorial's SDK would need the argument."""
    feedback = code_exercises.check_replicated_training(edited(device=2, cross_replica=True))
    assert feedback.ok, feedback.text
    assert "your queues were not told replication_factor" in feedback.text
    told = code_exercises.check_replicated_training(
        edited(device=2, infeed=2, outfeed=2, cross_replica=True))
    assert told.ok and "not told" not in told.text


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_replicated_training)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_replicated_training(train_of(START)).ok
    monkeypatch.setattr(code_exercises, "optimizers", SimpleNamespace(
        CrossReplicaOptimizer=lambda optimizer: optimizer))   # a solution that lost its wrapper
    with pytest.raises(SolutionFailed):
        code_exercises.check_replicated_training()


def test_the_starting_code_runs_one_replica_and_is_the_notebooks_exercise_cell():
    assert exercise_cell(NOTEBOOK) == START   # what a reset restores


def test_the_solution_the_notebook_shows_passes():
    notebook = json.loads(NOTEBOOK.read_text())
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    [shown] = [s for s in sources if s.startswith("<details>") and "def train(" in s]
    feedback = code_exercises.check_replicated_training(
        train_of(shown.split("```python\n")[1].split("```")[0]))
    assert feedback.ok, feedback.text
    assert "not told" not in feedback.text
