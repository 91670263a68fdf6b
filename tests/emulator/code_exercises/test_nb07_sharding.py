"""Notebook 07's code exercise: the solution passes, and each realistic wrong attempt gets its
own hint drawn from what the attempt's program did (run in process, no kernel per attempt)."""

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb07_sharding as code_exercises
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell, keeping_the_configuration)

MINI_BATCHES = code_exercises.MINI_BATCHES


def step(first_shard, second_shard, split_at="dense32", optimizer_shard="second",
         colocate=False, loss_scale=1.0, count=MINI_BATCHES):
    """A training step as a learner might write it: ``first_shard``/``second_shard`` are
    the scopes of the two halves, the split names the first layer of the second half, and
    the optimizer is built in the second half or (``None``) after both."""
    def training_step(learning_rate, images, labels):
        widths = [("dense256", 256), ("dense128", 128), ("dense64", 64), ("dense32", 32)]
        cut = ([name for name, _ in widths] + ["logits"]).index(split_at)
        with first_shard():
            with tf.compat.v1.variable_scope("flatten"):
                activations = tf.reshape(images, [-1, 28 * 28])
            for name, width in widths[:cut]:
                with tf.compat.v1.variable_scope(name):
                    activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(
                        activations)
        with second_shard():
            for name, width in widths[cut:]:
                with tf.compat.v1.variable_scope(name):
                    activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(
                        activations)
            with tf.compat.v1.variable_scope("logits"):
                logits = tf.keras.layers.Dense(10)(activations)
            with tf.compat.v1.variable_scope("softmax_ce"):
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=labels, logits=logits))
            if optimizer_shard == "second":
                train_op = minimize(learning_rate, loss * loss_scale, colocate, count)
        if optimizer_shard is None:
            train_op = minimize(learning_rate, loss * loss_scale, colocate, count)
        return learning_rate, train_op
    return training_step


def minimize(learning_rate, loss, colocate=False, count=MINI_BATCHES):
    with tf.compat.v1.variable_scope("optimizer"):
        return ipu.optimizers.GradientAccumulationOptimizerV2(
            tf.compat.v1.train.GradientDescentOptimizer(learning_rate),
            num_mini_batches=count).minimize(loss, colocate_gradients_with_ops=colocate)


class NoScope:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def shard(index):
    return lambda: ipu.scopes.ipu_shard(index)


def typo_step(learning_rate, images, labels):
    with ipu.scopes.ipu_shards(0):  # the learner's typo: no such scope
        return learning_rate, images


WRONG_ATTEMPTS = {
    "step 1's code, unchanged": (step(NoScope, NoScope), "ran on one IPU"),
    "the split one layer early": (step(shard(0), shard(1), split_at="dense64"),
                                  "dense64 ran on IPU1"),
    "the optimizer outside the shard scopes": (step(shard(0), shard(1), optimizer_shard=None),
                                               "gradients of IPU0's layers ran on IPU0"),
    "the gradients colocated with their layers": (
        step(shard(0), shard(1), colocate=True), "colocate_gradients_with_ops=True"),
    "half the loss minimized": (step(shard(0), shard(1), loss_scale=0.5),
                                "your updates were half as large"),
    "num_mini_batches=8 instead of step 1's 16": (step(shard(0), shard(1), count=8),
                                                  "added up 8 mini-batches per weight update"),
    "the split one layer late": (step(shard(0), shard(1), split_at="logits"),
                                 "dense32 ran on IPU0"),
    "a third shard index on two IPUs": (
        step(shard(0), shard(2)),
        "InternalError: Trying to compile a graph for an IPU device with 2 IPUs and 4 shards. "
        "The number of shards needs to divide the number of IPUs. Hint: the device has two "
        "IPUs, so the shards are ipu_shard(0) and ipu_shard(1)."),
    "a typo in the scope's name": (typo_step, "AttributeError"),
}


def test_the_solution_passes_and_says_what_crossed_keeping_the_learners_configuration():
    feedback = keeping_the_configuration(
        lambda: code_exercises.check_sharded_step(code_exercises.solution))
    assert feedback.ok, feedback.text
    assert "313,344 bytes in 5 copies" in feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    code, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_sharded_step(code), attempt, WRONG_ATTEMPTS)


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_sharded_step)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_sharded_step(step(NoScope, NoScope)).ok
    monkeypatch.setattr(code_exercises, "TUTORIAL_SPLIT",
                        dict(code_exercises.TUTORIAL_SPLIT, dense64=1))
    with pytest.raises(SolutionFailed):
        code_exercises.check_sharded_step()


def test_the_starting_code_runs_on_one_ipu_and_is_the_notebooks_exercise_cell():
    namespace = {"tf": tf.compat.v1, "ipu": ipu}
    exec(code_exercises.STARTING_CODE, namespace)  # pylint: disable=exec-used
    feedback = code_exercises.check_sharded_step(namespace["sharded_training_step"])
    assert "ran on one IPU" in feedback.text
    notebook = ROOT / "notebooks" / "07_sharding.ipynb"
    assert exercise_cell(notebook) == code_exercises.STARTING_CODE  # what a reset restores


def split_inside_dense64(learning_rate, images, labels):
    """The tutorial's split, except that dense64's matmul is on IPU0 and its ReLU on IPU1:
    one layer on both IPUs."""
    with ipu.scopes.ipu_shard(0):
        with tf.compat.v1.variable_scope("flatten"):
            activations = tf.reshape(images, [-1, 28 * 28])
        for name, width in (("dense256", 256), ("dense128", 128)):
            with tf.compat.v1.variable_scope(name):
                activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(activations)
        with tf.compat.v1.variable_scope("dense64"):
            activations = tf.keras.layers.Dense(64)(activations)
    with ipu.scopes.ipu_shard(1):
        with tf.compat.v1.variable_scope("dense64"):
            activations = tf.nn.relu(activations)
        train_op = minimize(learning_rate, code_exercises.last_layers(activations, labels))
    return learning_rate, train_op


def test_a_layer_on_both_ipus_is_caught_at_the_boundary():
    feedback = code_exercises.check_sharded_step(split_inside_dense64)
    assert not feedback.ok and "dense64 ran on IPU0 and IPU1" in feedback.text, feedback.text
