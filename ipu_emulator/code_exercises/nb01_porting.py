"""Notebook 01's code exercise: port a small CPU training program to the IPU (tutorial 1).

The learner starts from a plain TensorFlow 1 program that trains on the CPU, one
``sess.run`` per step, and does tutorial 1's tasks: configure the IPU system (an
``IPUConfig`` asking for one IPU, applied with ``configure_ipu_system``), build the training
step inside ``ipu.scopes.ipu_scope("/device:IPU:0")``, compile it there with
``ipu.ipu_compiler.compile`` and run the compiled op in the session, once per step.

The learner writes the whole small program, as ``train(images, labels, steps)``: it builds
its graph, opens its session, trains for ``steps`` steps and returns the loss of each step.
``check_port`` calls it in a fresh graph, with the IPU system unconfigured as in a fresh
script, on a small sample of MNIST, and reads what ran: the engine runs and the device they
ran on, whether the learner's code configured the system, and, when no engine run happened,
what the graph holds instead (a compiled program never run, a step placed on the IPU but
never compiled, or nothing for the IPU at all); then whether the returned losses fall.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.code_exercises import IpuGraph, as_a_fresh_script, code_exercise, sample_digits
from ipu_emulator.code_exercises.reference import (NEVER_RUN_UPDATE, reference_run, same_values,
                                                   weights_problem)
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.code_exercises.wording import engine_runs as _runs, kind_of as _what
from ipu_emulator.code_exercises.wording import other_batch
from ipu_emulator.exercises import not_yet, right
from ipu_emulator.ipu import config, ipu_compiler, scopes
from ipu_emulator.runtime import configured_system, ipu_backend

BATCH_SIZE = 32
STEPS = 20
IMAGES = STEPS * BATCH_SIZE
# The "Right" text quotes the mean loss of the first and of the last steps.
AVERAGED_STEPS = 5
# Hints for the errors a porting attempt can meet, by words of their messages: the SDK's
# own (Graphcore's SDK documentation gives their text) and Python's for a misread result.
SDK_HINTS = {
    "not placed on an IPU device": "compile was called outside the IPU scope. Task c: put the "
                                   "compile call inside `with "
                                   "ipu.scopes.ipu_scope(\"/device:IPU:0\"):`.",
    "followed by zero or more Operations": "the step returns its tensors first and its ops "
                                           "after them: `return [loss, train_op]`.",
    "values to unpack": "compile returns a list of the step's tensors only, `[loss]`: the "
                        "weight update is attached to the loss and runs with it. Write "
                        "`[loss] = sess.run(train_step)` (task e).",
    "is not callable": "give compile the step function itself, `training_step`, without "
                       "calling it: compile calls it with `inputs` (task d).",
    "required positional argument": "compile calls the step with the elements of `inputs` as "
                                    "its arguments: pass `inputs=next_batch`, the pair "
                                    "(images, labels), not a list holding the pair (task d).",
    "Unsupported number of IPUs": "tutorial 1 runs on one IPU: `config.auto_select_ipus = 1` "
                                  "(task b).",
    "not in device configuration list": "tutorial 1 uses one device, /device:IPU:0, made by "
                                        "`auto_select_ipus = 1` (task b), and builds the step "
                                        "in `ipu_scope(\"/device:IPU:0\")` (task c).",
}


# The cell the learner edits (tagged ``code-exercise`` in notebook 01): a CPU program with
# tutorial 1's tasks.  ``print(code_exercises.STARTING_CODE)`` gives it back, to start again.
STARTING_CODE = '''\
# Your turn: port this CPU program to the IPU (tutorial 1's tasks)
#  [ ] a) batch with drop_remainder=True: an IPU program is compiled for one batch shape
#  [ ] b) configure the IPU system: an ipu.config.IPUConfig() with auto_select_ipus = 1,
#         applied with its configure_ipu_system()
#  [ ] c) build the step inside ipu.scopes.ipu_scope("/device:IPU:0")
#  [ ] d) compile it there: ipu.ipu_compiler.compile(training_step, inputs=next_batch)
#  [ ] e) in the session, run the compiled op once per step: it gives [loss]
def train(images, labels, steps):
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(32)
    next_batch = tf.data.make_one_shot_iterator(dataset).get_next()   # a host iterator

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        return [loss, tf.train.GradientDescentOptimizer(0.05).minimize(loss)]

    loss, train_op = training_step(*next_batch)   # built for the CPU

    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(steps):
            loss_now, _ = sess.run([loss, train_op])   # one step on the CPU
            losses.append(loss_now)
    return losses'''


def solution(images, labels, steps):
    """Tutorial 1's port: configure one IPU, compile the step in the IPU scope, run it."""
    ipu_configuration = config.IPUConfig()
    ipu_configuration.auto_select_ipus = 1
    ipu_configuration.configure_ipu_system()

    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    dataset = dataset.batch(BATCH_SIZE, drop_remainder=True)
    next_batch = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        return [loss, tf.compat.v1.train.GradientDescentOptimizer(0.05).minimize(loss)]

    with scopes.ipu_scope("/device:IPU:0"):
        train_step = ipu_compiler.compile(training_step, inputs=next_batch)

    losses = []
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for _ in range(steps):
            [loss] = sess.run(train_step)   # one engine run per training step
            losses.append(loss)
    return losses


