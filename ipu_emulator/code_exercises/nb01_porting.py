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
never compiled, or nothing for the IPU at all); then the shape of the batch, the weights the
run left and the losses it returned, beside the reference solution's run.  ``EXERCISE`` holds
these rules, in the order of the tutorial's tasks, on the shared harness.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.code_exercises import IpuGraph, as_a_fresh_script, sample_digits
from ipu_emulator.code_exercises.harness import (Exercise, Probe, Rule, changed, check_of,
                                                 last_run_changed, engine_runs_like_last)
from ipu_emulator.code_exercises.reference import (NEVER_RUN_UPDATE, TOLERANCE, Facts,
                                                   same_values, scaled_update, weights_problem)
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.code_exercises.wording import engine_runs as _runs, kind_of as _what
from ipu_emulator.code_exercises.wording import other_batch
from ipu_emulator.exercises import Feedback, not_yet
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


class Ran(Facts):
    """What the learner's ``train`` did: the record of its engine runs, what it returned,
    whether it configured the IPU system and selected IPUs for it, and the graph it built
    (its compiled programs and the shapes of their inputs)."""

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
        # Read once here (an attribute, not a property) so that the probes can change it.
        self.input_shapes: List[tf.TensorShape] = [
            tensor.shape for program in self.programs for tensor in program.input_tensors]


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


def _batch_size(ran: Ran) -> int:
    """The images per step, from the first input's shape (the task's batch when the program
    has no inputs to read it from)."""
    shapes = ran.input_shapes
    return shapes[0].as_list()[0] if shapes and shapes[0].rank else BATCH_SIZE


WHAT_RAN = f"your program made {STEPS} engine runs, one per step"


def _no_engine_run(ran: Ran) -> Optional[Feedback]:
    """What the graph holds instead of a program that ran, and the task that is missing."""
    if ran.runs.engine_runs:
        return None
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


def _configured(ran: Ran) -> Optional[Feedback]:
    if ran.configured:
        return None
    return not_yet(f"your program made {_runs(ran.runs.engine_runs)}, but nothing in it "
                   f"configured the IPU system, so the SDK made a device by itself and "
                   f"logged \"{configured_system.NO_DEVICE_CONFIGURED_MESSAGE}\" Task b: "
                   f"make an ipu.config.IPUConfig(), set auto_select_ipus = 1 and call its "
                   f"configure_ipu_system(): a configuration does nothing until it is "
                   f"applied.")


def _selected(ran: Ran) -> Optional[Feedback]:
    if ran.selected_ipus:
        return None
    return not_yet(f"your program configured the IPU system, but its configuration "
                   f"selected no IPUs, so the SDK logged "
                   f"\"{configured_system.NO_DEVICE_CONFIGURED_MESSAGE}\" Task b: set "
                   f"auto_select_ipus = 1 on the IPUConfig before configure_ipu_system().")


def _one_ipu(ran: Ran) -> Optional[Feedback]:
    widest = max(ran.runs.runs, key=lambda run: run.num_ipus)
    if widest.num_ipus == 1:
        return None
    return not_yet(f"your program ran on a device of {widest.num_ipus} IPUs, as "
                   f"{widest.replicas} replicas of the step, one per IPU. Tutorial 1 asks "
                   f"for one IPU: auto_select_ipus = 1 (task b).")


def _engine_runs(ran: Ran) -> Optional[Feedback]:
    count = ran.runs.engine_runs
    if count == STEPS:
        return None
    return not_yet(f"your program made {_runs(count)} for {STEPS} steps. "
                   + ("Each sess.run of the compiled op is a whole training step, forward "
                      "pass, gradients and weight update: run it once per step and take "
                      "the loss from what it returns, `[loss] = sess.run(train_step)`."
                      if count > STEPS else
                      f"The check asked train for {STEPS} steps: run the compiled op once "
                      f"in each step of the loop (task e)."))


def _fixed_shape(ran: Ran) -> Optional[Feedback]:
    unfixed = [shape for shape in ran.input_shapes if not shape.is_fully_defined()]
    if not unfixed:
        return None
    return not_yet(f"{WHAT_RAN}, but its batch has no fixed shape: {_shape(unfixed[0])}. An "
                   f"IPU program is compiled for one shape, and a smaller last batch would "
                   f"need a second program. Task a: `batch(32, drop_remainder=True)` promises "
                   f"32 images every time.")


def _losses_returned(ran: Ran) -> Optional[Feedback]:
    if losses_of(ran.returned) is not None:
        return None
    return not_yet(f"{WHAT_RAN}, but train returned {_what(ran.returned)}, not the loss of "
                   f"each step: keep the starting code's list, append each step's loss and "
                   f"`return losses`.")


def _batch(ran: Ran) -> Optional[Feedback]:
    return other_batch(_batch_size(ran), BATCH_SIZE, WHAT_RAN)


def _weights(ran: Ran) -> Optional[Feedback]:
    return weights_problem(
        ran.weights, ran.reference.weights, WHAT_RAN,
        f"The step returns `[loss, train_op]` and compile is given that step: {NEVER_RUN_UPDATE}.",
        "The port keeps the model, the loss and GradientDescentOptimizer(0.05) of the starting "
        "code, and one batch of 32 per step: only where it runs changes.")


