"""Notebook 05's code exercise: replicate a one-IPU training program (tutorial 4).

The learner starts from a one-IPU program in the tutorial's order (an infeed and an outfeed
with names, the training step as the body of ``ipu.loops.repeat``, the loop compiled, the IPU
system configured last, one ``sess.run``) and replicates it the tutorial's way: a device of
two IPUs, so that each IPU runs a replica; the number of replicas given to both queues with
their ``replication_factor`` argument (the tutorial's SDK, 2.0 and earlier, needs it); and the
optimizer wrapped in ``ipu.optimizers.CrossReplicaOptimizer``, so that every replica applies
the mean of all the replicas' gradients.

``check_replicated_training`` calls their ``train(images, labels, steps)`` in a fresh graph,
with no IPU system configured (their code configures it), and reads the record of what ran:
the replicas, the device's IPUs, whether an all-reduce of the gradients ran and of how many
bytes, the engine runs and their iterations, and what each replica took from the infeed;
then the weights it left and the losses ``train`` returned, beside the tutorial's program's.
"""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from ipu_emulator.code_exercises import ProgramRun, run_attempt, sample_digits
from ipu_emulator.code_exercises.harness import (Exercise, Probe, Rule, changed, check_of,
                                                 last_run_changed, engine_runs_like_last)
from ipu_emulator.code_exercises.reference import (NEVER_RUN_UPDATE, TOLERANCE, Facts,
                                                   same_values, scaled_update, weights_problem)
from ipu_emulator.code_exercises.wording import (DIGIT_BYTES, engine_runs as _runs,
                                                 images_per_batch, kind_of, other_batch)
from ipu_emulator.exercises import not_yet
from ipu_emulator.ipu import (config, ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, loops,
                              optimizers, scopes)
from ipu_emulator.runtime import ipu_backend, programs, replication

BATCH_SIZE = 32
STEPS = 10          # steps the check asks train for: each replica makes them all
REPLICAS = 2        # the device of the tutorial's tasks: 2 IPUs, one replica on each
IMAGES = 2 * STEPS * BATCH_SIZE
# Hints for the SDK's errors a replicating attempt can meet, by words of their messages (the
# queues' replication mismatch is told apart by its numbers: ``_replication_mismatch_hint``).
SDK_HINTS = {
    "could not find an IPU device with": "multi-IPU devices come in powers of two (2, 4, 8, "
                                         "16): auto_select_ipus = 2 gives two replicas of this "
                                         "one-IPU program.",
    "has no attribute": "the names are ipu.optimizers.CrossReplicaOptimizer(optimizer) and "
                        "config.auto_select_ipus; the queues take replication_factor=2.",
    # Before the queues' hint: the wrapper's own arguments (Python 3.10 names the class).
    "CrossReplicaOptimizer.__init__() got an unexpected keyword argument":
        "CrossReplicaOptimizer takes only the optimizer it wraps (and a name): "
        "ipu.optimizers.CrossReplicaOptimizer(tf.train.GradientDescentOptimizer(0.05)) "
        "averages over every replica the device makes. The count goes to the device "
        "(task a) and to the queues' replication_factor (task b).",
    "unexpected keyword argument": "both queues take the count as `replication_factor=2`, "
                                   "next to their feed_name.",
}
_MISMATCH = re.compile(r"created with replication_factor (\d+), however the (IPU\w+Queue) has "
                       r"been configured with replication_factor (\d+)")


# The cell the learner edits (tagged ``code-exercise`` in notebook 05): a one-IPU program in the
# tutorial's order, with the tutorial's tasks.  ``print(code_exercises.STARTING_CODE)`` gives it
# back, to start again.
STARTING_CODE = '''\
# Your turn: replicate this one-IPU program on two IPUs (the tutorial's replicated graphs)
#  [ ] a) configure a device of 2 IPUs: each IPU runs a replica of the program
#  [ ] b) tell both queues the number of replicas: replication_factor=2 (the tutorial's SDK needs it)
#  [ ] c) wrap the optimizer in ipu.optimizers.CrossReplicaOptimizer, so that all the replicas
#         apply the same update: the mean of their gradients
def train(images, labels, steps):
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        dataset.batch(32, drop_remainder=True), feed_name="training_infeed")
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(feed_name="loss_outfeed")

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        optimizer = tf.train.GradientDescentOptimizer(0.05)
        return outfeed.enqueue(loss), optimizer.minimize(loss)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train_on_ipu = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, training_step, infeed_queue=infeed))
    read_losses = outfeed.dequeue()

    config = ipu.config.IPUConfig()          # configured last, as in the tutorial
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(infeed.initializer)
        sess.run(train_on_ipu)               # all the steps: one engine run
        return sess.run(read_losses)         # one loss per step (and per replica)'''


