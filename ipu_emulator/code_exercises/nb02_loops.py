"""Notebook 02's code exercise: move the training loop onto the IPU (loops tutorial).

The learner starts from notebook 01's program, where every training step is one ``sess.run``
of a compiled step fed from a host iterator, and does the loops tutorial's tasks: batch the
dataset with ``drop_remainder=True`` and wrap it in an ``IPUInfeedQueue``, make the step the
body of ``ipu.loops.repeat``, compile that loop with no inputs, run the infeed's initializer
once and the whole run of steps with one ``sess.run``.

The learner writes the whole small program, as ``train(images, labels, steps)``: it builds
its graph, opens its session and trains for ``steps`` steps.  ``check_loop_on_device`` calls
it in a fresh graph on a small sample of MNIST and reads the record of what ran: how many
engine runs, how many loop iterations each made, and whether an infeed fed the iterations;
then the batch each iteration took and the weights the run left, beside the reference
solution's run.  ``EXERCISE`` holds these rules, in the order of the tutorial's tasks, on the
shared harness.
"""
from __future__ import annotations

import functools
from typing import Optional

import tensorflow as tf

from ipu_emulator.code_exercises import (IpuGraph, ProgramRun, loop_arity_hint, run_attempt,
                                         sample_digits)
from ipu_emulator.code_exercises.harness import (Exercise, Probe, Rule, changed, check_of,
                                                 engine_runs_like_last)
from ipu_emulator.code_exercises.reference import (NEVER_RUN_UPDATE, TOLERANCE, scaled_update,
                                                   weights_problem)
from ipu_emulator.code_exercises.wording import DIGIT_BYTES, images_per_batch, other_batch
from ipu_emulator.code_exercises.wording import engine_runs as _runs
from ipu_emulator.code_exercises.wording import steps as _iterations
from ipu_emulator.exercises import Feedback, not_yet
from ipu_emulator.ipu import ipu_compiler, ipu_infeed_queue, loops, scopes

BATCH_SIZE = 32
STEPS = 20
# A few images more than STEPS whole batches: a last, smaller batch exists unless it is dropped.
IMAGES = STEPS * BATCH_SIZE + 5
# Hints for the SDK's errors a looping attempt can meet, by words of their messages (the first
# key found in the message gives the hint: the more specific come first).
_MIXED_TYPES = ("the running total and the loss added to it have different types: `inputs=[0]` "
                "starts an int32 total, and the loss is a float32. Start it at 0.0, "
                "`inputs=[0.0]`, and return [total_loss + loss, train_op] (task b).")
SDK_HINTS = {
    "fully defined": "the infeed needs batches of one fixed size, and `batch(32)` leaves a "
                     "smaller last batch: write `batch(32, drop_remainder=True)` (task a).",
    "can only be accessed once": "the infeed's initializer is run once, before the program: "
                                 "a second `sess.run(infeed.initializer)` (in a Python loop "
                                 "of steps, say) is refused. Run it once, then the compiled "
                                 "loop with a single sess.run: the loop is on the IPU now "
                                 "(task d).",
    "not placed on an IPU device": "compile was called outside the IPU scope. Task c: put the "
                                   "compile call inside `with "
                                   "ipu.scopes.ipu_scope(\"/device:IPU:0\"):`.",
    "repeat() got an unexpected keyword argument": "repeat's arguments are (n, body, "
                                                   "inputs=None, infeed_queue=None): "
                                                   "`ipu.loops.repeat(steps, loop_body, "
                                                   "inputs=[0.0], infeed_queue=infeed)` "
                                                   "(task b).",
    "float32 that does not match type int32": _MIXED_TYPES,
    "int32 that does not match type float32": _MIXED_TYPES,
    "initializ": "the infeed's iterator does not exist yet: run `sess.run(infeed.initializer)` "
                 "once, after the variables' initializer and before the program (task d).",
    "cannot be called with the specified inputs": functools.partial(
        loop_arity_hint, example="`def loop_body(total_loss, images, labels)`"),
}


