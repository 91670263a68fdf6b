"""Notebook 07's code exercise: shard the training step yourself (pipelining tutorial, step 2).

The learner starts from step 1's training step (one IPU) and does the tutorial's tasks: build
``flatten`` to ``dense64`` inside ``ipu.scopes.ipu_shard(0)`` and ``dense32``, the logits, the
loss and the optimizer inside ``ipu.scopes.ipu_shard(1)``.  ``check_sharded_step`` builds their
``training_step(learning_rate, images, labels)`` into one weight update's loop (16
mini-batches of 32 from an infeed), runs it once on a device of two IPUs and reads what ran:
the IPU each layer's forward ops and gradients ran on (a layer is found by its variable scope's
name), what crossed between the IPUs, and the weights it left beside the tutorial's step's.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, Set

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.code_exercises import (as_a_fresh_script, compiled_program,
                                         fed_digits_dataset, optimizer_state)
from ipu_emulator.code_exercises.harness import Exercise, Probe, Rule, changed, check_of
from ipu_emulator.code_exercises.reference import (NEVER_RUN_UPDATE, TOLERANCE, Facts,
                                                   scaled_update, weights_problem)
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.exercises import not_yet
from ipu_emulator.ipu import config, ipu_compiler, ipu_infeed_queue, loops, optimizers, scopes
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_emulator.lessons.placement import layer_of
from ipu_emulator.runtime import shards

BATCH_SIZE = 32
MINI_BATCHES = 16
# Where the tutorial's step 2 puts each layer (task c): IPU0 up to dense64, IPU1 the rest.
TUTORIAL_SPLIT = {"flatten": 0, "dense256": 0, "dense128": 0, "dense64": 0, "dense32": 1,
                  "logits": 1, "softmax_ce": 1}
LAYERS = list(TUTORIAL_SPLIT)
# Hints for the SDK's errors a sharding attempt can meet, by words of their messages.
SDK_HINTS = {
    "shards needs to divide": "the device has two IPUs, so the shards are ipu_shard(0) and "
                              "ipu_shard(1).",
    "has no attribute": "the scope is ipu.scopes.ipu_shard(k), used as `with "
                        "ipu.scopes.ipu_shard(0):`.",
    "ipu_shard() got an unexpected keyword argument": "ipu_shard takes the IPU's index, "
                                                      "positionally or as `index`: `with "
                                                      "ipu.scopes.ipu_shard(0):`, or "
                                                      "ipu_shard(index=0).",
    # The check's loop carries the learning rate.  A key of its own, found before the
    # general hint on loop bodies (code_exercises' own, keyed by the whole phrase), which
    # speaks of the inputs a learner's own loop is given.
    "Mismatch between input types and output types":
        "the check runs your step as the body of a loop that carries the learning rate, so "
        "the step returns it first and then minimize's result, `return learning_rate, "
        "train_op`, as the starting code does: any other tensor it returns (the loss) counts "
        "as one more carried value.",
}


# The cell the learner edits (tagged ``code-exercise`` in notebook 07): step 1's training
# step, on one IPU, with the tutorial's tasks.  ``print(code_exercises.STARTING_CODE)`` gives
# it back, to start again.
STARTING_CODE = '''\
# Your turn: shard step 1's training step (the pipelining tutorial's step 2)
#  [ ] a) build flatten, dense256, dense128 and dense64 inside ipu.scopes.ipu_shard(0)
#  [ ] b) build dense32, the logits, the loss and the optimizer inside ipu.scopes.ipu_shard(1)
#  [ ] c) change nothing else: the check runs your step on a device of two IPUs
def sharded_training_step(learning_rate, images, labels):
    with tf.variable_scope("flatten"):
        activations = tf.reshape(images, [-1, 28 * 28])
    for name, width in [("dense256", 256), ("dense128", 128), ("dense64", 64)]:
        with tf.variable_scope(name):
            activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(activations)
    with tf.variable_scope("dense32"):
        activations = tf.keras.layers.Dense(32, activation=tf.nn.relu)(activations)
    with tf.variable_scope("logits"):
        logits = tf.keras.layers.Dense(10)(activations)
    with tf.variable_scope("softmax_ce"):
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
    with tf.variable_scope("optimizer"):
        optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
            tf.train.GradientDescentOptimizer(learning_rate), num_mini_batches=16)
        train_op = optimizer.minimize(loss)
    return learning_rate, train_op'''


def last_layers(activations, labels):
    """The model's last layers, dense32, the logits and the loss, each in its scope (the
    second half of step 2's split, and step 3's second stage): the loss."""
    with tf.compat.v1.variable_scope("dense32"):
        activations = tf.keras.layers.Dense(32, activation=tf.nn.relu)(activations)
    with tf.compat.v1.variable_scope("logits"):
        logits = tf.keras.layers.Dense(10)(activations)
    with tf.compat.v1.variable_scope("softmax_ce"):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))


def solution(learning_rate, images, labels,
             reduction_method=GradientAccumulationReductionMethod.SUM):
    """The tutorial's step 2: the same layers, in two shard scopes."""
    with scopes.ipu_shard(0):
        with tf.compat.v1.variable_scope("flatten"):
            activations = tf.reshape(images, [-1, 28 * 28])
        for name, width in (("dense256", 256), ("dense128", 128), ("dense64", 64)):
            with tf.compat.v1.variable_scope(name):
                activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(activations)
    with scopes.ipu_shard(1):
        loss = last_layers(activations, labels)
        with tf.compat.v1.variable_scope("optimizer"):
            optimizer = optimizers.GradientAccumulationOptimizerV2(
                tf.compat.v1.train.GradientDescentOptimizer(learning_rate),
                num_mini_batches=MINI_BATCHES, reduction_method=reduction_method)
            train_op = optimizer.minimize(loss)
    return learning_rate, train_op


