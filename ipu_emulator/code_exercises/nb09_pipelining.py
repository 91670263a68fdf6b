"""Notebook 09's code exercise: pipeline the sharded program yourself (pipelining tutorial,
step 3).

The learner starts from step 2's program: ``pipelined_model(learning_rate, infeed, outfeed)``
returns an ``ipu.loops.repeat`` of 64 mini-batches whose body builds the layers in two
``ipu_shard`` scopes and accumulates 16 mini-batches' gradients with a
``GradientAccumulationOptimizerV2``.  They turn it into step 3's pipeline: two stage functions
(``flatten`` to ``dense64``; ``dense32``, the logits and the loss), an optimizer function
returning ``ipu.pipelining_ops.OptimizerFunctionOutput``, and ``ipu.pipelining_ops.pipeline``
with the Grouped schedule, 16 micro-batches per weight update and 4 passes per run.

``check_pipelined_model`` compiles what they wrote with an infeed of the MNIST sample and an
outfeed, runs it three times on a device of two IPUs and reads the record: whether a pipeline
ran at all, its stages, the IPU each stage and each layer ran on, its schedule, gradient
accumulation count and repeat count, and the losses the outfeed returned.
"""
from __future__ import annotations

from collections import defaultdict
from functools import cached_property
from typing import Dict, FrozenSet, Optional, Set

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.code_exercises import (as_a_fresh_script, compiled_program,
                                         fed_digits_dataset, forward_ops_by_stage)
from ipu_emulator.code_exercises.harness import Exercise, Probe, Rule, changed, check_of
from ipu_emulator.code_exercises.reference import (NEVER_RUN_UPDATE, TOLERANCE, Facts,
                                                   matched_variant, optimizer_kinds, same_values,
                                                   scaled_update, weights_problem)
from ipu_emulator.code_exercises.nb07_sharding import last_layers
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.exercises import not_yet
from ipu_emulator.ipu import (config, ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue,
                              pipelining_ops, scopes)
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_emulator.lessons.placement import layer_of

BATCH_SIZE = 32
GRADIENT_ACCUMULATION_COUNT = 16  # micro-batches per weight update (step 2's num_mini_batches)
REPEAT_COUNT = 4                  # passes per sess.run: 4 x 16 = step 2's loop of 64
RUNS = 3                          # sess.run calls the check makes, to see the loss fall
SCHEDULE = "grouped"
# The stage (and IPU) the tutorial's step 3 gives each layer: the cut of step 2.
TUTORIAL_STAGES = {"flatten": 0, "dense256": 0, "dense128": 0, "dense64": 0, "dense32": 1,
                   "logits": 1, "softmax_ce": 1}
LAYERS = list(TUTORIAL_STAGES)
# Hints for the SDK's errors a pipelining attempt can meet, by words of their messages.
SDK_HINTS = {
    "required positional argument": "the pipeline calls the first stage with its `inputs` "
                                    "first, then the infeed's images and labels, and each "
                                    "later stage with the previous stage's outputs: give the "
                                    "pipeline inputs=[learning_rate], and return from each "
                                    "stage what the next one takes (task a).",
    "must be a multiple of": "with two stages the Grouped schedule needs a gradient "
                             "accumulation count that is a multiple of 2 x 2 = 4; step 2 "
                             "accumulated 16 mini-batches, so gradient_accumulation_count=16.",
    "must return an OptimizerFunctionOutput": "return the optimizer and the loss together: "
                                              "`return ipu.pipelining_ops.OptimizerFunctionOutput"
                                              "(optimizer, loss)`.",
    "shards needs to divide": "the device has two IPUs, so the pipeline has two stages, one "
                              "per IPU: [stage1, stage2].",
    "no outfeed_queue": "the last stage returns the loss, so the pipeline needs somewhere to "
                        "send it: outfeed_queue=outfeed (and outfeed_loss=True).",
    "has no attribute": "the pipeline is ipu.pipelining_ops.pipeline(...), and the schedules "
                        "are ipu.pipelining_ops.PipelineSchedule.Grouped, .Interleaved and "
                        ".Sequential.",
    # A count given third by position: the pipeline reads it as the accumulators' type (4 is
    # uint8), which the gradients' accumulation then cannot hold.
    "/gradients_accumulation/": "the pipeline's gradient accumulators got a type the IPU "
                                "cannot add up: gradient_accumulation_dtype is the pipeline's "
                                "THIRD positional parameter, so a count given there, as in "
                                "pipeline([stage1, stage2], 16, 4, ...), is read as a type. "
                                "Name it: repeat_count=4.",
}
_SCHEDULE_NAMES = {"grouped": "Grouped", "interleaved": "Interleaved",
                   "sequential": "Sequential"}