# The cell the learner edits (tagged ``code-exercise`` in notebook 02): notebook 01's program,
# one ``sess.run`` per step, with the tutorial's tasks.  ``print(code_exercises.STARTING_CODE)``
# gives it back, to start again.
STARTING_CODE = '''\
# Your turn: train all the steps in ONE sess.run (the loops tutorial's tasks)
#  [ ] a) batch with drop_remainder=True and wrap the dataset in ipu.ipu_infeed_queue.IPUInfeedQueue
#  [ ] b) make training_step the body of ipu.loops.repeat(steps, ...), fed by that infeed
#  [ ] c) compile the loop: it takes no inputs, the data comes through the infeed
#  [ ] d) run the infeed's initializer once, then the compiled loop with a single sess.run
def train(images, labels, steps):
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(32)
    next_batch = tf.data.make_one_shot_iterator(dataset).get_next()   # a host iterator

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        return [loss, tf.train.GradientDescentOptimizer(0.05).minimize(loss)]

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train_step = ipu.ipu_compiler.compile(training_step, inputs=next_batch)

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(steps):
            [loss] = sess.run(train_step)   # one engine run per training step'''


def solution(images, labels, steps):
    """The tutorial's program: the step is the body of an on-device loop fed by an infeed."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    infeed = ipu_infeed_queue.IPUInfeedQueue(
        dataset.repeat().batch(BATCH_SIZE, drop_remainder=True))

    def loop_body(total_loss, images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.05).minimize(loss)
        return [total_loss + loss, train_op]

    def train_all_steps():
        return loops.repeat(steps, loop_body, inputs=[0.0], infeed_queue=infeed)

    with scopes.ipu_scope("/device:IPU:0"):
        train_on_ipu = ipu_compiler.compile(train_all_steps)

    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        [total_loss] = sess.run(train_on_ipu)
    return total_loss / steps


def run_training(train) -> ProgramRun:
    """Call ``train(images, labels, STEPS)`` in a fresh graph on one IPU, with a small sample
    of MNIST: what it did.  An error in the learner's code raises ``LearnerCodeFailed``.  The
    IPU system the learner configured, if any, is configured again afterwards."""
    return run_attempt(train, *sample_digits(IMAGES), STEPS, hints=SDK_HINTS, ipus=1)


def _no_engine_run(ran: ProgramRun) -> Optional[Feedback]:
    """What the graph holds instead of a loop that ran, and the task that is missing."""
    if ran.runs.engine_runs:
        return None
    held = IpuGraph(ran.graph)
    if held.programs:
        return not_yet("you compiled the loop, but the session never ran it: run what "
                       "ipu.ipu_compiler.compile returned with one sess.run, after the "
                       "infeed's initializer (task d).")
    if held.placed_outside_programs:
        return not_yet("your loop was built inside ipu_scope but not compiled, and your "
                       "program made no engine run: the scope says where the ops go, "
                       "compile makes the whole loop one IPU program. Task c: "
                       "ipu.ipu_compiler.compile(train_all_steps), where train_all_steps "
                       "returns ipu.loops.repeat(steps, ...); run what compile returns.")
    return not_yet("your train function ran no IPU program: build the loop inside `with "
                   "ipu.scopes.ipu_scope(\"/device:IPU:0\"):`, compile it (task c) and "
                   "run what compile returns with sess.run (task d).")


def _one_engine_run(ran: ProgramRun) -> Optional[Feedback]:
    runs = ran.runs
    if runs.engine_runs <= 1:
        return None
    counts = [run.iterations for run in runs.runs]
    if all(count == 1 for count in counts):
        return not_yet(f"your program made {_runs(runs.engine_runs)} of one step each: the "
                       f"loop is still outside the IPU program, in Python around sess.run. "
                       f"Task b: build the step as the body of ipu.loops.repeat(steps, ...) "
                       f"inside the compiled function, and call sess.run once.")
    return not_yet(f"your program made {_runs(runs.engine_runs)} (of "
                   f"{', '.join(map(str, counts))} steps): the loop is on the IPU, but the "
                   f"host still launches it more than once. Give repeat all {STEPS} steps "
                   f"and call sess.run on the program once.")


def _infeed(ran: ProgramRun) -> Optional[Feedback]:
    [run] = ran.runs.runs
    if run.infeed_bytes_per_iteration:
        return None
    return not_yet(f"your program made one engine run of {_iterations(run.iterations)}, "
                   f"but no infeed fed it: every step trained on the same batch, given "
                   f"to the program once when the run started. Tasks a "
                   f"and c: wrap the dataset in an IPUInfeedQueue, pass it as repeat's "
                   f"infeed_queue, and compile the loop with no inputs.")


def _steps(ran: ProgramRun) -> Optional[Feedback]:
    [run] = ran.runs.runs
    if run.iterations == STEPS:
        return None
    return not_yet(f"your program made one engine run of {_iterations(run.iterations)}, "
                   f"fed by the infeed, but the check asked train for {STEPS} steps: "
                   f"repeat's count is train's `steps` argument.")


WHAT_RAN = f"your program made one engine run of {STEPS} steps fed by the infeed"


def _batch(ran: ProgramRun) -> Optional[Feedback]:
    [run] = ran.runs.runs
    return other_batch(images_per_batch(run.infeed_bytes_per_iteration), BATCH_SIZE, WHAT_RAN)


def _weights(ran: ProgramRun) -> Optional[Feedback]:
    return weights_problem(
        ran.weights, ran.reference.weights, WHAT_RAN,
        f"The loop body returns minimize's result with any running values (task b): "
        f"{NEVER_RUN_UPDATE}.",
        "The loop keeps the step of the starting code (its model, loss and "
        "GradientDescentOptimizer(0.05)), one batch of 32 per step.")


def _right(ran: ProgramRun) -> str:
    [run] = ran.runs.runs
    return (f"one engine run of {run.iterations} iterations, fed by the infeed: each "
            f"iteration took the next batch from it ({run.infeed_bytes_per_iteration:,} "
            f"bytes: {images_per_batch(run.infeed_bytes_per_iteration)} images and their "
            f"labels), so the host launched the program once instead of "
            f"{run.iterations} times, and the weights ended where "
            f"the tutorial's program leaves them. On an IPU system each launch costs "
            f"about a millisecond, longer than a step of this model: the sections below "
            f"measure it.")


EXERCISE = Exercise(
    name="02.loop-on-device", starting_code=STARTING_CODE, solution=solution, run=run_training,
    call="check_loop_on_device(train)",
    free=("the loop: ipu.loops.repeat, or a while_loop counting the steps",
          "what the loop carries: a running total of the loss, a step count or nothing",
          "what train returns"),
    rules=(Rule("an IPU program ran", _no_engine_run),
           Rule("one engine run", _one_engine_run),
           Rule("an infeed feeds the loop", _infeed),
           Rule("20 steps in the run", _steps),
           Rule("batches of 32", _batch),
           Rule("the reference's weights", _weights)),
    right=_right,
    probes=(Probe("an IPU program ran", lambda ran: engine_runs_like_last(ran, 0), "no engine run"),
            Probe("one engine run", lambda ran: engine_runs_like_last(ran, 2),
                  "one engine run too many"),
            Probe("one engine run", lambda ran: engine_runs_like_last(ran, STEPS, iterations=1),
                  "the loop left in Python: an engine run per step"),
            Probe("an infeed feeds the loop",
                  lambda ran: engine_runs_like_last(ran, 1, infeed_bytes_per_iteration=0),
                  "no infeed"),
            Probe("20 steps in the run", lambda ran: engine_runs_like_last(ran, 1, iterations=STEPS + 1),
                  "one step more"),
            Probe("20 steps in the run", lambda ran: engine_runs_like_last(ran, 1, iterations=STEPS - 1),
                  "one step fewer"),
            Probe("batches of 32", lambda ran: engine_runs_like_last(
                ran, 1, infeed_bytes_per_iteration=(BATCH_SIZE + 1) * DIGIT_BYTES),
                "one image more per batch"),
            Probe("batches of 32", lambda ran: engine_runs_like_last(
                ran, 1, infeed_bytes_per_iteration=(BATCH_SIZE - 1) * DIGIT_BYTES),
                "one image fewer per batch"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger")))

check_loop_on_device = check_of(
    EXERCISE, "check_loop_on_device",
    """``train(images, labels, steps)``: all the steps in one engine run fed by an infeed.""")


__all__ = ["EXERCISE", "check_loop_on_device", "solution", "run_training", "STARTING_CODE"]