class _Ran(Facts):
    """What one run of the learner's step did: the IPUs each layer's forward ops and
    gradient ops ran on, and the engine run's record."""

    def __init__(self, program, run, weights: WeightWatch):
        self.run = run
        self.weights = weights
        self.forward: Dict[str, Set[int]] = defaultdict(set)
        self.gradients: Dict[str, Set[int]] = defaultdict(set)
        self.optimizer_shards: Set[int] = set()   # where minimize was built
        is_state = optimizer_state(program.graph)
        for op in program.new_ops:
            layer = layer_of(op.name, LAYERS)
            shard = shards.placed_shard(op, program.device_ordinal)
            parts = op.name.split("/")
            if parts[-2:-1] == ["gradients"] and parts[-1] in ("Shape", "Fill"):
                self.optimizer_shards.add(shard)   # the seed of the gradients: minimize's
            if layer is None or shard is None or op.type in ("Const", "NoOp") \
                    or is_state(op.name):
                continue
            where = self.gradients if "gradients" in op.name.split("/") else self.forward
            where[layer].add(shard)


def run_step(step) -> _Ran:
    """Build ``step`` into one weight update's loop on a device of two IPUs, run it once, and
    say what ran.  An error in the learner's code raises ``LearnerCodeFailed``.  The IPU
    system the learner configured, if any, is configured again afterwards."""
    weights = WeightWatch()
    with as_a_fresh_script(SDK_HINTS, watch=weights) as graph:
        dataset, digits = fed_digits_dataset(BATCH_SIZE * MINI_BATCHES)
        infeed = ipu_infeed_queue.IPUInfeedQueue(
            dataset.repeat().batch(BATCH_SIZE, drop_remainder=True))
        learning_rate = tf.compat.v1.placeholder(np.float32, [])
        with scopes.ipu_scope("/device:IPU:0"):
            train = ipu_compiler.compile(
                lambda lr: loops.repeat(MINI_BATCHES, step, [lr], infeed_queue=infeed),
                [learning_rate])
        program = compiled_program(graph)
        devices = config.IPUConfig()
        devices.auto_select_ipus = 2
        devices.configure_ipu_system()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(infeed.initializer, digits)
            with record.capture() as runs:
                session.run(train, {learning_rate: 0.01})
            weights.read(session)
    return _Ran(program, runs.runs[-1], weights)