# The cell the learner edits (tagged ``code-exercise`` in notebook 09): step 2's sharded
# program, with the tutorial's tasks.  ``print(code_exercises.STARTING_CODE)`` gives it back,
# to start again.
STARTING_CODE = '''\
# Your turn: turn step 2's sharded loop into step 3's pipeline
#  [ ] a) two stage functions: stage1(learning_rate, images, labels) builds flatten to
#         dense64 and returns (learning_rate, activations, labels); stage2 takes those and
#         builds dense32, the logits and the loss, returning (learning_rate, loss)
#  [ ] b) optimizer_function(learning_rate, loss): a plain GradientDescentOptimizer and the
#         loss in ipu.pipelining_ops.OptimizerFunctionOutput (the pipeline accumulates the
#         gradients itself: no GradientAccumulationOptimizerV2)
#  [ ] c) return ipu.pipelining_ops.pipeline(...) instead of ipu.loops.repeat(...): the two
#         stages, 16 micro-batches per weight update, 4 passes per run (the loop's 64),
#         inputs=[learning_rate], the infeed and the outfeed, your optimizer function, the
#         Grouped schedule and outfeed_loss=True
#  [ ] d) no ipu_shard scopes: the pipeline puts stage k on IPU k
def pipelined_model(learning_rate, infeed, outfeed):
    def training_step(learning_rate, images, labels):
        with ipu.scopes.ipu_shard(0):
            with tf.variable_scope("flatten"):
                activations = tf.keras.layers.Flatten()(images)
            for name, width in [("dense256", 256), ("dense128", 128), ("dense64", 64)]:
                with tf.variable_scope(name):
                    activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(
                        activations)
        with ipu.scopes.ipu_shard(1):
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
            with tf.control_dependencies([train_op]):
                return learning_rate, outfeed.enqueue(loss)

    return ipu.loops.repeat(64, training_step, [learning_rate], infeed_queue=infeed)'''


def tutorial_stage1(learning_rate, images, labels):
    """Step 3's first stage: flatten to dense64, in the layers' scopes."""
    with tf.compat.v1.variable_scope("flatten"):
        activations = tf.keras.layers.Flatten()(images)
    for name, width in (("dense256", 256), ("dense128", 128), ("dense64", 64)):
        with tf.compat.v1.variable_scope(name):
            activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(activations)
    return learning_rate, activations, labels


def tutorial_stage2(learning_rate, activations, labels):
    """Step 3's second stage: dense32, the logits and the loss (step 2's second shard)."""
    return learning_rate, last_layers(activations, labels)


def solution(learning_rate, infeed, outfeed,
             reduction_method=GradientAccumulationReductionMethod.SUM):
    """The tutorial's step 3: the same layers as two pipeline stages."""
    def optimizer_function(learning_rate, loss):
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
        return pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    return pipelining_ops.pipeline(
        computational_stages=[tutorial_stage1, tutorial_stage2],
        gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT,
        repeat_count=REPEAT_COUNT,
        inputs=[learning_rate],
        infeed_queue=infeed,
        outfeed_queue=outfeed,
        optimizer_function=optimizer_function,
        pipeline_schedule=pipelining_ops.PipelineSchedule.Grouped,
        outfeed_loss=True, reduction_method=reduction_method,
        name="Pipeline")


