"""Notebook 03's code exercises: feeds and steps per execution in TensorFlow 2 (tutorial 3).

``03.outfeed-loop``.  The learner starts from a TF2 program that trains one step per
``strategy.run``: the host hands each batch in from its own iterator and gets the loss back
as the run's result.  They do tutorial 3's tasks: an ``IPUOutfeedQueue`` the step enqueues its
loss to, a ``tf.range`` loop of ``steps_per_execution`` steps inside one ``tf.function`` taking
each batch from the infeed that ``iter(dataset)`` makes inside the strategy's scope, one
``strategy.run`` per ``steps_per_execution`` steps, and one dequeue of all the losses after
the runs.  They write it as ``train(dataset, steps)``; ``check_outfeed_loop`` calls it with
``STEPS`` steps of a small MNIST sample and reads the record of what ran: the engine runs and
their iterations, whether an infeed fed them, how many losses each run sent to the outfeed;
and how many losses ``train`` returned.  Its rules (``EXERCISE``, on the shared harness) follow
the tasks' order.

``03.keras-steps-per-execution``.  The learner starts from a Keras model trained with ``fit``
inside an ``IPUStrategy``, as one would write it for a CPU: ``batch(32)`` and one step per
execution.  They batch with ``drop_remainder=True`` and pass ``steps_per_execution`` to
``compile``, a divisor of the batches in an epoch.  ``check_keras_steps_per_execution`` calls
their ``train_keras(images, labels)`` on ``KERAS_IMAGES`` sample digits and reads the engine
runs ``fit`` made and their iterations (``KERAS_EXERCISE``).

Both run the learner's TF2 code eagerly, even in a process that switched TensorFlow 1
behaviour on (the test suite's, which judges every exercise's reference run).

The learner's code uses the notebook's ``make_model``, ``make_optimizer`` and
``loss_and_update``; this module has the same three, for its solutions and tests.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

from ipu_emulator import record
from ipu_emulator.code_exercises.harness import (Exercise, Probe, Rule, changed, check_of,
                                                 with_engine_runs, last_run_changed)
from ipu_emulator.code_exercises.reference import (TOLERANCE, compare_weights, same_values,
                                                   scaled_update, weights_problem)
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.code_exercises import (LearnerCodeFailed, ProgramRun, learner_error,
                                         sample_digits)
from ipu_emulator.code_exercises.wording import engine_runs as _runs, steps as _steps
from ipu_emulator.exercises import not_yet
from ipu_emulator.ipu import config, ipu_outfeed_queue, ipu_strategy
from ipu_emulator.runtime import ipu_backend

BATCH_SIZE = 32
# 03.outfeed-loop: the steps the check asks ``train`` for, and the tutorial's steps per
# execution (the solution's; any divisor of STEPS above 1 passes).
STEPS = 60
TUTORIAL_STEPS_PER_EXECUTION = 10
# 03.keras-steps-per-execution: 40 whole batches of 32 and 13 images over, so a dataset
# batched without drop_remainder ends with a smaller batch; epochs of 40 batches.
KERAS_BATCHES = 40
KERAS_IMAGES = KERAS_BATCHES * BATCH_SIZE + 13

# Hints for the SDK's errors (and TensorFlow's) an attempt can meet, by words of their messages.
SDK_HINTS = {
    "can not be accessed in eager mode": "only the IPU program reads an infeed: call "
                                         "next(batches) inside the tf.function that "
                                         "strategy.run runs, not in the Python loop around it "
                                         "(task b).",
    "does not support eager execution": "strategy.run executes a tf.function: decorate the "
                                        "function with @tf.function(jit_compile=True).",
    "can only be enqueued once": "a program enqueues to an outfeed in one place. Two "
                                 "enqueue calls do not, and nor does a Python `for _ in "
                                 "range(...)` loop in the tf.function: tracing unrolls it, "
                                 "one enqueue per turn. Loop with `for _ in "
                                 "tf.range(steps_per_execution):`, so that one enqueue, "
                                 "inside the loop, runs every step (task c).",
    "has not been enqueued": "nothing was ever enqueued to the outfeed you dequeued: enqueue "
                             "each step's loss to it inside the tf.range loop (task c), then "
                             "dequeue it after the runs (task d).",
    # Keras
    "not fully defined": "an IPU program is compiled for one batch shape, and `batch(32)` "
                         f"leaves a smaller last batch ({KERAS_IMAGES:,} images are "
                         f"{KERAS_BATCHES} batches of 32 and 13 over): write "
                         "`batch(32, drop_remainder=True)` (task a).",
    "must be a divisor": f"fit runs whole executions only, and an epoch here is "
                         f"{KERAS_BATCHES} batches: give compile a steps_per_execution that "
                         f"divides {KERAS_BATCHES} (task b).",
    "unexpected keyword argument 'steps_per_execution'": "steps_per_execution is an argument "
                                                         "of compile, not of fit (task b).",
    "not created in the distribution strategy scope": "the model's weights belong on the "
                                                      "IPU: build the model inside "
                                                      "strategy.scope(), then compile and fit "
                                                      "it there.",
    "cannot run eagerly": "an IPU runs compiled programs only: leave run_eagerly out of "
                          "compile (its default is False).",
    "partial batch": "fit was given arrays whose count is not a whole number of batches: give "
                     "it the dataset, batched with drop_remainder=True (task a).",
}


# The first exercise's cell (tagged ``code-exercise`` in notebook 03): one engine run per
# step, with tutorial 3's tasks.  ``print(code_exercises.STARTING_CODE)`` gives it back.
STARTING_CODE = '''\
# Your turn: an outfeed, and a loop of steps_per_execution steps in each engine run (tutorial 3)
#  [ ] a) steps_per_execution = 10: it must divide `steps`, so every engine run is the same
#  [ ] b) a tf.function looping `for _ in tf.range(steps_per_execution)`, each step taking its
#         batch with next() from iter(dataset) made INSIDE the scope (an infeed)
#  [ ] c) an ipu.ipu_outfeed_queue.IPUOutfeedQueue: each step enqueues its loss to it
#  [ ] d) one strategy.run per steps_per_execution steps; dequeue the losses once, at the end
def train(dataset, steps):
    strategy = ipu.ipu_strategy.IPUStrategy()
    host_batches = iter(dataset)           # made outside the scope: the host reads it

    @tf.function(jit_compile=True)
    def training_step(images, labels, model, optimizer):
        return loss_and_update(model, optimizer, images, labels)

    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        losses = []
        for _ in range(steps):             # one engine run per step
            images, labels = next(host_batches)
            losses.append(strategy.run(training_step, args=[images, labels, model, optimizer]))
    return np.array(losses)'''


# The second exercise's cell: fit with one step per execution and a last, smaller batch.
KERAS_STARTING_CODE = '''\
# Your turn: let fit run several steps in each engine run (steps per execution in Keras)
#  [ ] a) batch with drop_remainder=True: the IPU program is compiled for one batch shape
#  [ ] b) compile(..., steps_per_execution=N), with N a divisor of the batches in an epoch
def train_keras(images, labels):
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(32)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy")
        return model.fit(dataset, epochs=2, verbose=0)'''


# --- the notebook's model and step (the learner's code calls the notebook's own) ------------

def make_model():
    return tf.keras.Sequential([
        tf.keras.Input(shape=(28, 28)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])


def make_optimizer(model):
    optimizer = tf.keras.optimizers.SGD(0.01)
    optimizer.build(model.trainable_variables)
    return optimizer


def loss_and_update(model, optimizer, images, labels):
    with tf.GradientTape() as tape:
        probabilities = model(images, training=True)
        loss = tf.reduce_mean(
            tf.keras.losses.sparse_categorical_crossentropy(labels, probabilities))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss


# --- solutions ------------------------------------------------------------------------------

def solution(dataset, steps):
    """Tutorial 3's program: a tf.range loop fed by the infeed, each loss into the outfeed,
    one engine run per ``steps_per_execution`` steps, one dequeue at the end."""
    steps_per_execution = TUTORIAL_STEPS_PER_EXECUTION
    strategy = ipu_strategy.IPUStrategy()

    @tf.function(jit_compile=True)
    def training_loop(batches, losses, model, optimizer, steps_per_execution):
        for _ in tf.range(steps_per_execution):
            images, labels = next(batches)
            losses.enqueue(loss_and_update(model, optimizer, images, labels))

    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        batches = iter(dataset)                               # the infeed
        losses = ipu_outfeed_queue.IPUOutfeedQueue()          # the outfeed
        for _ in range(0, steps, steps_per_execution):
            strategy.run(training_loop,
                         args=[batches, losses, model, optimizer, steps_per_execution])
        return losses.dequeue()


def keras_solution(images, labels):
    """Whole batches, and ten of them per engine run."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.batch(BATCH_SIZE, drop_remainder=True)
    strategy = ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy", steps_per_execution=10)
        return model.fit(dataset, epochs=2, verbose=0)