def solution(images, labels, steps):
    """The tutorial's replicated program: two IPUs, the feeds told, gradients all-reduced."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu_infeed_queue.IPUInfeedQueue(
        dataset.batch(BATCH_SIZE, drop_remainder=True), feed_name="training_infeed",
        replication_factor=REPLICAS)
    outfeed = ipu_outfeed_queue.IPUOutfeedQueue(feed_name="loss_outfeed",
                                                replication_factor=REPLICAS)

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        optimizer = optimizers.CrossReplicaOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.05))
        return outfeed.enqueue(loss), optimizer.minimize(loss)

    with scopes.ipu_scope("/device:IPU:0"):
        train_on_ipu = ipu_compiler.compile(
            lambda: loops.repeat(steps, training_step, infeed_queue=infeed))
    read_losses = outfeed.dequeue()

    device = config.IPUConfig()
    device.auto_select_ipus = REPLICAS
    device.configure_ipu_system()
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        sess.run(train_on_ipu)
        return sess.run(read_losses)


class _Ran(Facts):
    """What the learner's ``train`` did: its engine runs, what it returned, its weights, and
    whether the queues of the programs it built were told the replicas with
    ``replication_factor``."""

    def __init__(self, run: ProgramRun, queues_told: bool):
        self.runs = run.runs
        self.returned = run.returned
        self.weights = run.weights
        self.queues_told = queues_told


def run_training(train) -> _Ran:
    """Call ``train(images, labels, STEPS)`` in a fresh graph with no IPU system configured, as
    a fresh script would start, on a small sample of MNIST; return what ran.  An error in the
    learner's code raises ``LearnerCodeFailed``.  The IPU system the learner configured in
    the notebook, if any, is configured again afterwards."""
    hints = dict(SDK_HINTS)

    def attempt(*args):
        # The queues' replication mismatch is told apart by the numbers in its message: its
        # hint goes into the hints before the error is folded, so that it is folded once.
        try:
            return train(*args)
        except Exception as error:  # pylint: disable=broad-except  (raised again)
            hint = _replication_mismatch_hint(getattr(error, "message", None) or str(error),
                                              _selected_no_ipus())
            if hint is not None:
                hints.clear()
                hints[""] = hint
            raise

    ran = run_attempt(attempt, *sample_digits(IMAGES), STEPS, hints=hints)
    replicas = ran.runs.runs[-1].replicas if ran.runs.runs else 1
    return _Ran(ran, _queues_told(ran.graph, replicas))


def _queues_told(graph, replicas: int) -> bool:
    """Whether every queue of some program in ``graph`` says ``replication_factor=replicas``
    (SDK 2.1 and later read the count from the device and ignore the argument)."""
    registry = programs.existing_registry(graph)
    for program in (registry.program_by_fetch.values() if registry is not None else ()):
        queues = list(program.infeeds) + list(program.outfeeds)
        if queues and all(replication.declared_replication_factor(queue) == replicas
                          for queue in queues):
            return True
    return False


def _selected_no_ipus() -> bool:
    """Whether the learner's code applied an IPU configuration that selected no IPUs (its
    auto_select_ipus set after configure_ipu_system(), or never): the SDK then makes a
    device of one IPU by itself."""
    options = ipu_backend.applied_options()
    return options is not None and not options.device_config


def _replication_mismatch_hint(message: str, selected_no_ipus: bool = False):
    """The hint for the SDK's error when a queue's ``replication_factor`` is not the number of
    replicas the device gives the program: which of the mistakes it was, read from the
    numbers in the message (and, for a device of one IPU, whether the configuration the
    learner applied selected any IPUs)."""
    found = _MISMATCH.search(message)
    if found is None:
        return None
    program, queue, declared = int(found.group(1)), found.group(2), int(found.group(3))
    if program == 1 and selected_no_ipus:
        return (f"the {queue} was told {declared} replicas, but the configuration your code "
                f"applied selected no IPUs, so the SDK made a device of one IPU and the "
                f"program ran as a single replica. A configuration is read when "
                f"configure_ipu_system() applies it: set config.auto_select_ipus = {declared} "
                f"before that call (task a).")
    if program == 1:
        return (f"the {queue} was told {declared} replicas, but the device has one IPU, so the "
                f"program runs as a single replica. Task a: config.auto_select_ipus = "
                f"{declared}.")
    if declared == 1:
        return (f"the device of {program} IPUs runs {program} replicas, and the {queue} was "
                f"not told: in the tutorial's SDK each queue needs the count. Task b: "
                f"replication_factor={program} when you create the {queue}.")
    return (f"the {queue} was told {declared} replicas, but the device makes {program}: one "
            f"replica per IPU, as the program uses one IPU. The queues' replication_factor "
            f"and the device's auto_select_ipus must be the same number.")


def _losses(returned):
    """The losses ``train`` returned, as an array, or None when it returned no numbers."""
    try:
        values = np.asarray(returned, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return values if values.size > 1 else None


def _what(returned) -> str:
    values = _losses(returned)
    if values is None:
        if isinstance(returned, np.ndarray) and returned.size == 0:
            return ("an empty array, what the outfeed's dequeue gives before the training run "
                    "has filled it")
        return kind_of(returned)
    return f"{values.size} values (the first {values.ravel()[0]:.3f})"


def _last(ran: _Ran):
    return ran.runs.runs[-1]


def _all_reduced(ran: _Ran) -> str:
    return f"your {_last(ran).replicas} replicas all-reduced their gradients"


def _no_engine_run(ran: _Ran):
    if ran.runs.engine_runs == 0:
        return not_yet("your train function ran no IPU program: keep the sess.run of the "
                       "compiled loop inside the session.")
    return None


def _replicas(ran: _Ran):
    run = _last(ran)
    if run.replicas == 1:
        return not_yet(f"your program ran as one replica on a device of {run.num_ipus} IPU"
                       f"{'s' if run.num_ipus != 1 else ''}: every step trained one model on "
                       f"one mini-batch. Task a: set config.auto_select_ipus = 2, and the "
                       f"one-IPU program runs as two replicas, one per IPU.")
    # More replicas than the tutorial's (the queues left untold, which SDK 2.1 allows) train
    # one model too, on more mini-batches per update: the weights would differ, and their
    # hint would guess at batches or a loss.
    if run.replicas != REPLICAS:
        return not_yet(f"your program ran as {run.replicas} replicas on a device of "
                       f"{run.num_ipus} IPUs, where the tutorial's tasks make {REPLICAS}: each "
                       f"update then averaged the gradients of {run.replicas} mini-batches, not "
                       f"{REPLICAS}. Task a: config.auto_select_ipus = {REPLICAS}, one replica "
                       f"per IPU.")
    return None


def _one_engine_run(ran: _Ran):
    runs = ran.runs
    if runs.engine_runs > 1:
        counts = ", ".join(str(r.iterations) for r in runs.runs)
        return not_yet(f"your program made {_runs(runs.engine_runs)} (of {counts} steps): keep "
                       f"the whole loop in one sess.run of the compiled program, as the "
                       f"starting code did.")
    return None


def _steps(ran: _Ran):
    run = _last(ran)
    if run.iterations != STEPS:
        return not_yet(f"your program made one engine run of {run.iterations} steps, but the "
                       f"check asked train for {STEPS}: repeat's count is train's `steps` "
                       f"argument.")
    return None


def _all_reduce(ran: _Ran):
    run = _last(ran)
    gradient_bytes = run.step_cost.gradients_held()
    if run.all_reduce_bytes == 0:
        return not_yet(f"your {run.replicas} replicas each trained on mini-batches of their own, "
                       f"but no all-reduce ran: each replica applied its own gradients, so "
                       f"after the first step their weights drifted apart, {run.replicas} "
                       f"different models instead of one. Task c: wrap the optimizer, "
                       f"ipu.optimizers.CrossReplicaOptimizer(tf.train.GradientDescentOptimizer"
                       f"(0.05)).")
    if run.all_reduce_bytes < gradient_bytes:
        return not_yet(f"an all-reduce ran, but of {run.all_reduce_bytes:,} bytes per step: "
                       f"the model's gradients are {gradient_bytes:,} bytes, so the replicas "
                       f"still applied updates of their own and drifted apart. Wrap the "
                       f"optimizer itself in ipu.optimizers.CrossReplicaOptimizer (task c).")
    return None


def _batch(ran: _Ran):
    return other_batch(images_per_batch(_last(ran).infeed_bytes_per_iteration), BATCH_SIZE,
                       _all_reduced(ran))


def _weights(ran: _Ran):
    return weights_problem(
        ran.weights, ran.reference.weights, _all_reduced(ran),
        f"The loop body returns the outfeed's enqueue and minimize's result: "
        f"{NEVER_RUN_UPDATE}.",
        "CrossReplicaOptimizer applies the mean of the replicas' gradients with the optimizer "
        "it wraps, GradientDescentOptimizer(0.05) as in the starting code: wrap it, without "
        "adding up or scaling the gradients yourself (task c).")


def _losses_returned(ran: _Ran):
    if not same_values(_losses(ran.returned), _losses(ran.reference.returned)):
        return not_yet(f"your replicas trained as the tutorial's do, but train returned "
                       f"{_what(ran.returned)}, not the {STEPS} x {_last(ran).replicas} losses "
                       f"the outfeed received: return what the outfeed's dequeue gives, "
                       f"`return sess.run(read_losses)`, after the training run.")
    return None


def _right(ran: _Ran) -> str:
    run = _last(ran)
    batch = images_per_batch(run.infeed_bytes_per_iteration)
    taken = run.replicas * run.iterations
    told = ("" if ran.queues_told else
            " (your queues were not told replication_factor: from SDK 2.1 the SDK reads it "
            "from the device and ignores the argument, but the tutorial's SDK needs it on "
            "both queues)")
    return (f"your program ran as {run.replicas} replicas on a device of {run.num_ipus} "
            f"IPUs, in one engine run of {run.iterations} steps{told}. At every step each "
            f"replica took its own mini-batch from the infeed ({taken} in all, "
            f"{run.infeed_bytes_per_iteration:,} bytes each), and before every weight "
            f"update the replicas all-reduced their gradients ({run.all_reduce_bytes:,} "
            f"bytes each): all applied the same update, so they stayed one model, trained "
            f"on {run.replicas} x {batch} images per update, to the weights the "
            f"tutorial's program ends with.")


def _gradient_bytes(ran: _Ran) -> int:
    return _last(ran).step_cost.gradients_held()


EXERCISE = Exercise(
    name="05.replicate", starting_code=STARTING_CODE, solution=solution, run=run_training,
    call="check_replicated_training(train)",
    free=("the queues' replication_factor: SDK 2.1 and later read it from the device, so "
          "queues left untold pass, with a note that the tutorial's SDK needs it",
          "the mean of the gradients across replicas written by hand (cross_replica_mean)"),
    rules=(Rule("an IPU program ran", _no_engine_run),
           Rule("two replicas", _replicas),
           Rule("one engine run", _one_engine_run),
           Rule("10 steps", _steps),
           Rule("every gradient all-reduced", _all_reduce),
           Rule("batches of 32", _batch),
           Rule("the reference's weights", _weights),
           Rule("the outfeed's losses returned", _losses_returned)),
    right=_right,
    probes=(Probe("an IPU program ran", lambda ran: engine_runs_like_last(ran, 0), "no engine run"),
            Probe("two replicas", lambda ran: last_run_changed(ran, replicas=1, num_ipus=1),
                  "one replica on one IPU"),
            Probe("two replicas", lambda ran: last_run_changed(ran, replicas=1),
                  "one replica on the device of two IPUs"),
            Probe("two replicas",
                  lambda ran: last_run_changed(ran, replicas=REPLICAS + 1, num_ipus=REPLICAS + 1),
                  "one replica too many"),
            Probe("one engine run", lambda ran: engine_runs_like_last(ran, 2),
                  "one engine run too many"),
            Probe("10 steps", lambda ran: last_run_changed(ran, iterations=STEPS + 1),
                  "one step more"),
            Probe("10 steps", lambda ran: last_run_changed(ran, iterations=STEPS - 1),
                  "one step fewer"),
            Probe("every gradient all-reduced", lambda ran: last_run_changed(ran, all_reduce_bytes=0),
                  "no all-reduce"),
            Probe("every gradient all-reduced", lambda ran: last_run_changed(
                ran, all_reduce_bytes=_gradient_bytes(ran) - 1), "one byte short of the gradients"),
            Probe("batches of 32", lambda ran: last_run_changed(
                ran, infeed_bytes_per_iteration=(BATCH_SIZE + 1) * DIGIT_BYTES),
                "one image more per batch"),
            Probe("batches of 32", lambda ran: last_run_changed(
                ran, infeed_bytes_per_iteration=(BATCH_SIZE - 1) * DIGIT_BYTES),
                "one image fewer per batch"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger"),
            Probe("the outfeed's losses returned", lambda ran: changed(
                ran, returned=np.asarray(ran.returned) * 1.01), "the losses 1 % larger")))

check_replicated_training = check_of(
    EXERCISE, "check_replicated_training",
    """``train(images, labels, steps)``: replicated on two IPUs the tutorial's way.""")


__all__ = ["EXERCISE", "check_replicated_training", "solution", "run_training", "STARTING_CODE"]