def _used(ran: _Ran) -> Set[int]:
    return set().union(*ran.forward.values()) if ran.forward else set()


def _first_layers():
    return [layer for layer, k in TUTORIAL_SPLIT.items() if k == 0]


def _sharded(ran: _Ran):
    if _used(ran) <= {0} and not ran.run.stages:
        return not_yet("your step ran on one IPU: none of its ops was built inside "
                       "ipu.scopes.ipu_shard. Task a: put flatten, dense256, dense128 and "
                       "dense64 inside `with ipu.scopes.ipu_shard(0):`.")
    return None


def _every_layer_found(ran: _Ran):
    # The check finds a layer by its scope's name: a layer built under another name ran
    # somewhere the placement rule cannot see, and the Right text would claim its place.
    for layer in LAYERS:
        if not ran.forward.get(layer):
            return not_yet(f"the check found no op of {layer} in your step: it finds each "
                           f"layer by its variable scope, so keep the starting code's layers, "
                           f"each in its scope, `tf.variable_scope(\"{layer}\")` (task c: "
                           f"change nothing else).")
    return None


def _split(ran: _Ran):
    for layer, wanted in TUTORIAL_SPLIT.items():
        found = ran.forward.get(layer, set())
        if found and found != {wanted}:
            where = " and ".join(f"IPU{k}" for k in sorted(found))
            return not_yet(f"{layer} ran on {where}. The tutorial splits before dense32: "
                           f"IPU0 runs flatten to dense64, IPU1 dense32, the logits, the loss "
                           f"and the optimizer.")
    return None


def _gradients(ran: _Ran):
    if any(ran.gradients.get(layer, set()) - {1} for layer in _first_layers()):
        if ran.optimizer_shards == {1}:
            return not_yet("your optimizer is in ipu_shard(1), but each gradient of dense256 "
                           "to dense64 was computed beside its layer, on IPU0: that is what "
                           "minimize(..., colocate_gradients_with_ops=True) asks for. The "
                           "tutorial leaves it at its default, False: the SDK then computes "
                           "every gradient with the optimizer, on IPU1, as Graphcore's trace "
                           "of this step shows.")
        return not_yet("the gradients of IPU0's layers ran on IPU0. Task b builds the optimizer "
                       "inside ipu_shard(1), with the last layers: the SDK then computes every "
                       "gradient on IPU1, as Graphcore's trace of this step shows.")
    return None


def _accumulation_count(ran: _Ran):
    count = ran.run.gradient_accumulation_count
    if count != MINI_BATCHES:
        return not_yet(f"your step ran as the tutorial's step 2, flatten to dense64 on IPU0 and "
                       f"the rest on IPU1, but its optimizer added up {count} mini-batch"
                       f"{'es' if count != 1 else ''} per weight update: step 1's, in the "
                       f"starting code, adds up {MINI_BATCHES}. Keep num_mini_batches="
                       f"{MINI_BATCHES} (task c: change nothing else).")
    return None


def _weights(ran: _Ran):
    return weights_problem(
        ran.weights, ran.reference.weights,
        "your step ran as the tutorial's step 2, flatten to dense64 on IPU0 and the rest on "
        "IPU1",
        f"Keep the optimizer's minimize in ipu_shard(1) and return it: {NEVER_RUN_UPDATE}.",
        "Sharding changes where the ops run, not what they compute: keep the layers, the loss "
        "and the accumulating optimizer of the starting code as they were (task c).",
        variants=ran.mean_variants(ran.run.gradient_accumulation_reduction))


