"""Notebook 12's code exercise: fit IPU 0 in a memory budget with the SDK's own options
(the pipelining tutorial's further considerations: recomputation, offloading, the gradient
accumulation buffers' type).

The learner starts from notebook 12's reference pipeline, written as two functions:
``configure_ipus()`` configures a device of two IPUs, and ``pipelined_model(infeed, outfeed)``
returns the pipeline (the notebook's ``stage1``, ``stage2`` and momentum optimizer, 16
micro-batches per weight update, 2 passes per run).  They switch on, in code, the options
that bring IPU 0's peak memory to ``BUDGET_MB`` or less with the shortest pass:
``IPUConfig.allow_recompute`` with ``recomputation_mode``, ``offload_weight_update_variables``,
``offload_activations``, ``gradient_accumulation_dtype``.

``check_fits_in_memory`` configures the system with the learner's ``configure_ipus``, builds
and runs their pipeline on the MNIST sample, and reads the record of what ran: which memory
options the pipeline really used (recomputation only when the system allowed it), and the
stages' measured costs.  The simulator prices that run: IPU 0's peak memory and one pass's
time, against every other choice of options on the same stages.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.code_exercises import as_a_fresh_script, fed_digits_dataset
from ipu_emulator.code_exercises.harness import Exercise, Probe, Rule, changed, check_of
from ipu_emulator.code_exercises.reference import (TOLERANCE, Facts, optimizer_kinds,
                                                   same_values, scaled_update, weights_problem)
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.exercises import Feedback, not_yet
from ipu_emulator.ipu import (config, ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue,
                              pipelining_ops, scopes)
from ipu_emulator.sim.passes import one_pass
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline

BATCH_SIZE = 32
GRADIENT_ACCUMULATION_COUNT = 16
REPEAT_COUNT = 2
RUNS = 2
LEARNING_RATE = 0.005
MOMENTUM = 0.9
TARGET = "ipu2"
DEVICE_MAPPING = (0, 1)   # the notebook's: stage1 (the wide layers) on IPU 0, stage2 on IPU 1
BUDGET_MB = 2.5
# The memory options as the run record names them, each with its default first, and the
# SDK's words for them (what the learner writes).
MEMORY_OPTIONS = {"recompute": (False, True), "offload_weights": (False, True),
                  "offload_activations": (False, True), "accumulation_dtype_bytes": (4, 2)}
SDK_WORDS = {"recompute": "recomputation",
             "offload_weights": "offload_weight_update_variables=True",
             "offload_activations": "offload_activations=True",
             "accumulation_dtype_bytes": "gradient_accumulation_dtype=tf.float16"}
SDK_HINTS = {
    "is not a valid attribute of this config": "IPUConfig holds the system's options, such "
                                               "as allow_recompute; the offloading options "
                                               "and the accumulators' type are arguments of "
                                               "ipu.pipelining_ops.pipeline(...).",
    "not a member of the RecomputationMode": "recomputation_mode takes a member of the enum, "
                                             "not a string: recomputation_mode=ipu."
                                             "pipelining_ops.RecomputationMode."
                                             "RecomputeThenBackpropagate.",
}


def _dense(x, units, name, activation=tf.nn.relu):
    with tf.compat.v1.variable_scope(name):
        w = tf.compat.v1.get_variable("w", [x.shape[-1], units],
                                      initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
        b = tf.compat.v1.get_variable("b", [units], initializer=tf.compat.v1.zeros_initializer())
        z = tf.matmul(x, w) + b
        return activation(z) if activation else z


def stage1(images, labels):
    """Notebook 12's first stage (IPU 0): the wide layers."""
    return _dense(_dense(_dense(images, 256, "dense256"), 128, "dense128"), 64, "dense64"), labels


def stage2(hidden, labels):
    """Notebook 12's second stage (IPU 1): the narrow layers and the loss."""
    logits = _dense(_dense(hidden, 32, "dense32"), 10, "logits", activation=None)
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def optimizer_function(loss):
    """Notebook 12's optimizer: momentum, whose state is as big as the weights."""
    optimizer = tf.compat.v1.train.MomentumOptimizer(LEARNING_RATE, MOMENTUM)
    return pipelining_ops.OptimizerFunctionOutput(optimizer, loss)


