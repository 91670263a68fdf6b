"""Notebook 06's code exercise: accumulate gradients on one IPU (pipelining tutorial, step 1).

The learner starts from a looped one-IPU program that changes the weights after every
mini-batch (an infeed, ``ipu.loops.repeat`` of 20 mini-batches per ``sess.run``, plain gradient
descent) and makes it the tutorial's step 1: the optimizer wrapped in
``ipu.optimizers.GradientAccumulationOptimizerV2(optimizer, num_mini_batches=16)``, so that the
weights change once per 16 mini-batches, and a loop whose count is a multiple of 16: 32
mini-batches, two weight updates per ``sess.run``.

``check_accumulating_training`` calls their ``train(images, labels, runs)`` in a fresh graph on
one IPU with a small sample of MNIST and reads the record of what ran: the engine runs, the
mini-batches (loop iterations) of each, the optimizer's accumulation count and the weight
updates each run made (``EngineRun.weight_updates``).
"""
from __future__ import annotations

import tensorflow as tf

from ipu_emulator.code_exercises import ProgramRun, run_attempt, sample_digits
from ipu_emulator.code_exercises.harness import (Exercise, Probe, Rule, changed, check_of,
                                                 last_run_changed, engine_runs_like_last)
from ipu_emulator.code_exercises.reference import (NEVER_RUN_UPDATE, TOLERANCE, matched_variant,
                                                   same_weights, scaled_update, weights_problem)
from ipu_emulator.code_exercises.wording import DIGIT_BYTES, images_per_batch, other_batch
from ipu_emulator.exercises import not_yet
from ipu_emulator.ipu import ipu_compiler, ipu_infeed_queue, loops, optimizers, scopes
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod

BATCH_SIZE = 32
NUM_MINI_BATCHES = 16   # mini-batches per weight update: the tutorial's
UPDATES_PER_RUN = 2     # weight updates per sess.run
MINI_BATCHES_PER_RUN = NUM_MINI_BATCHES * UPDATES_PER_RUN
RUNS = 3                # the runs the check asks train for
IMAGES = 20 * BATCH_SIZE
# Hints for the SDK's errors an accumulating attempt can meet, by words of their messages.
SDK_HINTS = {
    "inside a loop with": f"the loop would stop in the middle of a group, with gradients "
                          f"half added up: its count must be a multiple of num_mini_batches. "
                          f"Task b: repeat {UPDATES_PER_RUN} x {NUM_MINI_BATCHES} = "
                          f"{MINI_BATCHES_PER_RUN} mini-batches per sess.run.",
    "not inside a training loop": "the accumulating optimizer must be built in the body of "
                                  "ipu.loops.repeat: the loop's iterations are the mini-batches "
                                  "it adds up. Keep the loop of the starting code.",
    "must be a positive number": f"num_mini_batches is how many mini-batches make one weight "
                                 f"update: {NUM_MINI_BATCHES}.",
    "has no attribute": "the wrapper is ipu.optimizers.GradientAccumulationOptimizerV2(optimizer, "
                        "num_mini_batches=16).",
    "unexpected keyword argument": "the wrapper takes the optimizer first, then "
                                   "num_mini_batches=16.",
}


# The cell the learner edits (tagged ``code-exercise`` in notebook 06): a looped one-IPU
# program that updates the weights after every mini-batch, with the tasks.
# ``print(code_exercises.STARTING_CODE)`` gives it back, to start again.
STARTING_CODE = '''\
# Your turn: change the weights once per 16 mini-batches (the pipelining tutorial's step 1)
#  [ ] a) wrap the optimizer: ipu.optimizers.GradientAccumulationOptimizerV2(optimizer,
#         num_mini_batches=16)
#  [ ] b) make each sess.run two weight updates: the loop repeats 2 x 16 = 32 mini-batches
#         (its count must be a multiple of num_mini_batches)
#  [ ] c) keep one sess.run per run: the accumulating happens on the IPU, inside the loop
def train(images, labels, runs):
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        optimizer = tf.train.GradientDescentOptimizer(0.01)
        return optimizer.minimize(loss)          # a weight update every mini-batch

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train_on_ipu = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(20, training_step, infeed_queue=infeed))

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(infeed.initializer)
        for _ in range(runs):
            sess.run(train_on_ipu)               # 20 mini-batches: one engine run'''


