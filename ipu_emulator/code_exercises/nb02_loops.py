"""Notebook 02's code exercise: move the training loop onto the IPU (loops tutorial).

The learner starts from notebook 01's program, where every training step is one ``sess.run``
of a compiled step fed from a host iterator, and does the loops tutorial's tasks: batch the
dataset with ``drop_remainder=True`` and wrap it in an ``IPUInfeedQueue``, make the step the
body of ``ipu.loops.repeat``, compile that loop with no inputs, run the infeed's initializer
once and the whole run of steps with one ``sess.run``.

The learner writes the whole small program, as ``train(images, labels, steps)``: it builds
its graph, opens its session and trains for ``steps`` steps.  ``check_loop_on_device`` calls
it in a fresh graph on a small sample of MNIST and reads the record of what ran: how many
engine runs, how many loop iterations each made, and whether an infeed fed the iterations.
"""
from __future__ import annotations

import tensorflow as tf

from ipu_emulator.code_exercises import (IpuGraph, ProgramRun, code_exercise, run_attempt,
                                         sample_digits)
from ipu_emulator.code_exercises.reference import NEVER_RUN_UPDATE, reference_run, weights_problem
from ipu_emulator.code_exercises.wording import engine_runs as _runs
from ipu_emulator.code_exercises.wording import images_per_batch, other_batch
from ipu_emulator.code_exercises.wording import steps as _iterations
from ipu_emulator.exercises import not_yet, right
from ipu_emulator.ipu import ipu_compiler, ipu_infeed_queue, loops, scopes

BATCH_SIZE = 32
STEPS = 20
# A few images more than STEPS whole batches: a last, smaller batch exists unless it is dropped.
IMAGES = STEPS * BATCH_SIZE + 5
# Hints for the SDK's errors a looping attempt can meet, by words of their messages.
SDK_HINTS = {
    "fully defined": "the infeed needs batches of one fixed size, and `batch(32)` leaves a "
                     "smaller last batch: write `batch(32, drop_remainder=True)` (task a).",
    "initializ": "the infeed's iterator does not exist yet: run `sess.run(infeed.initializer)` "
                 "once, after the variables' initializer and before the program (task d).",
    "cannot be called with the specified inputs": "the body takes the loop-carried values "
                                                  "first (one per entry of `inputs`), then the "
                                                  "infeed's batch: `def loop_body(total_loss, "
                                                  "images, labels)`.",
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


@code_exercise("02.loop-on-device", solution=solution)
def check_loop_on_device(train):
    """``train(images, labels, steps)``: all the steps in one engine run fed by an infeed."""
    if not callable(train):
        return not_yet("pass the function itself, without calling it: "
                       "check_loop_on_device(train).")
    ran = run_training(train)
    runs = ran.runs
    if runs.engine_runs == 0:
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
    counts = [run.iterations for run in runs.runs]
    fed = [run.infeed_bytes_per_iteration for run in runs.runs]
    if runs.engine_runs > 1:
        if all(count == 1 for count in counts):
            return not_yet(f"your program made {_runs(runs.engine_runs)} of one step each: the "
                           f"loop is still outside the IPU program, in Python around sess.run. "
                           f"Task b: build the step as the body of ipu.loops.repeat(steps, ...) "
                           f"inside the compiled function, and call sess.run once.")
        return not_yet(f"your program made {_runs(runs.engine_runs)} (of "
                       f"{', '.join(map(str, counts))} steps): the loop is on the IPU, but the "
                       f"host still launches it more than once. Give repeat all {STEPS} steps "
                       f"and call sess.run on the program once.")
    [run] = runs.runs
    if not any(fed):
        return not_yet(f"your program made one engine run of {_iterations(run.iterations)}, "
                       f"but no infeed fed it: every step trained on the same batch, given "
                       f"to the program once when the run started. Tasks a "
                       f"and c: wrap the dataset in an IPUInfeedQueue, pass it as repeat's "
                       f"infeed_queue, and compile the loop with no inputs.")
    if run.iterations != STEPS:
        return not_yet(f"your program made one engine run of {_iterations(run.iterations)}, "
                       f"fed by the infeed, but the check asked train for {STEPS} steps: "
                       f"repeat's count is train's `steps` argument.")
    problem = other_batch(images_per_batch(run.infeed_bytes_per_iteration), BATCH_SIZE,
                          f"your program made one engine run of {STEPS} steps fed by the infeed")
    if problem is not None:
        return problem
    reference = reference_run("02.loop-on-device", lambda: run_training(solution))
    problem = weights_problem(
        ran.weights, reference.weights,
        f"your program made one engine run of {STEPS} steps fed by the infeed",
        f"The loop body returns minimize's result with any running values (task b): "
        f"{NEVER_RUN_UPDATE}.",
        "The loop keeps the step of the starting code (its model, loss and "
        "GradientDescentOptimizer(0.05)), one batch of 32 per step.")
    if problem is not None:
        return problem
    return right(f"one engine run of {run.iterations} iterations, fed by the infeed: each "
                 f"iteration took the next batch from it ({run.infeed_bytes_per_iteration:,} "
                 f"bytes: {images_per_batch(run.infeed_bytes_per_iteration)} images and their "
                 f"labels), so the host launched the program once instead of "
                 f"{run.iterations} times, and the weights ended where "
                 f"the tutorial's program leaves them. On an IPU system each launch costs "
                 f"about a millisecond, longer than a step of this model: the sections below "
                 f"measure it.")


__all__ = ["check_loop_on_device", "solution", "run_training", "STARTING_CODE"]