def _right(ran: _Ran) -> str:
    [(_, _, copied, copies)] = [r for r in ran.run.stages[1].reads if r[0] == "backward"]
    return (f"your step ran as the tutorial's step 2: flatten to dense64 on IPU0; "
            f"dense32, the logits, the loss and every gradient on IPU1. For its backward "
            f"pass, IPU1 read {copied:,} bytes in {copies} copies from IPU0 each "
            f"mini-batch (IPU0's activations and weights): the price of computing the "
            f"gradients away from their layers.")


def _placed(ran: _Ran, **layers) -> _Ran:
    """``ran`` with the forward ops of ``layers`` on the IPUs given (None: the layer missing
    from the record): for the probes."""
    forward = dict(ran.forward, **layers)
    return changed(ran, forward={layer: ipus for layer, ipus in forward.items()
                                 if ipus is not None})


def _on_one_ipu(ran: _Ran) -> _Ran:
    """``ran`` as step 1's code runs: every layer on IPU0, no shards."""
    return changed(ran, forward={layer: {0} for layer in ran.forward},
                   run=changed(ran.run, stages=()))


def _gradients_placed(ran: _Ran, optimizer_shards, **layers) -> _Ran:
    return changed(ran, gradients=dict(ran.gradients, **layers),
                   optimizer_shards=optimizer_shards)


def _accumulating(ran: _Ran, count: int) -> _Ran:
    return changed(ran, run=changed(ran.run, gradient_accumulation_count=count))


EXERCISE = Exercise(
    name="07.shard-the-step", starting_code=STARTING_CODE, solution=solution, run=run_step,
    call="check_sharded_step(sharded_training_step)",
    free=("the reduction of the accumulated gradients: added up (SUM, the SDK's default) or "
          "averaged (MEAN, RUNNING_MEAN)",),
    rules=(Rule("the step is sharded", _sharded),
           Rule("every layer in its scope", _every_layer_found),
           Rule("the tutorial's split", _split),
           Rule("every gradient on IPU1", _gradients),
           Rule("16 mini-batches per update", _accumulation_count),
           Rule("the reference's weights", _weights)),
    right=_right,
    probes=(Probe("the step is sharded", _on_one_ipu, "every layer on IPU0, no shards"),
            Probe("every layer in its scope", lambda ran: _placed(ran, dense64=None),
                  "dense64 missing from the record (built under another name)"),
            Probe("every layer in its scope", lambda ran: _placed(ran, flatten=None),
                  "flatten missing from the record"),
            Probe("the tutorial's split", lambda ran: _placed(ran, dense64={0, 1}),
                  "IPU0's last layer, dense64, on both IPUs"),
            Probe("the tutorial's split", lambda ran: _placed(ran, dense32={0, 1}),
                  "IPU1's first layer, dense32, on both IPUs"),
            Probe("the tutorial's split", lambda ran: _placed(ran, dense64={1}),
                  "the split one layer early"),
            Probe("the tutorial's split", lambda ran: _placed(ran, dense32={0}),
                  "the split one layer late"),
            Probe("every gradient on IPU1",
                  lambda ran: _gradients_placed(ran, {1}, dense64={0, 1}),
                  "dense64's gradients on both IPUs, the optimizer on IPU1"),
            Probe("every gradient on IPU1",
                  lambda ran: _gradients_placed(ran, {0}, **{layer: {0} for layer in
                                                             _first_layers()}),
                  "the optimizer and IPU0's layers' gradients on IPU0"),
            Probe("16 mini-batches per update",
                  lambda ran: _accumulating(ran, MINI_BATCHES + 1),
                  "one mini-batch more per update"),
            Probe("16 mini-batches per update",
                  lambda ran: _accumulating(ran, MINI_BATCHES - 1),
                  "one mini-batch fewer per update"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger")))

check_sharded_step = check_of(
    EXERCISE, "check_sharded_step",
    """``training_step(learning_rate, images, labels)``, sharded as the tutorial's step 2.""")


__all__ = ["EXERCISE", "check_sharded_step", "solution", "last_layers", "run_step",
           "STARTING_CODE"]