class _Ran(Facts):
    """What the learner's program did: the last engine run's record, the pipeline stages
    each layer's forward ops were built in (empty without a pipeline), and
    the mean loss the outfeed returned for each run (None when it returned no loss)."""

    def __init__(self, program, run, losses, outfed, weights: WeightWatch):
        self.run = run
        self.losses = losses
        self.outfed = outfed          # what the last dequeue gave the host
        self.weights = weights
        # Step 2's accumulating wrapper left in optimizer_function (its ops carry its name).
        self.accumulating_optimizer = any("GradientAccumulationOptimizer" in op.name
                                          for op in program.new_ops)
        self.forward: Dict[str, Set[int]] = defaultdict(set)
        for name, stage in forward_ops_by_stage(program):
            layer = layer_of(name, LAYERS)
            if layer is not None:
                self.forward[layer].add(stage)

    @property
    def chosen_optimizers(self) -> FrozenSet[str]:
        """The optimizers the learner's run updated its weights with that the reference's
        did not ("Adam"...): the task leaves the optimizer free."""
        return optimizer_kinds(self.weights) - optimizer_kinds(self.reference.weights)

    @cached_property
    def variant(self) -> Optional[str]:
        """The form of the reference the SDK offers too (the gradients averaged) whose
        weights the learner's match, or None (always None with another optimizer: its weights
        are not compared).  Worked out once: the weights rule, the losses rule and the
        "Right" text all read it."""
        if self.chosen_optimizers:
            return None
        return matched_variant(self.weights, self._variants())

    def _variants(self):
        return self.mean_variants(self.run.pipeline.reduction_method)

    @property
    def expected_weights(self) -> WeightWatch:
        """The weights the learner's are held to: the matched variant's, else the
        reference's."""
        if self.variant is None:
            return self.reference.weights
        return self._variants()[self.variant]()


def _mean_loss(outfed):
    """The mean loss of one run's outfeed: the loss alone (``outfeed_loss=True``, or a loop
    enqueuing it), or the last of the last stage's outputs; None when it brought back none,
    NaN when its losses were no numbers (the training diverged)."""
    if isinstance(outfed, dict):
        outfed = list(outfed.values())
    if isinstance(outfed, (list, tuple)):
        outfed = outfed[-1] if outfed else None
    values = np.asarray(outfed, dtype=np.float64) if outfed is not None else None
    if values is None or values.size == 0:
        return None
    if not np.isfinite(values).all():
        return float("nan")
    return float(values.mean())


def run_model(model) -> _Ran:
    """Compile ``model(learning_rate, infeed, outfeed)`` for a device of two IPUs, run it
    ``RUNS`` times with the outfeed dequeued after each, and say what ran.  An error in the
    learner's code raises ``LearnerCodeFailed``.  The IPU system the learner configured, if
    any, is configured again afterwards."""
    weights = WeightWatch()
    with as_a_fresh_script(SDK_HINTS, watch=weights) as graph:
        dataset, digits = fed_digits_dataset(
            BATCH_SIZE * GRADIENT_ACCUMULATION_COUNT * REPEAT_COUNT)
        infeed = ipu_infeed_queue.IPUInfeedQueue(
            dataset.repeat().batch(BATCH_SIZE, drop_remainder=True))
        outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
        learning_rate = tf.compat.v1.placeholder(np.float32, [])
        with scopes.ipu_scope("/device:IPU:0"):
            with tf.compat.v1.variable_scope("FCModel", use_resource=True):
                train = ipu_compiler.compile(lambda lr: model(lr, infeed, outfeed),
                                             [learning_rate])
        dequeue = outfeed.dequeue()
        program = compiled_program(graph)
        devices = config.IPUConfig()
        devices.auto_select_ipus = 2
        devices.selection_order = config.SelectionOrder.SNAKE
        devices.configure_ipu_system()
        losses = []
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(infeed.initializer, digits)
            with record.capture() as runs:
                for _ in range(RUNS):
                    session.run(train, {learning_rate: 0.01})
                    outfed = session.run(dequeue)
                    losses.append(_mean_loss(outfed))
            weights.read(session)
    return _Ran(program, runs.runs[-1], None if None in losses else losses, outfed, weights)


def _ipus(found):
    return " and ".join(f"IPU{k}" for k in sorted(found))


def _stage_words(index):
    return ("first", "second", "third", "fourth")[index] if index < 4 else f"{index + 1}th"


def _pipeline_ran(ran: _Ran):
    run = ran.run
    if run.pipeline is not None:
        return None
    if len(run.stages) > 1:
        return not_yet(f"your program is still a repeat loop over ipu_shard scopes: it ran "
                       f"{run.iterations} mini-batches one at a time, each through IPU0 "
                       f"and then IPU1, so one IPU always waited for the other. Task c: "
                       f"return ipu.pipelining_ops.pipeline(...) instead of "
                       f"ipu.loops.repeat(...), with the stage functions of task a.")
    return not_yet("your program ran no pipeline, on one IPU. Task c: return what "
                   "ipu.pipelining_ops.pipeline(computational_stages=[stage1, stage2], "
                   "...) returns.")