# The cell the learner edits (tagged ``code-exercise`` in notebook 12): the reference
# pipeline.  ``print(code_exercises.STARTING_CODE)`` gives it back, to start again.
STARTING_CODE = '''\
# Your turn: fit IPU 0 in 2.5 MB, in code. The options, in Graphcore's SDK:
#   recomputation: config.allow_recompute = True (before configure_ipu_system), and in the
#       pipeline recomputation_mode=ipu.pipelining_ops.RecomputationMode.RecomputeThenBackpropagate
#   the optimizer's state in streaming memory: offload_weight_update_variables=True
#   the kept activations in streaming memory: offload_activations=True
#   float16 gradient accumulators: gradient_accumulation_dtype=tf.float16
#  [ ] choose the options that bring IPU 0's peak memory to 2.5 MB or less
#  [ ] ... with the shortest pass: no option that only costs time
def configure_ipus():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()


def pipelined_model(infeed, outfeed):
    return ipu.pipelining_ops.pipeline(
        [stage1, stage2], gradient_accumulation_count=16, repeat_count=2,
        infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer_function, outfeed_loss=True)'''


def solution_configure_ipus():
    """The reference configuration, unchanged."""
    devices = config.IPUConfig()
    devices.auto_select_ipus = 2
    devices.configure_ipu_system()


def solution_pipelined_model(infeed, outfeed):
    """The reference pipeline with the optimizer's state offloaded and float16 accumulators:
    the two options that shrink the biggest terms and cost (almost) no time."""
    return pipelining_ops.pipeline(
        [stage1, stage2], gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT,
        repeat_count=REPEAT_COUNT, infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer_function, outfeed_loss=True,
        offload_weight_update_variables=True, gradient_accumulation_dtype=tf.float16)


SOLUTION = (solution_configure_ipus, solution_pipelined_model)


@dataclass
class MemoryRun(Facts):
    """What one run of the learner's two functions did: the last engine run's record (its
    pipeline settings and measured stages), the losses the outfeed brought back, the weights
    (start and end) and the kinds of weight update the graph built (``optimizer_kinds``)."""

    run: record.EngineRun
    losses: np.ndarray
    weights: WeightWatch
    optimizers: FrozenSet[str] = frozenset()


def run_program(configure_ipus, pipelined_model) -> MemoryRun:
    """Configure with ``configure_ipus()``, build ``pipelined_model(infeed, outfeed)`` on the
    MNIST sample, run it ``RUNS`` times; what it did (the last engine run's record, the
    losses, the weights).  An error in the learner's code raises ``LearnerCodeFailed``; the
    IPU system the learner configured before is configured again afterwards."""
    weights = WeightWatch()
    with as_a_fresh_script(SDK_HINTS, seed=1, watch=weights) as graph:
        configure_ipus()
        dataset, digits = fed_digits_dataset(
            BATCH_SIZE * GRADIENT_ACCUMULATION_COUNT * REPEAT_COUNT, flatten=True)
        infeed = ipu_infeed_queue.IPUInfeedQueue(
            dataset.repeat().batch(BATCH_SIZE, drop_remainder=True))
        outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
        with scopes.ipu_scope("/device:IPU:0"):
            train = ipu_compiler.compile(lambda: pipelined_model(infeed, outfeed))
        dequeue = outfeed.dequeue()
        losses = []
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(infeed.initializer, digits)
            with record.capture() as runs:
                for _ in range(RUNS):
                    session.run(train)
                    losses.append(np.asarray(session.run(dequeue), dtype=np.float64))
            weights.read(session)
    return MemoryRun(runs.runs[-1], np.concatenate([np.ravel(loss) for loss in losses]),
                     weights, optimizer_kinds(weights))


def options_of(run: record.EngineRun) -> Dict:
    """The memory options the run really used, as the record names them."""
    settings = run.pipeline
    return {name: getattr(settings, name) for name in MEMORY_OPTIONS}


def priced(stages, options: Dict) -> Tuple[float, float]:
    """IPU 0's peak memory (MB) and one pass's simulated time (s), ``options`` on ``stages``."""
    timeline = simulate_pipeline(stages, "grouped", GRADIENT_ACCUMULATION_COUNT,
                                 repeat_count=REPEAT_COUNT, target=TARGET,
                                 batch_size=BATCH_SIZE, synthetic_data=True, **options)
    return timeline.metrics.peak_memory_bytes[0] / 1e6, one_pass(timeline).metrics.makespan


