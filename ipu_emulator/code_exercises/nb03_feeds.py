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
and how many losses ``train`` returned.

``03.keras-steps-per-execution``.  The learner starts from a Keras model trained with ``fit``
inside an ``IPUStrategy``, as one would write it for a CPU: ``batch(32)`` and one step per
execution.  They batch with ``drop_remainder=True`` and pass ``steps_per_execution`` to
``compile``, a divisor of the batches in an epoch.  ``check_keras_steps_per_execution`` calls
their ``train_keras(images, labels)`` on ``KERAS_IMAGES`` sample digits and reads the engine
runs ``fit`` made and their iterations.

The learner's code uses the notebook's ``make_model``, ``make_optimizer`` and
``loss_and_update``; this module has the same three, for its solutions and tests.
"""
from __future__ import annotations

import contextlib
import functools
import re

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.code_exercises.reference import (compare_weights, reference_run, same_values,
                                                   weights_problem)
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.code_exercises import (LearnerCodeFailed, code_exercise, learner_error,
                                         sample_digits)
from ipu_emulator.code_exercises.wording import engine_runs as _runs, steps as _steps
from ipu_emulator.exercises import not_yet, right
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

def _run(attempt, *args):
    """``attempt(*args)`` on one freshly configured IPU, its weights started as the
    reference's (``weights.WeightWatch``): the record of its engine runs, what it returned
    and the weights.  An error in the learner's code raises ``LearnerCodeFailed``; the IPU
    system the learner configured, if any, is configured again afterwards."""
    try:
        with ipu_backend.configuration_kept():
            config.reset_ipu_configuration()   # as a fresh script: the device is configured below
            device = config.IPUConfig()
            device.auto_select_ipus = 1
            device.configure_ipu_system()
            weights = WeightWatch()
            with record.capture() as runs, weights.watching():
                returned = attempt(*args)
    except Exception as error:  # pylint: disable=broad-except  (the learner's code: a hint)
        raise LearnerCodeFailed(learner_error(_without_values(error), SDK_HINTS)) from error
    return runs, returned, weights


# A variable's repr in an error message (TensorFlow's "not created in the distribution
# strategy scope") prints its values: thousands of digits the learner need not read.
_VARIABLE_VALUES = re.compile(r"(<tf\.Variable '[^']*' shape=\([^)]*\) dtype=\w+), numpy=.*?\)>",
                              re.DOTALL)


def _without_values(error: BaseException) -> BaseException:
    """``error``, or one of its type with the variables' values left out of its message."""
    message = str(error)
    shortened = _VARIABLE_VALUES.sub(r"\1>", message)
    if shortened == message:
        return error
    try:
        return type(error)(shortened)
    except TypeError:  # an error type built from other arguments: keep it as it is
        return error


def run_training(train):
    """``train(dataset, STEPS)`` on batches of 32 sample digits, repeated: the record, the
    losses ``train`` returned, the weights and how many times it dequeued an outfeed."""
    images, labels = sample_digits(20 * BATCH_SIZE)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    with _counting_dequeues() as dequeues:
        runs, returned, weights = _run(train, dataset.batch(BATCH_SIZE, drop_remainder=True),
                                       STEPS)
    return runs, returned, weights, dequeues[0]


@contextlib.contextmanager
def _counting_dequeues():
    """Inside: every ``IPUOutfeedQueue.dequeue`` call counted (yields a one-item list)."""
    counted = [0]
    original = ipu_outfeed_queue.IPUOutfeedQueue.dequeue

    @functools.wraps(original)
    def dequeue(queue, *args, **kwargs):
        counted[0] += 1
        return original(queue, *args, **kwargs)

    ipu_outfeed_queue.IPUOutfeedQueue.dequeue = dequeue
    try:
        yield counted
    finally:
        ipu_outfeed_queue.IPUOutfeedQueue.dequeue = original


def run_keras_training(train_keras):
    """``train_keras(images, labels)`` on ``KERAS_IMAGES`` sample digits: the record and the
    weights."""
    runs, _, weights = _run(train_keras, *sample_digits(KERAS_IMAGES))
    return runs, weights