def _mapping(ran: _Ran):
    return tuple(ran.run.pipeline.device_mapping)


def _two_stages(ran: _Ran):
    mapping = _mapping(ran)
    if len(mapping) != 2:
        where = ", ".join(f"{_stage_words(k)} on IPU{ipu}" for k, ipu in enumerate(mapping))
        return not_yet(f"your pipeline ran {len(mapping)} stages ({where}). The tutorial's "
                       f"has two, one per IPU: stage1 with flatten to dense64, stage2 with "
                       f"dense32, the logits and the loss.")
    return None


def _stage_k_on_ipu_k(ran: _Ran):
    mapping = _mapping(ran)
    if mapping != (0, 1):
        return not_yet(f"your first stage ran on IPU{mapping[0]} and the second on "
                       f"IPU{mapping[1]} (device_mapping={list(mapping)}). Leave "
                       f"device_mapping out: the pipeline then runs stage k on IPU k, "
                       f"stage1 on IPU0 as in step 2.")
    return None


def _layers_in_their_stages(ran: _Ran):
    # Layer by layer, in the model's order: the first layer out of place is the one named,
    # whether it ran in another stage or in no scope of its own.
    mapping = _mapping(ran)
    for layer, wanted in TUTORIAL_STAGES.items():
        found = ran.forward.get(layer, set())
        if found and found != {wanted}:
            return not_yet(f"{layer} ran in your {_stage_words(min(found))} stage, on "
                           f"{_ipus({mapping[k] for k in found})}. The tutorial keeps step 2's "
                           f"cut, just before dense32: stage1 builds flatten to dense64, stage2 "
                           f"dense32, the logits and the loss.")
        if not found:
            return not_yet(f"no op of your pipeline's stages was built in "
                           f"tf.variable_scope(\"{layer}\"). Keep each layer in its scope, as "
                           f"in step 2: the record finds the layers by these names.")
    return None


def _schedule(ran: _Ran):
    schedule = ran.run.pipeline.schedule
    if schedule != SCHEDULE:
        return not_yet(f"the schedule was {_SCHEDULE_NAMES.get(schedule, schedule)}; "
                       f"the tutorial asks for Grouped: "
                       f"pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped.")
    return None


def _accumulation_count(ran: _Ran):
    count = ran.run.pipeline.gradient_accumulation_count
    if count != GRADIENT_ACCUMULATION_COUNT:
        return not_yet(f"your pipeline updated the weights every {count} micro-batches; step 2 "
                       f"accumulated {GRADIENT_ACCUMULATION_COUNT} (num_mini_batches=16): "
                       f"gradient_accumulation_count={GRADIENT_ACCUMULATION_COUNT}.")
    return None


def _repeat_count(ran: _Ran):
    pipeline = ran.run.pipeline
    if pipeline.repeat_count != REPEAT_COUNT:
        per_run = pipeline.gradient_accumulation_count * pipeline.repeat_count
        return not_yet(f"each sess.run made {pipeline.repeat_count} pass"
                       f"{'es' if pipeline.repeat_count != 1 else ''} of "
                       f"{pipeline.gradient_accumulation_count} micro-batches ({per_run}); step "
                       f"2's loop ran 64 per run. The pipeline is its own loop: "
                       f"repeat_count={REPEAT_COUNT} makes 4 x 16 = 64.")
    return None


def _outfed_losses(ran: _Ran):
    if ran.losses is None:
        return not_yet("the outfeed returned no loss. Pass outfeed_queue=outfeed and "
                       "outfeed_loss=True, and return (learning_rate, loss) from stage2.")
    if not np.isfinite(ran.losses).all():
        shown = ", ".join(f"{loss:.3f}" for loss in ran.losses)
        return not_yet(f"the mean losses the outfeed brought back were {shown} over "
                       f"{len(ran.losses)} runs: the training diverged, its updates too "
                       f"large for the losses to stay numbers. The pipeline adds up the "
                       f"{GRADIENT_ACCUMULATION_COUNT} micro-batches' gradients itself and "
                       f"applies them with GradientDescentOptimizer(learning_rate): stage2's "
                       f"loss is the batch's mean, tf.reduce_mean(...), not its sum, and "
                       f"optimizer_function keeps the learning rate it is given.")
    return None