def fastest_fitting(stages) -> Dict:
    """The options that fit IPU 0 in the budget with the shortest pass (the fewest options
    on a tie)."""
    fitting = []
    for values in itertools.product(*MEMORY_OPTIONS.values()):
        choice = dict(zip(MEMORY_OPTIONS, values))
        peak, seconds = priced(stages, choice)
        if peak <= BUDGET_MB:
            fitting.append((seconds, sum(v != MEMORY_OPTIONS[k][0] for k, v in choice.items()),
                            choice))
    return min(fitting, key=lambda f: f[:2])[2]


def _kinds(kinds) -> str:
    return " and ".join(sorted(kinds)) if kinds else "no optimizer"


def _switched_on(options: Dict):
    return [name for name, value in options.items() if value != MEMORY_OPTIONS[name][0]]


def _described(options: Dict) -> str:
    names = [SDK_WORDS[name] for name in _switched_on(options)]
    return ", ".join(names) if names else "no memory option"


def _peak_and_seconds(ran: MemoryRun) -> Tuple[float, float]:
    """IPU 0's peak memory and one pass's time with the options the run used."""
    return priced(ran.run.stages, options_of(ran.run))


def _measured(ran: MemoryRun) -> str:
    """What the learner's options cost, beside the same stages with none of them."""
    peak, seconds = _peak_and_seconds(ran)
    reference_peak, reference_seconds = priced(ran.run.stages, {})
    return (f"your pipeline ran with {_described(options_of(ran.run))}: IPU 0 peaks at "
            f"{peak:.2f} MB (reference {reference_peak:.2f} MB), one pass takes "
            f"{seconds * 1e6:.0f} µs (reference {reference_seconds * 1e6:.0f} µs)")


def _a_pipeline(ran: MemoryRun) -> Optional[Feedback]:
    if ran.run.pipeline is None:
        return not_yet("your program ran no pipeline: pipelined_model must return what "
                       "ipu.pipelining_ops.pipeline(...) returns.")
    return None


def _counts(ran: MemoryRun) -> Optional[Feedback]:
    settings = ran.run.pipeline
    if (settings.gradient_accumulation_count, settings.repeat_count) != (
            GRADIENT_ACCUMULATION_COUNT, REPEAT_COUNT):
        return not_yet(f"your pipeline ran {settings.repeat_count} passes of "
                       f"{settings.gradient_accumulation_count} micro-batches; the notebook's "
                       f"runs {REPEAT_COUNT} of {GRADIENT_ACCUMULATION_COUNT}. The exercise "
                       f"fits the same training in memory: keep "
                       f"gradient_accumulation_count={GRADIENT_ACCUMULATION_COUNT} and "
                       f"repeat_count={REPEAT_COUNT}, and change only the memory options.")
    return None


def _placement(ran: MemoryRun) -> Optional[Feedback]:
    mapping, replicas = tuple(ran.run.pipeline.device_mapping), ran.run.replicas
    if mapping != DEVICE_MAPPING:
        return not_yet(f"your pipeline put its stages on IPUs {list(mapping)}; the notebook's "
                       f"puts them on {list(DEVICE_MAPPING)}: stage1, the wide layers, on IPU 0 "
                       f"and stage2 on IPU 1. The exercise fits that IPU 0 in memory: leave "
                       f"device_mapping out (or give {list(DEVICE_MAPPING)}), and change only "
                       f"the memory options.")
    if replicas != 1:
        return not_yet(f"your program ran {replicas} replicas of the pipeline, on "
                       f"{ran.run.num_ipus} IPUs: each replica trained on batches of its own. "
                       f"The notebook's pipeline is one replica on {len(DEVICE_MAPPING)} IPUs: "
                       f"configure config.auto_select_ipus = {len(DEVICE_MAPPING)}, and change "
                       f"only the memory options.")
    return None


def _optimizer(ran: MemoryRun) -> Optional[Feedback]:
    if ran.optimizers != ran.reference.optimizers:
        return not_yet(f"your pipeline updated the weights with {_kinds(ran.optimizers)}, not "
                       f"the notebook's momentum optimizer: its state, as big as the weights, "
                       f"is one of the terms to fit. Keep optimizer_function as the notebook "
                       f"gives it, and change only the memory options.")
    return None


