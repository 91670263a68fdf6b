"""Notebook 11's exercises: stages chosen at run time from a list of splits (step 4).

Splits are judged with the pure simulator, on the built-in description of the tutorial's
classifier (the same one the notebook's splits picker uses): micro-batches of 32, Grouped,
16 micro-batches per weight update, synthetic data, one pass.

    >>> check_four_stages(["dense128", "dense64", "dense32"]).ok
    False
"""
from __future__ import annotations

import functools
from itertools import combinations
from types import MappingProxyType
from typing import Mapping, Sequence, Tuple

from ipu_emulator.exercises import exercise, not_yet, right
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.passes import one_pass
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline

MODEL = "tutorial-mlp"
BATCH_SIZE = 32
MIN_ACCUMULATION = 16
EVERY_LAYER = ("dense256", "dense128", "dense64", "dense32", "logits", "cel")


def _layers():
    return builtin_models.builtin_model(MODEL)


def _one_pass_seconds(splits: Sequence[str]) -> float:
    """Simulated IPU time of one pass of the pipeline these splits make (Grouped, 16
    micro-batches, synthetic data)."""
    stages = cost_model.stage_costs(_layers(), list(splits), BATCH_SIZE)
    timeline = simulate_pipeline(stages, "grouped", MIN_ACCUMULATION, batch_size=BATCH_SIZE,
                                 synthetic_data=True)
    return one_pass(timeline).metrics.makespan


def _micro_seconds(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


# --- Four stages that beat two ------------------------------------------------------------

# Worked out once a process: twenty pipelines simulated (about a tenth of a second each),
# the same for every answer checked, and a learner may check several.  Read-only, as it is
# shared.
@functools.lru_cache(maxsize=1)
def _four_stage_times() -> Mapping[Tuple[str, ...], float]:
    return MappingProxyType({combo: _one_pass_seconds(combo)
                             for combo in combinations(EVERY_LAYER, 3)})


def _best_four_stages() -> Tuple[str, ...]:
    times = _four_stage_times()
    return min(times, key=times.get)


@exercise("11.four-stages", solution=_best_four_stages,
          wrong=(("dense128", "dense64", "dense32"), ("dense64", "dense32", "cel"),
                 ("dense32",), "dense32", ("dense32", "dense128", "cel")),
          hint_on_error="those splits cannot be simulated: name three different layers from "
                        "dense256 to cel, in the model's order.")
def check_four_stages(splits):
    """Three splits (four stages on four IPUs) whose pipeline pass is the shortest."""
    if isinstance(splits, str) or not isinstance(splits, (list, tuple)):
        return not_yet("answer with a list of three layer names, like "
                       "['dense256', 'dense64', 'logits'].")
    if len(splits) != 3:
        return not_yet(f"that is {len(splits)} split(s); four stages need three.")
    names = [str(s).strip() for s in splits]
    unknown = [n for n in names if n not in EVERY_LAYER]
    if unknown:
        return not_yet(f"{', '.join(map(repr, unknown))} cannot be a split: choose from "
                       f"{', '.join(EVERY_LAYER)}.")
    if len(set(names)) != 3 or sorted(names, key=EVERY_LAYER.index) != names:
        return not_yet("the splits must be three different layers, in the model's order: "
                       + " -> ".join(EVERY_LAYER) + ".")
    times = _four_stage_times()
    best = min(times, key=times.get)
    mine = times[tuple(names)]
    two_stages = _one_pass_seconds(["dense32"])
    if tuple(names) != best:
        # No time in the answer: the learner simulates their cut, the check is no oracle.
        return not_yet("another cut of four stages makes a shorter pass. Simulate yours and "
                       "find the stage the others wait for (the lane with the fewest gaps): "
                       "give it less work, without adding a stage that does next to nothing.")
    return right(f"{', '.join(names)}: one pass takes {_micro_seconds(mine)}, against "
                 f"{_micro_seconds(two_stages)} with the tutorial's two stages. dense256 keeps "
                 "a stage with only flatten, and the layers after it are shared out so that no "
                 "stage is much slower than the others. More stages pay when they shorten the "
                 "slowest one by more than the exchanges they add.")


__all__ = ["check_four_stages"]