def _loss_alone(ran: _Ran):
    if isinstance(ran.outfed, (list, tuple, dict)):
        return not_yet(f"the outfeed brought back {len(ran.outfed)} values per micro-batch, "
                       f"all of the last stage's outputs (the learning rate with the loss): "
                       f"task c asks for outfeed_loss=True, so that the pipeline sends the "
                       f"loss alone, one value per micro-batch.")
    return None


def _no_accumulating_optimizer(ran: _Ran):
    if ran.accumulating_optimizer:
        return not_yet("your optimizer_function wraps its optimizer in "
                       "GradientAccumulationOptimizerV2, as step 2 did: the pipeline already "
                       "adds up the gradients of its 16 micro-batches and hands "
                       "optimizer_function one update per pass. Task b: a plain "
                       "GradientDescentOptimizer(learning_rate) in OptimizerFunctionOutput.")
    return None


# What a run that reaches the weights did right, in the tutorial's numbers (the rules before
# held it to them).
_WHAT_RAN = (f"your Grouped pipeline ran {REPEAT_COUNT} passes of "
             f"{GRADIENT_ACCUMULATION_COUNT} micro-batches per run, as the tutorial's")


def _weights(ran: _Ran):
    # Held to the matched variant's weights when the gradients were averaged (``variant``,
    # worked out once), so weights_problem is given no variants to match again.
    return weights_problem(
        ran.weights, ran.expected_weights, _WHAT_RAN,
        f"optimizer_function returns OptimizerFunctionOutput(optimizer, loss) with the loss "
        f"it was given: {NEVER_RUN_UPDATE}.",
        "The pipeline adds up the 16 micro-batches' gradients itself and applies them with "
        "optimizer_function's optimizer, GradientDescentOptimizer(learning_rate): keep the "
        "learning rate it is given and the loss as stage2 computes it.",
        optimizer_free=True)   # the task leaves the optimizer to the learner


def _losses(ran: _Ran):
    # Another optimizer or the averaged gradients train otherwise: their losses are their own.
    if (ran.chosen_optimizers or ran.variant is not None
            or same_values(ran.losses, ran.reference.losses)):
        return None
    return not_yet(f"{_WHAT_RAN}, but the losses the outfeed brought back "
                   f"({', '.join(f'{loss:.3f}' for loss in ran.losses)} per run) are not "
                   f"the ones its stages computed: stage2 returns (learning_rate, loss), "
                   f"and outfeed_loss=True sends that loss.")


def _right(ran: _Ran) -> str:
    run, pipeline, chosen = ran.run, ran.run.pipeline, ran.chosen_optimizers
    optimizer = ("" if not chosen else
                 f" (with {' and '.join(sorted(chosen))} as your optimizer: the task leaves "
                 f"its choice to you, so the check saw it train and compared no weights)")
    if ran.variant is not None:
        optimizer = f" (with {ran.variant}, which the SDK offers too)"
    return (f"your program ran as the tutorial's step 3: a Grouped pipeline of two "
            f"stages, flatten to dense64 on IPU0 and dense32, the logits and the loss on "
            f"IPU1. Each sess.run made {pipeline.repeat_count} passes of "
            f"{pipeline.gradient_accumulation_count} micro-batches, the "
            f"{pipeline.repeat_count * pipeline.gradient_accumulation_count} of step 2's "
            f"loop, with {run.weight_updates // max(1, pipeline.repeat_count)} weight update "
            f"per pass; the mean loss went "
            f"{' -> '.join(f'{loss:.3f}' for loss in ran.losses)} over {len(ran.losses)} "
            f"runs. "
            f"Unlike step 2's shards, each stage's backward pass ran on its own IPU, and "
            f"both IPUs worked at once on different micro-batches{optimizer}.")


def _pipeline(ran: _Ran, **values) -> _Ran:
    """``ran`` with its pipeline's settings changed: for the probes."""
    pipeline = changed(ran.run.pipeline, **values)
    return changed(ran, run=changed(ran.run, pipeline=pipeline))


def _forward(ran: _Ran, layer: str, stages) -> _Ran:
    """``ran`` with ``layer``'s forward ops in ``stages`` (none: built in no scope of its
    own): for the probes."""
    forward = {name: set(found) for name, found in ran.forward.items() if name != layer}
    if stages:
        forward[layer] = set(stages)
    return changed(ran, forward=forward)