# --- running an attempt ---------------------------------------------------------------------

def _run(attempt, *args) -> ProgramRun:
    """``attempt(*args)`` on one freshly configured IPU, its weights started as the
    reference's (``weights.WeightWatch``), eagerly: what it did.  An error in the learner's
    code raises ``LearnerCodeFailed``; the IPU system the learner configured, if any, is
    configured again afterwards.

    Not the package's ``run_attempt``: that builds a TensorFlow 1 program in a fresh graph
    with a graph-level seed, where this TF2 code must run eagerly (``iter(dataset)`` and
    ``strategy.run`` refuse a graph)."""
    try:
        with ipu_backend.configuration_kept(), _eagerly():
            config.reset_ipu_configuration()   # as a fresh script: the device is configured below
            device = config.IPUConfig()
            device.auto_select_ipus = 1
            device.configure_ipu_system()
            weights = WeightWatch()
            with record.capture() as runs, weights.watching():
                returned = attempt(*args)
    except Exception as error:  # pylint: disable=broad-except  (the learner's code: a hint)
        raise LearnerCodeFailed(learner_error(error, SDK_HINTS)) from error
    return ProgramRun(runs, returned, weights)


def _eagerly():
    """Eager execution for the attempt.  A notebook's TF2 kernel has it already; a process
    that switched TensorFlow 1 behaviour on (the test suite's graph-mode processes, which
    judge every exercise's reference run) gets it for the run only: these are TF2 programs."""
    return contextlib.nullcontext() if tf.executing_eagerly() else context.eager_mode()


