"""Notebook 09's exercises: memory options, replicas and the pipeline estimator.

The pipeline is notebook 09's: the tutorial's classifier cut before ``dense32``, momentum,
micro-batches of 32, 16 per weight update, 2 weight updates per engine run, Grouped, ``ipu2``,
synthetic data.  A check judges an answer with the pure simulator, on the stage costs the
notebook measured (``reference_run.stages``, passed as ``stages``) or, without them, on the
same model priced from its layer list.

    >>> check_memory_budget({"recompute": True}).ok
    False
    >>> check_accumulation_for_replicas(8).ok
    True
    >>> check_iterations_per_loop(32).ok
    True
"""
from __future__ import annotations

import itertools
from typing import Dict, Optional, Sequence, Tuple

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right
from ipu_emulator.sim.builtin_models import builtin_model
from ipu_emulator.sim.cost_model import stage_costs
from ipu_emulator.sim.passes import one_pass
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError

MICRO_BATCH = 32
ACCUMULATION_COUNT = 16
REPEAT_COUNT = 2
TARGET = "ipu2"
BUDGET_MB = 2.5
# The keywords of notebook 09's what_if(...) that change memory, and the values they take.
MEMORY_OPTIONS = {"recompute": (False, True), "offload_weights": (False, True),
                  "offload_activations": (False, True), "accumulation_dtype_bytes": (4, 2)}


def _stages(stages: Optional[Sequence] = None):
    if stages is not None:
        return stages
    return stage_costs(builtin_model("tutorial-mlp"), ["dense32"], batch_size=MICRO_BATCH,
                       optimizer="momentum")


def _simulate(stages, accumulation_count=ACCUMULATION_COUNT, replicas=1, **options):
    return simulate_pipeline(_stages(stages), "grouped", accumulation_count,
                             repeat_count=REPEAT_COUNT, replicas=replicas, target=TARGET,
                             batch_size=MICRO_BATCH, synthetic_data=True, **options)


def _peak_and_pass(stages, options: Dict) -> Tuple[float, float]:
    """IPU 0's peak memory (MB) and one pass's simulated time (s) with ``options``."""
    timeline = _simulate(stages, **options)
    return timeline.metrics.peak_memory_bytes[0] / 1e6, one_pass(timeline).metrics.makespan


def _every_choice():
    names = list(MEMORY_OPTIONS)
    for values in itertools.product(*MEMORY_OPTIONS.values()):
        yield dict(zip(names, values))


def _fastest_fitting(stages=None) -> Dict:
    """The options (only those that differ from the defaults) that fit IPU 0 in the budget
    with the shortest pass."""
    fitting = []
    for choice in _every_choice():
        peak, seconds = _peak_and_pass(stages, choice)
        if peak <= BUDGET_MB:
            fitting.append((seconds, sum(v != MEMORY_OPTIONS[k][0] for k, v in choice.items()),
                            choice))
    best = min(fitting, key=lambda f: f[:2])[2]
    return {k: v for k, v in best.items() if v != MEMORY_OPTIONS[k][0]}


def _describe(options: Dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in options.items()) or "no options"


@exercise("09.fit-the-budget", solution=_fastest_fitting,
          wrong=({"accumulation_dtype_bytes": 2}, {"offload_weights": True},
                 {"recompute": True, "offload_weights": True, "accumulation_dtype_bytes": 2},
                 {"offload_activations": True, "accumulation_dtype_bytes": 2},
                 {"recompute": True, "offload_weights": True, "offload_activations": True,
                  "accumulation_dtype_bytes": 2},
                 {}, "offload_weights", {"offload_weights": "yes"}))