EXERCISE = Exercise(
    name="09.pipeline-the-model", starting_code=STARTING_CODE, solution=solution, run=run_model,
    call="check_pipelined_model(pipelined_model)",
    free=("the optimizer optimizer_function returns: another one than GradientDescentOptimizer "
          "is seen to train, and its weights are not compared",
          "the reduction of the accumulated gradients: added up (SUM, the SDK's default) or "
          "averaged (MEAN, RUNNING_MEAN)"),
    rules=(Rule("a pipeline ran", _pipeline_ran),
           Rule("two stages", _two_stages),
           Rule("stage k on IPU k", _stage_k_on_ipu_k),
           Rule("each layer in its stage of step 3", _layers_in_their_stages),
           Rule("the Grouped schedule", _schedule),
           Rule("16 micro-batches per update", _accumulation_count),
           Rule("4 passes per run", _repeat_count),
           Rule("the outfeed returned losses", _outfed_losses),
           Rule("the outfeed sends the loss alone", _loss_alone),
           Rule("no accumulating optimizer in optimizer_function", _no_accumulating_optimizer),
           Rule("the reference's weights", _weights),
           Rule("the losses the stages computed", _losses)),
    right=_right,
    probes=(Probe("a pipeline ran", lambda ran: changed(ran, run=changed(ran.run, pipeline=None)),
                  "no pipeline"),
            Probe("two stages", lambda ran: _pipeline(ran, device_mapping=(0, 1, 0)),
                  "a third stage"),
            Probe("two stages", lambda ran: _pipeline(ran, device_mapping=(0,)),
                  "one stage"),
            Probe("stage k on IPU k", lambda ran: _pipeline(ran, device_mapping=(1, 0)),
                  "the stages swapped between the IPUs"),
            Probe("stage k on IPU k", lambda ran: _pipeline(ran, device_mapping=(0, 0)),
                  "both stages on IPU0"),
            Probe("each layer in its stage of step 3",
                  lambda ran: _forward(ran, "dense64", (0, 1)), "dense64 in both stages"),
            Probe("each layer in its stage of step 3",
                  lambda ran: _forward(ran, "dense32", (0,)), "the cut one layer late"),
            Probe("each layer in its stage of step 3",
                  lambda ran: _forward(ran, "dense64", (1,)), "the cut one layer early"),
            Probe("each layer in its stage of step 3",
                  lambda ran: _forward(ran, "logits", ()), "the logits in no scope of theirs"),
            Probe("the Grouped schedule", lambda ran: _pipeline(ran, schedule="interleaved"),
                  "the Interleaved schedule"),
            Probe("the Grouped schedule", lambda ran: _pipeline(ran, schedule="sequential"),
                  "the Sequential schedule"),
            Probe("16 micro-batches per update", lambda ran: _pipeline(
                ran, gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT + 1),
                "one micro-batch more per update"),
            Probe("16 micro-batches per update", lambda ran: _pipeline(
                ran, gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT - 1),
                "one micro-batch fewer per update"),
            Probe("4 passes per run", lambda ran: _pipeline(ran, repeat_count=REPEAT_COUNT + 1),
                  "one pass more per run"),
            Probe("4 passes per run", lambda ran: _pipeline(ran, repeat_count=REPEAT_COUNT - 1),
                  "one pass fewer per run"),
            Probe("the outfeed returned losses", lambda ran: changed(ran, losses=None),
                  "no loss outfed"),
            Probe("the outfeed returned losses",
                  lambda ran: changed(ran, losses=ran.losses[:-1] + [float("nan")]),
                  "the last run's losses NaN"),
            Probe("the outfeed sends the loss alone",
                  lambda ran: changed(ran, outfed=(np.full_like(ran.outfed, 0.01), ran.outfed)),
                  "the learning rate outfed with the loss"),
            Probe("no accumulating optimizer in optimizer_function",
                  lambda ran: changed(ran, accumulating_optimizer=True),
                  "step 2's accumulating optimizer left in"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger"),
            Probe("the losses the stages computed",
                  lambda ran: changed(ran, losses=[loss * 1.01 for loss in ran.losses]),
                  "the losses 1 % larger")))

check_pipelined_model = check_of(
    EXERCISE, "check_pipelined_model",
    """``pipelined_model(learning_rate, infeed, outfeed)``, pipelined as the tutorial's
    step 3.""")


__all__ = ["EXERCISE", "check_pipelined_model", "solution", "tutorial_stage1", "tutorial_stage2",
           "run_model", "STARTING_CODE"]