def _losses(ran: Ran) -> Optional[Feedback]:
    losses, reference_losses = losses_of(ran.returned), losses_of(ran.reference.returned)
    if same_values(losses, reference_losses):
        return None
    return not_yet(f"your program trained as the tutorial's does, but train returned "
                   f"{losses[0]:.3f} as the first step's loss where the step computed "
                   f"{reference_losses[0]:.3f}: append the loss each "
                   f"sess.run of the compiled op returns, `[loss] = sess.run(train_step)`.")


def _right(ran: Ran) -> str:
    losses = losses_of(ran.returned)
    early = np.mean(losses[:AVERAGED_STEPS])
    late = np.mean(losses[-AVERAGED_STEPS:])
    run = ran.runs.runs[-1]
    return (f"{STEPS} engine runs, one per training step, on the IPU your code "
            f"configured; each copied in one batch from the host iterator "
            f"({run.input_bytes:,} bytes: {_batch_size(ran)} images and their labels), and the "
            f"loss fell from {early:.2f} to {late:.2f} (the mean of the first and of the last "
            f"{AVERAGED_STEPS} steps), to the same weights as the tutorial's program. "
            f"That is tutorial 1's port: the same model, five changes. The sections below "
            f"make it for this notebook's convolutional model, then look at what each "
            f"launch costs.")


def _on_ipus(ran: Ran, ipus: int) -> Ran:
    """``ran`` with its last engine run on a device of ``ipus`` IPUs, a replica on each."""
    return last_run_changed(ran, num_ipus=ipus, replicas=ipus)


def _batch_of(ran: Ran, size) -> Ran:
    """``ran`` with the first dimension of its program's inputs ``size`` (None: unfixed)."""
    return changed(ran, input_shapes=[tf.TensorShape([size] + shape.as_list()[1:])
                                      for shape in ran.input_shapes])


EXERCISE = Exercise(
    name="01.port-the-model", starting_code=STARTING_CODE, solution=solution, run=run_training,
    call="check_port(train)",
    free=("the configuration API: an IPUConfig or the SDK's older ipu.utils functions",
          "when the IPU system is configured: before or after the step is built",
          "how the step is given to compile (a function, a lambda, functools.partial) and its "
          "inputs (the batch's tuple or a list)",
          "how the losses are returned: a list or a tuple, of values or one-element lists"),
    rules=(Rule("an IPU program ran", _no_engine_run),
           Rule("the IPU system configured", _configured),
           Rule("its configuration selects IPUs", _selected),
           Rule("one IPU", _one_ipu),
           Rule("one engine run per step", _engine_runs),
           Rule("a fixed batch shape", _fixed_shape),
           Rule("a loss per step returned", _losses_returned),
           Rule("batches of 32", _batch),
           Rule("the reference's weights", _weights),
           Rule("the losses the step computed", _losses)),
    right=_right,
    probes=(Probe("an IPU program ran", lambda ran: engine_runs_like_last(ran, 0), "no engine run"),
            Probe("the IPU system configured", lambda ran: changed(ran, configured=False),
                  "the IPU system never configured"),
            Probe("its configuration selects IPUs", lambda ran: changed(ran, selected_ipus=False),
                  "a configuration that selects no IPUs"),
            Probe("one IPU", lambda ran: _on_ipus(ran, 2), "the last engine run on 2 IPUs"),
            Probe("one engine run per step", lambda ran: engine_runs_like_last(ran, STEPS + 1),
                  "one engine run too many"),
            Probe("one engine run per step", lambda ran: engine_runs_like_last(ran, STEPS - 1),
                  "one engine run too few"),
            Probe("a fixed batch shape", lambda ran: _batch_of(ran, None),
                  "a batch of no fixed size"),
            Probe("a loss per step returned", lambda ran: changed(ran, returned=None),
                  "nothing returned"),
            Probe("a loss per step returned",
                  lambda ran: changed(ran, returned=list(ran.returned)[:-1]), "one loss fewer"),
            Probe("a loss per step returned",
                  lambda ran: changed(ran, returned=list(ran.returned) + [ran.returned[-1]]),
                  "one loss more"),
            Probe("batches of 32", lambda ran: _batch_of(ran, BATCH_SIZE + 1),
                  "one image more per batch"),
            Probe("batches of 32", lambda ran: _batch_of(ran, BATCH_SIZE - 1),
                  "one image fewer per batch"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger"),
            Probe("the losses the step computed", lambda ran: changed(
                ran, returned=[1.01 * loss for loss in losses_of(ran.returned)]),
                "the losses 1 % larger")))

check_port = check_of(
    EXERCISE, "check_port",
    """``train(images, labels, steps)``: one engine run per step on the configured IPU, and a
    loss that falls.""")


__all__ = ["EXERCISE", "check_port", "solution", "run_training", "losses_of", "Ran",
           "STARTING_CODE"]