def _offload_weights(ran: MemoryRun) -> Optional[Feedback]:
    if "offload_weights" in ran.run.pipeline.unmodelled_options:
        return not_yet(f"{_measured(ran)}. You passed offload_weights=True: in Graphcore's SDK "
                       f"it offloads the weights that replicated_weight_sharding partitions "
                       f"across replicas, and does nothing on this unreplicated pipeline. The "
                       f"optimizer's state goes to streaming memory with "
                       f"offload_weight_update_variables=True.")
    return None


def _finite_losses(ran: MemoryRun) -> Optional[Feedback]:
    if not np.isfinite(ran.losses).all() or not ran.losses.size:
        return not_yet(f"{_measured(ran)}, but the outfeed returned no finite loss: keep "
                       f"outfeed_loss=True and the notebook's optimizer_function.")
    return None


def _budget(ran: MemoryRun) -> Optional[Feedback]:
    peak, _ = _peak_and_seconds(ran)
    if peak <= BUDGET_MB:
        return None
    measured, settings, options = _measured(ran), ran.run.pipeline, options_of(ran.run)
    if not options["recompute"] and settings.recomputation_mode != "Auto":
        return not_yet(f"{measured}: over the {BUDGET_MB} MB budget. Your pipeline asks "
                       f"for recomputation_mode={settings.recomputation_mode}, but "
                       f"nothing was recomputed: the pipeline recomputes only when the "
                       f"system was configured with config.allow_recompute = True, set "
                       f"before config.configure_ipu_system().")
    if not _switched_on(options):
        return not_yet(f"{measured}: over the {BUDGET_MB} MB budget. Which terms make up "
                       f"IPU 0's memory (the sum printed under the reference run's "
                       f"trace), and which option shrinks each?")
    if len(_switched_on(options)) == 1:
        return not_yet(f"{measured}: over the {BUDGET_MB} MB budget. No single option "
                       f"saves enough: their savings add up when they shrink different "
                       f"terms (the accumulators, the optimizer's state, the kept "
                       f"activations).")
    return not_yet(f"{measured}: over the {BUDGET_MB} MB budget. Which term of IPU 0's "
                   f"memory do your options not touch yet? The activations are the "
                   f"smallest.")


def _shortest_pass(ran: MemoryRun) -> Optional[Feedback]:
    _, seconds = _peak_and_seconds(ran)
    _, best_seconds = priced(ran.run.stages, fastest_fitting(ran.run.stages))
    if seconds > best_seconds * 1.005:
        return not_yet(f"{_measured(ran)}: it fits, but an option you chose costs time without "
                       f"being needed for the budget. Which can you drop and still fit?")
    return None


def _weights(ran: MemoryRun) -> Optional[Feedback]:
    return weights_problem(
        ran.weights, ran.reference.weights, f"{_measured(ran)}: it fits, with the shortest "
        f"pass", "Keep optimizer_function as the notebook gives it.",
        "The memory options move where values live, not what the pipeline computes: keep "
        "the notebook's stages and optimizer_function, 16 micro-batches per update.")


def _losses(ran: MemoryRun) -> Optional[Feedback]:
    if not same_values(ran.losses, ran.reference.losses):
        return not_yet(f"{_measured(ran)}: it fits, with the shortest pass, but the outfeed "
                       f"brought back other values than the losses the stages computed: "
                       f"keep outfeed_loss=True.")
    return None


def _right(ran: MemoryRun) -> str:
    return (f"{_measured(ran)}: it fits, with the shortest pass. Float16 accumulators halve "
            f"the accumulators at no cost in time (their price is precision); the "
            f"offloaded optimizer state stays off the chip for most of the pass, for two "
            f"stream copies per weight update. Recomputation and offloaded activations "
            f"shrink only the activations, a small term here, and add time.")


def _pipeline(ran: MemoryRun, **values) -> MemoryRun:
    """``ran`` with its pipeline's settings changed: for the probes."""
    return changed(ran, run=changed(ran.run, pipeline=changed(ran.run.pipeline, **values)))


# Every memory option at its default: the notebook's pipeline before the exercise.
_NO_OPTION = {name: values[0] for name, values in MEMORY_OPTIONS.items()}