# --- feedback -------------------------------------------------------------------------------

def _shape_of_runs(counts) -> str:
    """"6 engine runs of 10 steps each", or "3 engine runs (of 25, 25 and 10 steps)"."""
    if len(set(counts)) == 1:
        each = " each" if len(counts) > 1 else ""
        return f"{_runs(len(counts))} of {_steps(counts[0])}{each}"
    listed = ", ".join(map(str, counts[:-1])) + f" and {counts[-1]}"
    return f"{_runs(len(counts))} (of {listed} steps)"


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


@code_exercise("03.outfeed-loop", solution=solution)
def check_outfeed_loop(train):
    """``train(dataset, steps)``: ``steps`` training steps in engine runs of
    ``steps_per_execution`` steps, fed by an infeed, every loss sent through an outfeed and
    returned by one dequeue at the end."""
    if not callable(train):
        return not_yet("pass the function itself, without calling it: "
                       "check_outfeed_loop(train).")
    runs, returned, weights, dequeues = run_training(train)
    if runs.engine_runs == 0:
        return not_yet("your train function ran no IPU program: call strategy.run on your "
                       "tf.function inside the strategy's scope (task d).")
    counts = [run.iterations for run in runs.runs]
    fed = all(run.infeed_bytes_per_iteration for run in runs.runs)
    sent = [run.outfeed_enqueues or 0 for run in runs.runs]
    shape = _shape_of_runs(counts)
    if not fed:
        if all(count == 1 for count in counts):
            return not_yet(f"your program made {shape}, each given its batch by the host: the "
                           f"loop is still in Python around strategy.run. Task b: loop over "
                           f"tf.range(steps_per_execution) inside the tf.function, taking each "
                           f"batch with next() from iter(dataset) made inside the scope.")
        return not_yet(f"your program made {shape}, but no infeed fed them: the host handed "
                       f"each run one batch, so its steps all trained on that batch. Task b: "
                       f"make the iterator with iter(dataset) inside the strategy's scope, "
                       f"pass it to the tf.function and call next() on it in the loop.")
    if sum(counts) != STEPS:
        return not_yet(f"your program made {shape}: {sum(counts)} steps, but the check asked "
                       f"train for {STEPS}. The host's loop launches whole engine runs, so "
                       f"steps_per_execution must divide the steps, as the tutorial's 10 "
                       f"divides its 10,000 (task a).")
    if len(set(counts)) > 1:
        return not_yet(f"your program made {shape}: runs of different lengths. On an IPU each "
                       f"loop count is a program of its own, compiled and loaded anew; pick a "
                       f"steps_per_execution that divides the steps, and run it every time "
                       f"(task a).")
    if counts[0] == 1:
        return not_yet(f"your program made {shape}, fed by the infeed: the loop is on the "
                       f"IPU, but it runs one step per launch. Task a: "
                       f"steps_per_execution = 10, so each engine run makes ten steps.")
    if not any(sent):
        return not_yet(f"your program made {shape}, fed by the infeed, but it sent no loss "
                       f"through an outfeed: a run returns only what is left when its loop "
                       f"ends. Task c: create an IPUOutfeedQueue and enqueue each step's loss "
                       f"to it inside the loop.")
    if sent != counts:
        received = (f"{'one loss' if sent[0] == 1 else f'{sent[0]} losses'} per run"
                    if len(set(sent)) == 1 else f"{', '.join(map(str, sent))} losses")
        return not_yet(f"your program made {shape}, but the outfeed received {received}, "
                       f"not one per step. Task c: enqueue inside the tf.range loop, so every "
                       f"step sends its loss.")
    returned_count = _count_returned(returned)
    if returned_count is None:
        return not_yet(f"your program made {shape} and the outfeed received all {STEPS} "
                       f"losses, but train returned none of them. Task d: after the runs, "
                       f"return outfeed.dequeue().")
    if returned_count != STEPS:
        return not_yet(f"your program made {shape} and the outfeed received all {STEPS} "
                       f"losses, but train returned {returned_count}. Each dequeue empties "
                       f"the outfeed: dequeue once, after all the runs (task d).")
    _, reference_returned, reference_weights, _ = reference_run(
        "03.outfeed-loop", lambda: run_training(solution))
    problem = weights_problem(
        weights, reference_weights,
        f"your program made {shape}, fed by the infeed, every loss through the outfeed",
        f"Each step calls loss_and_update, which applies the gradients: enqueue what it "
        f"returns.",
        "The loop keeps the starting code's step, loss_and_update with the model and "
        "optimizer made in the strategy's scope, one batch per step.")
    if problem is not None:
        return problem
    if not same_values(np.ravel(np.asarray(returned, dtype=np.float64)),
                       np.ravel(np.asarray(reference_returned, dtype=np.float64))):
        return not_yet(f"your program made {shape} and the outfeed received all {STEPS} "
                       f"losses, but train returned {STEPS} other values: return what "
                       f"outfeed.dequeue() gives, after all the runs (task d).")
    return right(f"{shape}, each taking its batches from the infeed and sending every loss "
                 f"through the outfeed; {_dequeues(dequeues)} brought back all {STEPS}, the "
                 f"losses of the tutorial's program. The host launched the program "
                 f"{len(counts)} times instead of {STEPS}: on an IPU each launch costs about "
                 f"a millisecond, which the sections below measure.")