@dataclass
class OutfeedRun(ProgramRun):
    """What ``train`` did (``ProgramRun``), how many times it dequeued an outfeed, how many
    losses its dequeues gave back (an ``ALL``-mode outfeed's) and whether it dequeued an
    outfeed in ``IPUOutfeedMode.LAST``."""

    dequeues: int = 0
    dequeued: int = 0
    last_mode: bool = False


def run_training(train) -> OutfeedRun:
    """``train(dataset, STEPS)`` on batches of 32 sample digits, repeated: the record, the
    losses ``train`` returned, the weights and how many times it dequeued an outfeed."""
    images, labels = sample_digits(20 * BATCH_SIZE)
    with _eagerly(), _counting_dequeues() as dequeues:   # an eager dataset, for iter()
        dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
        ran = _run(train, dataset.batch(BATCH_SIZE, drop_remainder=True), STEPS)
    return OutfeedRun(ran.runs, ran.returned, ran.weights, dequeues=dequeues.calls,
                      dequeued=dequeues.elements, last_mode=dequeues.last_mode)


@dataclass
class _Dequeues:
    calls: int = 0
    elements: int = 0         # what the ALL-mode dequeues gave back: their leading dimension
    last_mode: bool = False   # a LAST-mode outfeed was dequeued


def _leading_dimension(values) -> int:
    flat = tf.nest.flatten(values)
    shape = np.shape(flat[0]) if flat else ()
    return int(shape[0]) if shape else 0


@contextlib.contextmanager
def _counting_dequeues():
    """Inside: every ``IPUOutfeedQueue.dequeue`` call counted, with what it gave back
    (yields a ``_Dequeues``)."""
    counted = _Dequeues()
    original = ipu_outfeed_queue.IPUOutfeedQueue.dequeue

    @functools.wraps(original)
    def dequeue(queue, *args, **kwargs):
        counted.calls += 1
        values = original(queue, *args, **kwargs)
        if queue.outfeed_mode is ipu_outfeed_queue.IPUOutfeedMode.LAST:
            counted.last_mode = True
        else:
            counted.elements += _leading_dimension(values)
        return values

    ipu_outfeed_queue.IPUOutfeedQueue.dequeue = dequeue
    try:
        yield counted
    finally:
        ipu_outfeed_queue.IPUOutfeedQueue.dequeue = original