class Ran:
    """What the learner's ``train`` did: the record of its engine runs, what it returned,
    whether it configured the IPU system and selected IPUs for it, and the graph it built."""

    def __init__(self, runs: record.ProgramRecord, returned, graph: tf.Graph,
                 weights: WeightWatch):
        self.runs = runs
        self.weights = weights
        self.returned = returned
        options = ipu_backend.applied_options()
        self.configured = options is not None
        self.selected_ipus = bool(options is not None and options.device_config)
        self.ipu_graph = IpuGraph(graph)
        self.programs = self.ipu_graph.programs


def run_training(train) -> Ran:
    """Call ``train(images, labels, STEPS)`` in a fresh graph, with the IPU system
    unconfigured (as in a fresh script: configuring it is the learner's task), on a small
    sample of MNIST, and say what it did.  An error in the learner's code raises
    ``LearnerCodeFailed``.  The IPU system the notebook configured, if any, is configured
    again afterwards."""
    weights = WeightWatch()
    with as_a_fresh_script(SDK_HINTS, watch=weights) as graph:
        images, labels = sample_digits(IMAGES)
        with record.capture() as runs:
            returned = train(images, labels, STEPS)
        return Ran(runs, returned, graph, weights)   # reads the configuration in force


def losses_of(returned) -> Optional[List[float]]:
    """The loss of each step, from what ``train`` returned (a value or a one-element list
    per step), or None if it returned something else."""
    if isinstance(returned, (str, bytes)) or not hasattr(returned, "__len__"):
        return None
    try:
        losses = [float(np.ravel(value)[0]) for value in returned]
    except (TypeError, ValueError, IndexError):
        return None
    return losses if len(losses) == STEPS else None


def _shape(shape: tf.TensorShape) -> str:
    return "(" + ", ".join("?" if size is None else str(size) for size in shape.as_list()) + ")"


def _no_engine_run(ran: Ran):
    """What the graph holds instead of a program that ran, and the task that is missing."""
    held = ran.ipu_graph
    if held.programs and held.host_consumers:
        return not_yet("your compiled program computed only part of the step: the host "
                       "took its result and built the rest outside it (ops such as "
                       f"{held.host_consumers[0].name!r}), so the loss, gradients and "
                       "weight update were left off the IPU. Task d: compile the whole "
                       "training_step, which returns [loss, train_op], and run what compile "
                       "returns.")
    if held.programs:
        return not_yet("you compiled the step, but the session never ran the compiled op: "
                       "sess.run still ran the CPU version of the step, made by calling "
                       "training_step yourself. Task e: run what ipu_compiler.compile "
                       "returned, `[loss] = sess.run(train_step)`, and delete the CPU step.")
    if held.placed_outside_programs:
        return not_yet("your step was built inside ipu_scope but not compiled, and your "
                       "program made no engine run: the scope says where the ops go, compile "
                       "makes the whole step one IPU program. Task d: inside the scope call "
                       "ipu.ipu_compiler.compile(training_step, inputs=next_batch), and run "
                       "what it returns once per step.")
    return not_yet("your program made no engine run: the whole step still ran on the CPU, "
                   "as before the port. Tasks c and d: inside `with "
                   "ipu.scopes.ipu_scope(\"/device:IPU:0\"):` compile the step with "
                   "ipu.ipu_compiler.compile(training_step, inputs=next_batch).")