@code_exercise("03.keras-steps-per-execution", solution=keras_solution)
def check_keras_steps_per_execution(train_keras):
    """``train_keras(images, labels)``: ``fit`` on whole batches, several steps per engine run,
    a divisor of the batches in an epoch."""
    if not callable(train_keras):
        return not_yet("pass the function itself, without calling it: "
                       "check_keras_steps_per_execution(train_keras).")
    runs, weights = run_keras_training(train_keras)
    if runs.engine_runs == 0:
        return not_yet("fit made no engine run on the IPU: a model built outside "
                       "strategy.scope() is a plain Keras model. Build and compile it inside "
                       "the scope, as the starting code did.")
    counts = [run.iterations for run in runs.runs]
    shape = _shape_of_runs(counts)
    if all(count == 1 for count in counts):
        return not_yet(f"fit made {shape}: steps_per_execution is still 1, so fit launches "
                       f"the program once per batch. Task b: compile(..., "
                       f"steps_per_execution=N), with N a divisor of the {KERAS_BATCHES} "
                       f"batches in an epoch.")
    reference_runs, reference_weights = reference_run(
        "03.keras-steps-per-execution", lambda: run_keras_training(keras_solution))
    reference_steps = sum(run.iterations for run in reference_runs.runs)
    compared = compare_weights(weights, reference_weights)
    problem = weights_problem(
        weights, reference_weights, f"fit made {shape}",
        "Train with model.fit, which updates the weights (evaluate and predict do not).",
        f"fit trains on the whole data each epoch, {KERAS_BATCHES} batches of "
        f"{BATCH_SIZE}, for epochs=2, with the starting code's optimizer: steps_per_execution "
        f"changes how often the host launches, not which steps run.")
    if sum(counts) != reference_steps and (compared is None or compared.moved):
        return not_yet(f"fit made {shape}: {sum(counts)} steps where two epochs of the "
                       f"{KERAS_BATCHES} whole batches are {reference_steps}. Let fit take the "
                       f"whole dataset each epoch, with epochs=2 and no steps_per_epoch: "
                       f"steps_per_execution only groups the steps into engine runs.")
    if problem is not None:
        return problem
    return right(f"fit made {shape}: {sum(counts)} steps of whole batches, launched "
                 f"{len(counts)} times instead of {sum(counts)}, and the weights ended where "
                 f"the tutorial's fit leaves them. Keras made the infeed and the outfeed "
                 f"itself.")


__all__ = ["check_outfeed_loop", "check_keras_steps_per_execution", "solution",
           "keras_solution", "run_training", "run_keras_training", "STARTING_CODE",
           "KERAS_STARTING_CODE", "make_model", "make_optimizer", "loss_and_update"]