def run_keras_training(train_keras) -> ProgramRun:
    """``train_keras(images, labels)`` on ``KERAS_IMAGES`` sample digits: the record, what it
    returned (fit's history) and the weights."""
    return _run(train_keras, *sample_digits(KERAS_IMAGES))


# --- what a run did, in words -----------------------------------------------------------------

def _counts(ran: ProgramRun):
    """The steps (iterations) of each engine run."""
    return [run.iterations for run in ran.runs.runs]


def _shape_of_runs(counts) -> str:
    """"6 engine runs of 10 steps each", or "3 engine runs (of 25, 25 and 10 steps)"."""
    if len(set(counts)) == 1:
        each = " each" if len(counts) > 1 else ""
        return f"{_runs(len(counts))} of {_steps(counts[0])}{each}"
    listed = ", ".join(map(str, counts[:-1])) + f" and {counts[-1]}"
    return f"{_runs(len(counts))} (of {listed} steps)"


def _shape(ran: ProgramRun) -> str:
    return _shape_of_runs(_counts(ran))


def _count_returned(returned):
    """How many losses ``train`` returned, or None if it returned none."""
    if returned is None or isinstance(returned, ipu_outfeed_queue.IPUOutfeedQueue):
        return None
    try:
        return int(np.asarray(returned, dtype=np.float32).size)
    except (TypeError, ValueError):
        return None


def _dequeues(count: int) -> str:
    return "one dequeue" if count == 1 else f"{count} dequeues"


# --- 03.outfeed-loop: its rules, in the order of tutorial 3's tasks ---------------------------

def _sent(ran: OutfeedRun):
    """The losses each engine run enqueued to the outfeed."""
    return [run.outfeed_enqueues or 0 for run in ran.runs.runs]


def _no_engine_run(ran: OutfeedRun):
    if ran.runs.engine_runs == 0:
        return not_yet("your train function ran no IPU program: call strategy.run on your "
                       "tf.function inside the strategy's scope (task d).")
    return None


def _infeed(ran: OutfeedRun):
    if all(run.infeed_bytes_per_iteration for run in ran.runs.runs):
        return None
    if all(count == 1 for count in _counts(ran)):
        return not_yet(f"your program made {_shape(ran)}, each given its batch by the host: "
                       f"the loop is still in Python around strategy.run. Task b: loop over "
                       f"tf.range(steps_per_execution) inside the tf.function, taking each "
                       f"batch with next() from iter(dataset) made inside the scope.")
    return not_yet(f"your program made {_shape(ran)}, but no infeed fed them: the host handed "
                   f"each run one batch, so its steps all trained on that batch. Task b: "
                   f"make the iterator with iter(dataset) inside the strategy's scope, "
                   f"pass it to the tf.function and call next() on it in the loop.")


def _all_steps(ran: OutfeedRun):
    counts = _counts(ran)
    steps = sum(counts)
    if steps != STEPS and len(set(counts)) == 1 and STEPS % counts[0] == 0:
        return not_yet(f"your program made {_shape(ran)}: {steps} steps, but the check asked "
                       f"train for {STEPS}. Your {counts[0]} steps per execution divide the "
                       f"{STEPS} steps, so {_runs(STEPS // counts[0])} make them: the host's "
                       f"loop must launch steps // steps_per_execution runs, as "
                       f"`for _ in range(steps // steps_per_execution)` does (task d).")
    if steps != STEPS:
        return not_yet(f"your program made {_shape(ran)}: {steps} steps, but the check asked "
                       f"train for {STEPS}. The host's loop launches whole engine runs, so "
                       f"steps_per_execution must divide the steps, as the tutorial's 10 "
                       f"divides its 10,000 (task a).")
    return None


def _runs_of_one_length(ran: OutfeedRun):
    if len(set(_counts(ran))) > 1:
        return not_yet(f"your program made {_shape(ran)}: runs of different lengths. On an IPU "
                       f"each loop count is a program of its own, compiled and loaded anew; "
                       f"pick a steps_per_execution that divides the steps, and run it every "
                       f"time (task a).")
    return None