@code_exercise("01.port-the-model", solution=solution)
def check_port(train):
    """``train(images, labels, steps)``: one engine run per step on the configured IPU, and a
    loss that falls."""
    if not callable(train):
        return not_yet("pass the function itself, without calling it: check_port(train).")
    ran = run_training(train)
    if ran.runs.engine_runs == 0:
        return _no_engine_run(ran)
    if not ran.configured:
        return not_yet(f"your program made {_runs(ran.runs.engine_runs)}, but nothing in it "
                       f"configured the IPU system, so the SDK made a device by itself and "
                       f"logged \"{configured_system.NO_DEVICE_CONFIGURED_MESSAGE}\" Task b: "
                       f"make an ipu.config.IPUConfig(), set auto_select_ipus = 1 and call its "
                       f"configure_ipu_system(): a configuration does nothing until it is "
                       f"applied.")
    if not ran.selected_ipus:
        return not_yet(f"your program configured the IPU system, but its configuration "
                       f"selected no IPUs, so the SDK logged "
                       f"\"{configured_system.NO_DEVICE_CONFIGURED_MESSAGE}\" Task b: set "
                       f"auto_select_ipus = 1 on the IPUConfig before configure_ipu_system().")
    widest = max(ran.runs.runs, key=lambda run: run.num_ipus)
    if widest.num_ipus != 1:
        return not_yet(f"your program ran on a device of {widest.num_ipus} IPUs, as "
                       f"{widest.replicas} replicas of the step, one per IPU. Tutorial 1 asks "
                       f"for one IPU: auto_select_ipus = 1 (task b).")
    if ran.runs.engine_runs != STEPS:
        more = ran.runs.engine_runs > STEPS
        return not_yet(f"your program made {_runs(ran.runs.engine_runs)} for {STEPS} steps. "
                       + ("Each sess.run of the compiled op is a whole training step, forward "
                          "pass, gradients and weight update: run it once per step and take "
                          "the loss from what it returns, `[loss] = sess.run(train_step)`."
                          if more else
                          f"The check asked train for {STEPS} steps: run the compiled op once "
                          f"in each step of the loop (task e)."))
    shapes = [tensor.shape for program in ran.programs for tensor in program.input_tensors]
    unfixed = [shape for shape in shapes if not shape.is_fully_defined()]
    if unfixed:
        return not_yet(f"your program made {STEPS} engine runs, one per step, but its batch "
                       f"has no fixed shape: {_shape(unfixed[0])}. An IPU program is compiled "
                       f"for one shape, and a smaller last batch would need a second program. "
                       f"Task a: `batch(32, drop_remainder=True)` promises 32 images every "
                       f"time.")
    losses = losses_of(ran.returned)
    if losses is None:
        return not_yet(f"your program made {STEPS} engine runs, one per step, but train "
                       f"returned {_what(ran.returned)}, not the loss of each step: "
                       f"keep the starting code's list, append each step's loss and "
                       f"`return losses`.")
    batch = shapes[0].as_list()[0] if shapes and shapes[0].rank else BATCH_SIZE
    problem = other_batch(batch, BATCH_SIZE,
                          f"your program made {STEPS} engine runs, one per step")
    if problem is not None:
        return problem
    reference = reference_run("01.port-the-model", lambda: run_training(solution))
    problem = weights_problem(
        ran.weights, reference.weights, f"your program made {STEPS} engine runs, one per step",
        f"The step returns `[loss, train_op]` and compile is given that step: {NEVER_RUN_UPDATE}.",
        "The port keeps the model, the loss and GradientDescentOptimizer(0.05) of the starting "
        "code, and one batch of 32 per step: only where it runs changes.")
    if problem is not None:
        return problem
    reference_losses = losses_of(reference.returned)
    if not same_values(losses, reference_losses):
        return not_yet(f"your program trained as the tutorial's does, but train returned "
                       f"{losses[0]:.3f} as the first step's loss where the step computed "
                       f"{reference_losses[0]:.3f}: append the loss each "
                       f"sess.run of the compiled op returns, `[loss] = sess.run(train_step)`.")
    early = np.mean(losses[:AVERAGED_STEPS])
    late = np.mean(losses[-AVERAGED_STEPS:])
    run = ran.runs.runs[-1]
    return right(f"{STEPS} engine runs, one per training step, on the IPU your code "
                 f"configured; each copied in one batch from the host iterator "
                 f"({run.input_bytes:,} bytes: {batch} images and their labels), and the loss "
                 f"fell from {early:.2f} to {late:.2f} (the mean of the first and of the last "
                 f"{AVERAGED_STEPS} steps), to the same weights as the tutorial's program. "
                 f"That is tutorial 1's port: the same model, five changes. The sections below "
                 f"make it for this notebook's convolutional model, then look at what each "
                 f"launch costs.")


__all__ = ["check_port", "solution", "run_training", "losses_of", "STARTING_CODE"]