def solution(images, labels, runs, reduction_method=GradientAccumulationReductionMethod.SUM):
    """The tutorial's step 1: the optimizer accumulates 16 mini-batches per update (adding
    their gradients up: the SDK's default reduction)."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu_infeed_queue.IPUInfeedQueue(dataset.batch(BATCH_SIZE, drop_remainder=True))

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        optimizer = optimizers.GradientAccumulationOptimizerV2(
            tf.compat.v1.train.GradientDescentOptimizer(0.01), num_mini_batches=NUM_MINI_BATCHES,
            reduction_method=reduction_method)
        return optimizer.minimize(loss)

    with scopes.ipu_scope("/device:IPU:0"):
        train_on_ipu = ipu_compiler.compile(
            lambda: loops.repeat(MINI_BATCHES_PER_RUN, training_step, infeed_queue=infeed))

    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        for _ in range(runs):
            sess.run(train_on_ipu)


def run_training(train) -> ProgramRun:
    """Call ``train(images, labels, RUNS)`` in a fresh graph on one IPU, with a small sample of
    MNIST: what it did.  An error in the learner's code raises ``LearnerCodeFailed``.  The IPU
    system the learner configured, if any, is configured again afterwards."""
    return run_attempt(train, *sample_digits(IMAGES), RUNS, hints=SDK_HINTS, ipus=1)


def _times(count: int) -> str:
    return "once" if count == 1 else "twice" if count == 2 else f"{count} times"


def _mini_batches(count: int) -> str:
    return "one mini-batch" if count == 1 else f"{count} mini-batches"


def _updates(ran: ProgramRun) -> int:
    return sum(run.weight_updates for run in ran.runs.runs)


def _trained_mini_batches(ran: ProgramRun) -> int:
    return sum(run.iterations for run in ran.runs.runs if run.step_cost.backward_flops > 0)


def _no_engine_run(ran: ProgramRun):
    if ran.runs.engine_runs == 0:
        return not_yet("your train function ran no IPU program: keep the sess.run of the "
                       "compiled loop inside the session, once per run.")
    return None


def _engine_runs(ran: ProgramRun):
    runs = ran.runs
    if runs.engine_runs > RUNS:
        if all(run.gradient_accumulation_count > 1 for run in runs.runs):
            each = ", ".join(str(run.iterations) for run in runs.runs)
            return not_yet(f"your program made {runs.engine_runs} engine runs (of {each} "
                           f"mini-batches) where the check asked train for {RUNS} runs: every "
                           f"extra sess.run is another launch by the host. Task b: one "
                           f"loop of {UPDATES_PER_RUN} x {NUM_MINI_BATCHES} = "
                           f"{MINI_BATCHES_PER_RUN} mini-batches, and one sess.run per run.")
        return not_yet(f"your program made {runs.engine_runs} engine runs where the check asked "
                       f"train for {RUNS} runs: {_trained_mini_batches(ran)} mini-batches and "
                       f"{_updates(ran)} weight updates, the gradients added up across sess.run "
                       f"calls, each a launch of its own. Task c: let "
                       f"GradientAccumulationOptimizerV2 add them up inside the loop, so that "
                       f"one sess.run of {MINI_BATCHES_PER_RUN} mini-batches makes its "
                       f"{UPDATES_PER_RUN} updates on the IPU.")
    if runs.engine_runs < RUNS:
        return not_yet(f"your program made {runs.engine_runs} engine run"
                       f"{'s' if runs.engine_runs != 1 else ''}, but the check asked train for "
                       f"{RUNS} runs: call sess.run on the program once per run, as the "
                       f"starting code's `for` loop does.")
    return None


def _accumulating(ran: ProgramRun):
    run = ran.runs.runs[-1]
    if run.gradient_accumulation_count == 1:
        return not_yet(f"each run changed the weights {_times(run.weight_updates)}, once per "
                       f"mini-batch: the optimizer applies each mini-batch's gradients as "
                       f"soon as it has them. Task a: wrap it, ipu.optimizers."
                       f"GradientAccumulationOptimizerV2(optimizer, "
                       f"num_mini_batches={NUM_MINI_BATCHES}), and return the wrapper's "
                       f"minimize: the plain optimizer's own still updates every mini-batch.")
    return None


def _accumulation_count(ran: ProgramRun):
    run = ran.runs.runs[-1]
    count = run.gradient_accumulation_count
    if count != NUM_MINI_BATCHES:
        return not_yet(f"your optimizer added up {_mini_batches(count)} per weight update "
                       f"({run.weight_updates} update{'s' if run.weight_updates != 1 else ''} "
                       f"per run), an update on {count} x "
                       f"{BATCH_SIZE} = {count * BATCH_SIZE} images. The tutorial accumulates "
                       f"{NUM_MINI_BATCHES}: num_mini_batches={NUM_MINI_BATCHES}, for updates on "
                       f"{NUM_MINI_BATCHES * BATCH_SIZE} images.")
    return None


def _mini_batches_per_run(ran: ProgramRun):
    run = ran.runs.runs[-1]
    if run.iterations != MINI_BATCHES_PER_RUN:
        return not_yet(f"your optimizer added up {NUM_MINI_BATCHES} mini-batches per update, "
                       f"but each run made {_mini_batches(run.iterations)}, so it changed "
                       f"the weights {_times(run.weight_updates)}. Task b: "
                       f"{UPDATES_PER_RUN} updates per run, a loop of {UPDATES_PER_RUN} x "
                       f"{NUM_MINI_BATCHES} = {MINI_BATCHES_PER_RUN} mini-batches.")
    return None


def _what_ran(ran: ProgramRun) -> str:
    return (f"each run made {_mini_batches(ran.runs.runs[-1].iterations)} and the optimizer "
            f"added up {NUM_MINI_BATCHES} per update")


def _batch(ran: ProgramRun):
    return other_batch(images_per_batch(ran.runs.runs[-1].infeed_bytes_per_iteration),
                       BATCH_SIZE, _what_ran(ran))


def _variants(ran: ProgramRun):
    return ran.mean_variants(ran.runs.runs[-1].gradient_accumulation_reduction)


def _weights(ran: ProgramRun):
    return weights_problem(
        ran.weights, ran.reference.weights, _what_ran(ran),
        f"The loop body returns the accumulating optimizer's minimize: {NEVER_RUN_UPDATE}.",
        f"The wrapper adds the {NUM_MINI_BATCHES} mini-batches' gradients up (or averages "
        f"them, with reduction_method=MEAN) and applies them with the starting code's "
        f"optimizer, GradientDescentOptimizer(0.01), as it is: keep its learning rate and the "
        f"loss unchanged.", variants=_variants(ran))


def _right(ran: ProgramRun) -> str:
    run = ran.runs.runs[-1]
    batch = images_per_batch(run.infeed_bytes_per_iteration)
    count = run.gradient_accumulation_count
    return (f"{ran.runs.engine_runs} engine runs of {run.iterations} mini-batches each, and "
            f"the optimizer added up {count} of them per update: each run changed the "
            f"weights {_times(run.weight_updates)} ({_updates(ran)} in all, instead of "
            f"{_trained_mini_batches(ran)}), each time on the gradients of {count} x {batch} = "
            f"{count * batch} images, "
            f"{same_weights(matched_variant(ran.weights, _variants(ran)))}.")


EXERCISE = Exercise(
    name="06.accumulate", starting_code=STARTING_CODE, solution=solution, run=run_training,
    call="check_accumulating_training(train)",
    free=("the reduction of the accumulated gradients: added up (SUM, the SDK's default) or "
          "averaged (MEAN, RUNNING_MEAN)",),
    rules=(Rule("an IPU program ran", _no_engine_run),
           Rule("one engine run per run", _engine_runs),
           Rule("the optimizer accumulates", _accumulating),
           Rule("16 mini-batches per update", _accumulation_count),
           Rule("32 mini-batches per run", _mini_batches_per_run),
           Rule("batches of 32", _batch),
           Rule("the reference's weights", _weights)),
    right=_right,
    probes=(Probe("an IPU program ran", lambda ran: engine_runs_like_last(ran, 0), "no engine run"),
            Probe("one engine run per run", lambda ran: engine_runs_like_last(ran, RUNS + 1),
                  "one engine run too many"),
            Probe("one engine run per run", lambda ran: engine_runs_like_last(ran, RUNS - 1),
                  "one engine run too few"),
            Probe("the optimizer accumulates",
                  lambda ran: last_run_changed(ran, gradient_accumulation_count=1),
                  "no accumulation"),
            Probe("16 mini-batches per update",
                  lambda ran: last_run_changed(ran, gradient_accumulation_count=NUM_MINI_BATCHES + 1),
                  "one mini-batch more per update"),
            Probe("16 mini-batches per update",
                  lambda ran: last_run_changed(ran, gradient_accumulation_count=NUM_MINI_BATCHES - 1),
                  "one mini-batch fewer per update"),
            Probe("32 mini-batches per run",
                  lambda ran: last_run_changed(ran, iterations=MINI_BATCHES_PER_RUN + 1),
                  "one mini-batch more per run"),
            Probe("32 mini-batches per run",
                  lambda ran: last_run_changed(ran, iterations=MINI_BATCHES_PER_RUN - 1),
                  "one mini-batch fewer per run"),
            Probe("batches of 32", lambda ran: last_run_changed(
                ran, infeed_bytes_per_iteration=(BATCH_SIZE + 1) * DIGIT_BYTES),
                "one image more per batch"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger")))

check_accumulating_training = check_of(
    EXERCISE, "check_accumulating_training",
    """``train(images, labels, runs)``: one weight update per 16 mini-batches, two per run.""")


__all__ = ["EXERCISE", "check_accumulating_training", "solution", "run_training", "STARTING_CODE"]