EXERCISE = Exercise(
    name="12.fit-in-memory", starting_code=STARTING_CODE, solution=SOLUTION, run=run_program,
    call="check_fits_in_memory(configure_ipus, pipelined_model)", arguments=2,
    # The check prices the options the run used, never their names: any choice that fits
    # with the shortest pass (to 0.5 %) is right.
    free=("which memory options, among those that fit IPU 0 in the budget with the shortest "
          "pass",),
    rules=(Rule("a pipeline ran", _a_pipeline),
           Rule("16 micro-batches per update, 2 passes per run", _counts),
           Rule("stage1 on IPU 0, stage2 on IPU 1, one replica", _placement),
           Rule("the notebook's momentum optimizer", _optimizer),
           Rule("no offload_weights for the optimizer's state", _offload_weights),
           Rule("finite losses outfed", _finite_losses),
           Rule("IPU 0 within the budget", _budget),
           Rule("the shortest pass", _shortest_pass),
           Rule("the reference's weights", _weights),
           Rule("the reference's losses", _losses)),
    right=_right,
    probes=(Probe("a pipeline ran", lambda ran: changed(ran, run=changed(ran.run, pipeline=None)),
                  "no pipeline"),
            Probe("16 micro-batches per update, 2 passes per run",
                  lambda ran: _pipeline(
                      ran, gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT + 1),
                  "one micro-batch more per update"),
            Probe("16 micro-batches per update, 2 passes per run",
                  lambda ran: _pipeline(
                      ran, gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT - 1),
                  "one micro-batch fewer per update"),
            Probe("16 micro-batches per update, 2 passes per run",
                  lambda ran: _pipeline(ran, repeat_count=REPEAT_COUNT + 1),
                  "one pass more per run"),
            Probe("16 micro-batches per update, 2 passes per run",
                  lambda ran: _pipeline(ran, repeat_count=REPEAT_COUNT - 1),
                  "one pass fewer per run"),
            Probe("stage1 on IPU 0, stage2 on IPU 1, one replica",
                  lambda ran: _pipeline(ran, device_mapping=(1, 0)), "the stages swapped"),
            Probe("stage1 on IPU 0, stage2 on IPU 1, one replica",
                  lambda ran: _pipeline(ran, device_mapping=(0, 0)), "both stages on IPU 0"),
            Probe("stage1 on IPU 0, stage2 on IPU 1, one replica",
                  lambda ran: changed(ran, run=changed(ran.run, replicas=2)), "two replicas"),
            Probe("the notebook's momentum optimizer",
                  lambda ran: changed(ran, optimizers=frozenset({"GradientDescent"})),
                  "another optimizer"),
            Probe("no offload_weights for the optimizer's state",
                  lambda ran: _pipeline(ran, unmodelled_options=("offload_weights",)),
                  "offload_weights=True passed"),
            Probe("finite losses outfed",
                  lambda ran: changed(ran, losses=np.full_like(ran.losses, np.nan)),
                  "no finite loss"),
            Probe("finite losses outfed", lambda ran: changed(ran, losses=np.zeros(0)),
                  "no loss at all"),
            Probe("IPU 0 within the budget", lambda ran: _pipeline(ran, **_NO_OPTION),
                  "no memory option"),
            Probe("IPU 0 within the budget",
                  lambda ran: _pipeline(ran, offload_weights=False),
                  "float16 accumulators alone"),
            Probe("IPU 0 within the budget",
                  lambda ran: _pipeline(ran, accumulation_dtype_bytes=4, recompute=True),
                  "recomputation and offloading, the accumulators left as they were"),
            Probe("IPU 0 within the budget",
                  lambda ran: _pipeline(ran, **_NO_OPTION,
                                        recomputation_mode="RecomputeThenBackpropagate"),
                  "a recomputation mode the system does not allow"),
            Probe("the shortest pass", lambda ran: _pipeline(ran, offload_activations=True),
                  "an unneeded option switched on: offloaded activations"),
            Probe("the shortest pass", lambda ran: _pipeline(ran, recompute=True),
                  "an unneeded option switched on: recomputation"),
            Probe("the reference's weights", lambda ran: changed(ran, weights=scaled_update(
                ran.weights, 1 + 3 * TOLERANCE)), "the update a little larger"),
            Probe("the reference's losses", lambda ran: changed(ran, losses=ran.losses * 1.01),
                  "the losses 1 % off")))

check_fits_in_memory = check_of(
    EXERCISE, "check_fits_in_memory",
    """``configure_ipus()`` and ``pipelined_model(infeed, outfeed)``: IPU 0 within the budget,
    with the shortest pass.""")


__all__ = ["EXERCISE", "check_fits_in_memory", "SOLUTION", "run_program", "MemoryRun",
           "STARTING_CODE", "stage1", "stage2", "optimizer_function", "BUDGET_MB"]