def check_memory_budget(options, stages=None):
    """Options of ``what_if(...)`` that bring IPU 0's peak memory to at most 2.5 MB with the
    shortest pass."""
    if not isinstance(options, dict):
        return not_yet("answer with a dict of what_if keywords, e.g. dict(recompute=True).")
    unknown = sorted(set(options) - set(MEMORY_OPTIONS))
    if unknown:
        return not_yet(f"{', '.join(map(repr, unknown))} is not one of the memory options: "
                       f"{', '.join(MEMORY_OPTIONS)}.")
    for name, value in options.items():
        if value not in MEMORY_OPTIONS[name] or isinstance(value, bool) != isinstance(
                MEMORY_OPTIONS[name][0], bool):
            return not_yet(f"{name} takes {' or '.join(map(repr, MEMORY_OPTIONS[name]))}, "
                           f"not {value!r}.")
    peak, seconds = _peak_and_pass(stages, options)
    _, reference_seconds = _peak_and_pass(stages, {})
    measured = (f"with {_describe(options)}, IPU 0 peaks at {peak:.3f} MB and one pass takes "
                f"{seconds * 1e6:.0f} µs (reference {reference_seconds * 1e6:.0f} µs)")
    if peak > BUDGET_MB:
        switched_on = sum(v != MEMORY_OPTIONS[k][0] for k, v in options.items())
        return not_yet(f"{measured}: over the {BUDGET_MB} MB budget. "
                       + ("No single option saves enough: their savings add up when they "
                          "shrink different terms (weights, accumulators, optimizer state, "
                          "kept activations)." if switched_on <= 1 else
                          "Which term of IPU 0's memory do your options not touch yet?"))
    best = _fastest_fitting(stages)
    _, best_seconds = _peak_and_pass(stages, best)
    if seconds > best_seconds * 1.005:
        return not_yet(f"{measured}: it fits, but one of your options costs time without "
                       "being needed for the budget. Which can you drop and still fit?")
    return right(f"{measured}. Float16 accumulators halve the accumulators at no cost in time "
                 "(the price is precision); offloading the optimizer state keeps momentum "
                 "off the chip for most of the pass, for two stream copies per update. "
                 "Recomputation or offloaded activations would only add time here.")


def _accumulation_for_replicas(stages=None) -> int:
    return 2 * ACCUMULATION_COUNT // 4


@exercise("09.effective-batch", solution=_accumulation_for_replicas,
          wrong=(16, 4, 32, 2, "8", 8.0))
def check_accumulation_for_replicas(count, stages=None):
    """The gradient accumulation count that gives 4 replicas the effective batch of the
    2-replica run (2 x 32 x 16)."""
    if not is_whole_number(count):
        return not_yet("answer with a whole number of micro-batches, without quotes or a "
                       "decimal point.")
    goal = 2 * MICRO_BATCH * ACCUMULATION_COUNT
    try:
        timeline = _simulate(stages, accumulation_count=count, replicas=4)
    except PipelineConfigurationError as error:
        return not_yet(f"the SDK refuses {count}: {error.message}")
    effective = timeline.metrics.effective_batch_size
    if effective != goal:
        ratio = (f"{effective / goal:g} times" if effective > goal
                 else f"1/{goal / effective:g} of")
        return not_yet(f"with 4 replicas, micro-batches of {MICRO_BATCH} and {count} per "
                       f"update, one weight update sees {ratio} the {goal:,} samples of the "
                       "2-replica run. The factors of the effective batch size multiply: "
                       "which one has to shrink when the replicas double?")
    ramps = {m: one_pass(_simulate(stages, accumulation_count=m, replicas=4)).metrics
             for m in (count, ACCUMULATION_COUNT)}
    return right(f"4 x {MICRO_BATCH} x {count} = {effective:,}, the same samples per update as "
                 f"2 x {MICRO_BATCH} x {ACCUMULATION_COUNT}. Each pipeline now fills and "
                 f"drains around {count} micro-batches instead of {ACCUMULATION_COUNT}, so its "
                 f"idle share of a pass grows ({ramps[count].bubble_fraction:.0%} vs "
                 f"{ramps[ACCUMULATION_COUNT].bubble_fraction:.0%} in simulated IPU time): "
                 "more replicas at a fixed effective batch make each pass less efficient.")


@exercise("09.iterations-per-loop", solution=lambda: REPEAT_COUNT * ACCUMULATION_COUNT,
          wrong=(2, 16, 24, 64, "32"))
def check_iterations_per_loop(iterations):
    """``IPURunConfig.iterations_per_loop`` for 2 weight updates per engine run with a
    gradient accumulation count of 16."""
    if not is_whole_number(iterations):
        return not_yet("answer with a whole number of micro-batches, without quotes.")
    if iterations < 1 or iterations % ACCUMULATION_COUNT:
        return not_yet(f"the estimator refuses {iterations}: iterations_per_loop counts "
                       "micro-batches and must be a multiple of the gradient accumulation "
                       f"count ({ACCUMULATION_COUNT}).")
    updates = iterations // ACCUMULATION_COUNT
    if updates != REPEAT_COUNT:
        return not_yet(f"{iterations} micro-batches per engine run make {updates} weight "
                       f"update{'s' if updates != 1 else ''} per run (the pipeline's repeat "
                       f"count), not {REPEAT_COUNT}.")
    return right(f"{iterations} micro-batches per engine run = {updates} passes of "
                 f"{ACCUMULATION_COUNT}: the estimator gives the pipeline repeat_count "
                 f"{updates}, as train_pipeline's REPEAT_COUNT did by hand.")


__all__ = ["check_memory_budget", "check_accumulation_for_replicas", "check_iterations_per_loop"]