def _steps_per_run(ran: OutfeedRun):
    if _counts(ran)[0] == 1:
        return not_yet(f"your program made {_shape(ran)}, fed by the infeed: the loop is on "
                       f"the IPU, but it runs one step per launch. Task a: "
                       f"steps_per_execution = 10, so each engine run makes ten steps.")
    return None


def _outfeed(ran: OutfeedRun):
    if not any(_sent(ran)):
        return not_yet(f"your program made {_shape(ran)}, fed by the infeed, but it sent no "
                       f"loss through an outfeed: a run returns only what is left when its "
                       f"loop ends. Task c: create an IPUOutfeedQueue and enqueue each step's "
                       f"loss to it inside the loop.")
    return None


def _loss_per_step(ran: OutfeedRun):
    sent = _sent(ran)
    if sent != _counts(ran):
        received = (f"{'one loss' if sent[0] == 1 else f'{sent[0]} losses'} per run"
                    if len(set(sent)) == 1 else f"{', '.join(map(str, sent))} losses")
        return not_yet(f"your program made {_shape(ran)}, but the outfeed received "
                       f"{received}, not one per step. Task c: enqueue inside the tf.range "
                       f"loop, so every step sends its loss.")
    return None


def _losses_returned(ran: OutfeedRun):
    returned = _count_returned(ran.returned)
    if returned is None:
        return not_yet(f"your program made {_shape(ran)} and the outfeed received all {STEPS} "
                       f"losses, but train returned none of them. Task d: after the runs, "
                       f"return outfeed.dequeue().")
    if returned == STEPS:
        return None
    said = (f"your program made {_shape(ran)} and the outfeed received all {STEPS} losses, "
            f"but train returned {'one value' if returned == 1 else f'{returned} values'}")
    if ran.last_mode:
        return not_yet(f"{said}: your outfeed is in IPUOutfeedMode.LAST, whose dequeue gives "
                       f"back only the last loss enqueued. Create it with the default mode, "
                       f"ALL, which keeps every loss until the dequeue (task c).")
    if ran.dequeues == 0:
        return not_yet(f"{said} without ever dequeuing the outfeed: what strategy.run returns "
                       f"is what each run's function returns, not the losses the steps sent. "
                       f"Task d: after the runs, return outfeed.dequeue().")
    if ran.dequeues == 1 and ran.dequeued == STEPS:
        return not_yet(f"{said}, though its one dequeue gave back all {STEPS}: return the "
                       f"dequeued losses as they are, not their mean, a slice or a sum "
                       f"(task d).")
    return not_yet(f"{said}. Each dequeue empties the outfeed: dequeue once, after all the "
                   f"runs (task d).")


def _weights(ran: OutfeedRun):
    return weights_problem(
        ran.weights, ran.reference.weights,
        f"your program made {_shape(ran)}, fed by the infeed, every loss through the outfeed",
        "Each step calls loss_and_update, which applies the gradients: enqueue what it "
        "returns.",
        "The loop keeps the starting code's step, loss_and_update with the model and "
        "optimizer made in the strategy's scope, one batch per step.")


def _flat_values(values):
    return np.ravel(np.asarray(values, dtype=np.float64))


def _reference_losses(ran: OutfeedRun):
    if not same_values(_flat_values(ran.returned), _flat_values(ran.reference.returned)):
        return not_yet(f"your program made {_shape(ran)} and the outfeed received all {STEPS} "
                       f"losses, but train returned {STEPS} other values: return what "
                       f"outfeed.dequeue() gives, after all the runs (task d).")
    return None


def _right(ran: OutfeedRun) -> str:
    return (f"{_shape(ran)}, each taking its batches from the infeed and sending every loss "
            f"through the outfeed; {_dequeues(ran.dequeues)} brought back all {STEPS}, the "
            f"losses of the tutorial's program. The host launched the program "
            f"{ran.runs.engine_runs} times instead of {STEPS}: on an IPU each launch costs "
            f"about a millisecond, which the sections below measure.")


# --- probes: the smallest wrong changes to a run --------------------------------------------

def _engine_run_count(ran: ProgramRun, count: int) -> ProgramRun:
    """``ran`` with ``count`` engine runs like its first."""
    return with_engine_runs(ran, [ran.runs.runs[0]] * count)


def _every_run(ran: ProgramRun, **values) -> ProgramRun:
    return with_engine_runs(ran, [changed(run, **values) for run in ran.runs.runs])


def _one_step_moved(ran: OutfeedRun) -> OutfeedRun:
    """A step (and its loss) moved from the second-to-last engine run to the last: the same
    steps in runs of two lengths."""
    *first, before, last = ran.runs.runs
    return with_engine_runs(ran, first + [
        changed(before, iterations=before.iterations - 1, outfeed_enqueues=before.iterations - 1),
        changed(last, iterations=last.iterations + 1, outfeed_enqueues=last.iterations + 1)])


def _one_step_per_run(ran: OutfeedRun) -> OutfeedRun:
    """The reference's steps, one per engine run, from the infeed, each loss to the outfeed."""
    return with_engine_runs(ran, [changed(ran.runs.runs[0], iterations=1, outfeed_enqueues=1)] * STEPS)


def _losses(ran: OutfeedRun, count: int) -> OutfeedRun:
    """``ran`` returning ``count`` of the reference's losses (repeated when more)."""
    return changed(ran, returned=np.resize(_flat_values(ran.returned), count))


EXERCISE = Exercise(
    name="03.outfeed-loop", starting_code=STARTING_CODE, solution=solution, run=run_training,
    call="check_outfeed_loop(train)",
    free=("steps_per_execution: any divisor of the steps above 1",
          "the dequeue: once after the runs, or after every run with all of them kept"),
    rules=(Rule("an IPU program ran", _no_engine_run),
           Rule("an infeed feeds every run", _infeed),
           Rule("60 steps", _all_steps),
           Rule("runs of one length", _runs_of_one_length),
           Rule("several steps per run", _steps_per_run),
           Rule("losses through an outfeed", _outfeed),
           Rule("one loss per step", _loss_per_step),
           Rule("train returns the 60 losses", _losses_returned),
           Rule("the reference's weights", _weights),
           Rule("the reference's losses", _reference_losses)),
    right=_right,
    probes=(Probe("an IPU program ran", lambda ran: _engine_run_count(ran, 0), "no engine run"),
            Probe("an infeed feeds every run",
                  lambda ran: _every_run(ran, infeed_bytes_per_iteration=0),
                  "no infeed: one batch from the host per run"),
            Probe("an infeed feeds every run",
                  lambda ran: last_run_changed(ran, infeed_bytes_per_iteration=0),
                  "the last run not fed by the infeed"),
            Probe("an infeed feeds every run", lambda ran: _every_run(
                _one_step_per_run(ran), infeed_bytes_per_iteration=0),
                "the starting code: one step per run, each batch from the host"),
            Probe("60 steps", lambda ran: _engine_run_count(ran, ran.runs.engine_runs + 1),
                  "one engine run too many"),
            Probe("60 steps", lambda ran: _engine_run_count(ran, ran.runs.engine_runs - 1),
                  "one engine run too few"),
            Probe("60 steps", lambda ran: last_run_changed(
                ran, iterations=TUTORIAL_STEPS_PER_EXECUTION - 1,
                outfeed_enqueues=TUTORIAL_STEPS_PER_EXECUTION - 1),
                "one step fewer in the last run"),
            Probe("runs of one length", _one_step_moved,
                  "a step moved from one run to the next"),
            Probe("several steps per run", _one_step_per_run, "one step per engine run"),
            Probe("losses through an outfeed", lambda ran: _every_run(ran, outfeed_enqueues=0),
                  "no loss enqueued"),
            Probe("one loss per step", lambda ran: _every_run(ran, outfeed_enqueues=1),
                  "one loss per run (enqueued after the loop)"),
            Probe("one loss per step", lambda ran: last_run_changed(
                ran, outfeed_enqueues=TUTORIAL_STEPS_PER_EXECUTION - 1),
                "one loss fewer in the last run"),
            Probe("one loss per step", lambda ran: last_run_changed(
                ran, outfeed_enqueues=TUTORIAL_STEPS_PER_EXECUTION + 1),
                "one loss more in the last run"),
            Probe("train returns the 60 losses", lambda ran: changed(ran, returned=None),
                  "no losses returned"),
            Probe("train returns the 60 losses", lambda ran: _losses(ran, STEPS - 1),
                  "one loss fewer returned"),
            Probe("train returns the 60 losses", lambda ran: _losses(ran, STEPS + 1),
                  "one loss more returned"),
            Probe("train returns the 60 losses", lambda ran: changed(
                _losses(ran, 1), last_mode=True, dequeued=0),
                "the outfeed in LAST mode: only the last loss returned"),
            Probe("train returns the 60 losses", lambda ran: changed(
                _losses(ran, ran.runs.engine_runs), dequeues=0, dequeued=0),
                "each run's result returned, the outfeed never dequeued"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger"),
            Probe("the reference's losses", lambda ran: changed(
                ran, returned=_flat_values(ran.returned) * 1.01), "the losses 1 % larger")))

check_outfeed_loop = check_of(
    EXERCISE, "check_outfeed_loop",
    """``train(dataset, steps)``: ``steps`` training steps in engine runs of
    ``steps_per_execution`` steps, fed by an infeed, every loss sent through an outfeed and
    returned by one dequeue at the end.""")


# --- 03.keras-steps-per-execution: its rules ---------------------------------------------------

# The programs Keras runs for evaluate and predict (a validation in fit runs evaluate's).
_NOT_TRAINING = ("test_function", "predict_function")


def _fit_runs(ran: ProgramRun):
    """fit's training runs, its validation's left out; every run when none trained (evaluate
    or predict in place of fit: the weights' rule says so)."""
    trained = [run for run in ran.runs.runs if run.program not in _NOT_TRAINING]
    return trained or list(ran.runs.runs)


def _fit_counts(ran: ProgramRun):
    return [run.iterations for run in _fit_runs(ran)]


def _fit_shape(ran: ProgramRun) -> str:
    return _shape_of_runs(_fit_counts(ran))


def _batch_size(ran: ProgramRun) -> float:
    """The images in each of fit's steps, from the bytes each step takes from the infeed
    (the reference's steps take batches of ``BATCH_SIZE``)."""
    reference = _fit_runs(ran.reference)[0].infeed_bytes_per_iteration
    return _fit_runs(ran)[0].infeed_bytes_per_iteration * BATCH_SIZE / reference


def _epochs(steps: int) -> str:
    return "one epoch" if steps == KERAS_BATCHES else f"{steps // KERAS_BATCHES} epochs"


def _keras_no_engine_run(ran: ProgramRun):
    if ran.runs.engine_runs == 0:
        return not_yet("fit made no engine run on the IPU: a model built outside "
                       "strategy.scope() is a plain Keras model. Build and compile it inside "
                       "the scope, as the starting code did.")
    return None


def _steps_per_epoch(ran: ProgramRun):
    """The steps_per_epoch the learner's fit was given, as the History fit returns says
    (None when it returned no History, or fit took whole epochs)."""
    params = getattr(ran.returned, "params", None)
    steps = params.get("steps") if isinstance(params, dict) else None
    return None if steps == KERAS_BATCHES else steps


def _several_steps_per_execution(ran: ProgramRun):
    if all(count == 1 for count in _fit_counts(ran)):
        per_epoch = _steps_per_epoch(ran)
        also = (f" steps_per_epoch={per_epoch} is another setting: it cuts each epoch to "
                f"{per_epoch} batches; leave it out." if per_epoch else "")
        return not_yet(f"fit made {_fit_shape(ran)}: steps_per_execution is still 1, so fit "
                       f"launches the program once per batch. Task b: compile(..., "
                       f"steps_per_execution=N), with N a divisor of the {KERAS_BATCHES} "
                       f"batches in an epoch.{also}")
    return None


def _two_epochs(ran: ProgramRun):
    """Batches of another size, or fewer or more steps than fit's two epochs: said when the
    weights moved (when they did not, the weights' rule says that first: ``evaluate`` makes
    steps too)."""
    steps, reference_steps = sum(_fit_counts(ran)), sum(_fit_counts(ran.reference))
    compared = compare_weights(ran.weights, ran.reference.weights)
    if compared is not None and not compared.moved:
        return None
    batch = _batch_size(ran)
    if batch != BATCH_SIZE:
        size = f"{batch:g} images" if batch == int(batch) else "another size"
        return not_yet(f"fit made {_fit_shape(ran)}, of batches of {size}: the task keeps "
                       f"the starting code's batches of {BATCH_SIZE}. Write "
                       f"batch({BATCH_SIZE}, drop_remainder=True) (task a): "
                       f"steps_per_execution groups the batches into engine runs, it does not "
                       f"change their size.")
    if steps == reference_steps:
        return None
    said = (f"fit made {_fit_shape(ran)}: {steps} steps where two epochs of the "
            f"{KERAS_BATCHES} whole batches are {reference_steps}.")
    if steps % KERAS_BATCHES == 0 and _steps_per_epoch(ran) is None:
        return not_yet(f"{said} That is {_epochs(steps)} of the whole dataset: train for two, "
                       f"with one fit of epochs=2 (or two fits of epochs=1); "
                       f"steps_per_execution only groups the steps into engine runs.")
    return not_yet(f"{said} Let fit take the whole dataset each epoch, with epochs=2 and no "
                   f"steps_per_epoch: steps_per_execution only groups the steps into engine "
                   f"runs.")


def _keras_weights(ran: ProgramRun):
    return weights_problem(
        ran.weights, ran.reference.weights, f"fit made {_fit_shape(ran)}",
        "Train with model.fit, which updates the weights (evaluate and predict do not).",
        f"fit trains on the whole data each epoch, {KERAS_BATCHES} batches of "
        f"{BATCH_SIZE}, for epochs=2, with the starting code's optimizer: steps_per_execution "
        f"changes how often the host launches, not which steps run.")


def _keras_right(ran: ProgramRun) -> str:
    steps, runs = sum(_fit_counts(ran)), len(_fit_runs(ran))
    validation = ran.runs.engine_runs - runs
    also = f" (and {_runs(validation)} of validation)" if validation else ""
    return (f"fit made {_fit_shape(ran)}{also}: {steps} steps of whole batches, launched "
            f"{runs} times instead of {steps}, and the weights ended where the tutorial's fit "
            f"leaves them. Keras made the infeed and the outfeed itself.")


KERAS_EXERCISE = Exercise(
    name="03.keras-steps-per-execution", starting_code=KERAS_STARTING_CODE,
    solution=keras_solution, run=run_keras_training,
    call="check_keras_steps_per_execution(train_keras)",
    free=(f"steps_per_execution: any divisor of the {KERAS_BATCHES} batches of an epoch "
          f"above 1", "one fit of two epochs, or two fits of one",
          "a validation in fit: its engine runs are not counted as training"),
    rules=(Rule("an IPU program ran", _keras_no_engine_run),
           Rule("several steps per execution", _several_steps_per_execution),
           Rule("two epochs of whole batches", _two_epochs),
           Rule("the reference's weights", _keras_weights)),
    right=_keras_right,
    probes=(Probe("an IPU program ran", lambda ran: _engine_run_count(ran, 0), "no engine run"),
            Probe("several steps per execution", lambda ran: with_engine_runs(
                ran, [changed(ran.runs.runs[0], iterations=1)] * sum(_counts(ran))),
                "one step per execution"),
            Probe("two epochs of whole batches",
                  lambda ran: _engine_run_count(ran, ran.runs.engine_runs + 1),
                  "one engine run too many"),
            Probe("two epochs of whole batches",
                  lambda ran: _engine_run_count(ran, ran.runs.engine_runs - 1),
                  "one engine run too few"),
            Probe("two epochs of whole batches",
                  lambda ran: last_run_changed(ran, iterations=ran.runs.runs[-1].iterations - 1),
                  "one step fewer"),
            Probe("two epochs of whole batches", lambda ran: _every_run(
                ran, infeed_bytes_per_iteration=ran.runs.runs[0].infeed_bytes_per_iteration * 2),
                "batches twice as large, as many steps"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger")))

check_keras_steps_per_execution = check_of(
    KERAS_EXERCISE, "check_keras_steps_per_execution",
    """``train_keras(images, labels)``: ``fit`` on whole batches, several steps per engine run,
    a divisor of the batches in an epoch.""")


__all__ = ["EXERCISE", "KERAS_EXERCISE", "check_outfeed_loop", "check_keras_steps_per_execution",
           "solution", "keras_solution", "run_training", "run_keras_training", "STARTING_CODE",
           "KERAS_STARTING_CODE", "make_model", "make_optimizer", "loss_and_update"]
