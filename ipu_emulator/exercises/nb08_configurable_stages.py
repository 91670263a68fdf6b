"""Notebook 08's exercises: stages chosen at run time from a list of splits (step 4).

Splits are judged with the pure simulator, on the built-in description of the tutorial's
classifier (the same one the notebook's splits picker uses): micro-batches of 32, Grouped,
16 micro-batches per weight update, synthetic data, one pass.

    >>> check_device_for_splits((8, 28)).ok
    True
    >>> check_balanced_split("dense64").ok, check_balanced_split("dense32").ok
    (True, False)
"""
from __future__ import annotations

from itertools import combinations
from typing import Dict, Sequence, Tuple

from ipu_emulator.exercises import exercise, not_yet, right
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.hardware import next_power_of_two
from ipu_emulator.sim.passes import one_pass
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline
from ipu_emulator.sim.schedule_rules import pipeline_overlap

MODEL = "tutorial-mlp"
BATCH_SIZE = 32
MIN_ACCUMULATION = 16
EVERY_LAYER = ("dense256", "dense128", "dense64", "dense32", "logits", "cel")
DEFAULT_SPLIT = builtin_models.TUTORIAL_MLP_SPLITS[0]  # the tutorial's: stage 1 from dense32


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


# --- 1. The device and the count a split needs ----------------------------------------------

def _device_and_count(splits: Sequence[str] = EVERY_LAYER) -> Tuple[int, int]:
    stages = len(splits) + 1
    overlap = pipeline_overlap("grouped", stages, training=True)
    count = -(-MIN_ACCUMULATION // overlap) * overlap
    return next_power_of_two(stages), count


@exercise("08.device-for-splits", solution=_device_and_count,
          wrong=((7, 28), (8, 14), (8, 16), (7, 14), 8, (8, 21)))
def check_device_for_splits(answer):
    """``(IPUs, gradient accumulation count)`` for a split at every layer from dense256 to
    cel, Grouped, at least 16 micro-batches per weight update."""
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return not_yet("answer with a pair in brackets: (IPUs, gradient accumulation count).")
    ipus, count = answer
    want_ipus, want_count = _device_and_count()
    if ipus != want_ipus:
        return not_yet("count the stages first (N splits make N + 1), then round up to a "
                       "device size that exists: 1, 2, 4, 8 or 16 IPUs.")
    if count != want_count:
        return not_yet("the IPUs are right. Grouped needs a multiple of twice the number of "
                       "stages, and the notebook asks for at least MIN_ACCUMULATION: which is "
                       "the smallest such count?")
    return right(f"six splits make seven stages, on a device of {want_ipus} IPUs (one stays "
                 f"idle); Grouped needs a multiple of 14, and {want_count} is the first one of "
                 "at least 16. The tutorial's 16 would be refused at the first sess.run.")


# --- 2. The single split that balances the two stages ---------------------------------------

def _single_split_times() -> Dict[str, float]:
    return {name: _one_pass_seconds([name]) for name in EVERY_LAYER}


def _best_single_split() -> str:
    times = _single_split_times()
    return min(times, key=times.get)


@exercise("08.balanced-split", solution=_best_single_split,
          wrong=("dense256", "logits", "dense32", "cel", "flatten", ["dense32", "logits"]))
def check_balanced_split(split):
    """The single split (a layer's name) whose pipeline pass is the shortest."""
    if isinstance(split, (list, tuple)):
        if len(split) != 1:
            return not_yet("this question is about one split: two stages, two IPUs. Answer "
                           "with one layer's name.")
        split = split[0]
    if not isinstance(split, str):
        return not_yet("answer with a layer's name in quotes, like 'dense128'.")
    times = _single_split_times()
    name = split.strip()
    if name == "flatten":
        return not_yet("a split at flatten would leave stage 0 empty. Splits name the first "
                       "layer of the next stage.")
    if name not in times:
        return not_yet(f"{split!r} is not a layer a split can be at: "
                       f"{', '.join(EVERY_LAYER)}.")
    best = min(times, key=times.get)
    if name == DEFAULT_SPLIT != best:
        return not_yet(f"that is the tutorial's default split: one pass takes "
                       f"{_micro_seconds(times[name])}. In time it is not balanced: IPU0 "
                       "(dense256 to dense64) works longer than IPU1, which waits. Which "
                       "layer could move to IPU1?")
    if name != best:
        return not_yet(f"split at {name}, one pass takes {_micro_seconds(times[name])}; "
                       "another split is shorter. A pass goes at the pace of its busiest IPU: "
                       "in the picker, look for the split whose two IPUs work about the same "
                       "time (the smallest imbalance).")
    return right(f"split at {name}, one pass takes {_micro_seconds(times[name])}, the "
                 "shortest of all single splits: the two IPUs do about the same amount of "
                 "work, so neither waits for the other.")


# --- 3. Four stages that beat two ------------------------------------------------------------

def _four_stage_times() -> Dict[Tuple[str, ...], float]:
    return {combo: _one_pass_seconds(combo) for combo in combinations(EVERY_LAYER, 3)}


def _best_four_stages() -> Tuple[str, ...]:
    times = _four_stage_times()
    return min(times, key=times.get)


@exercise("08.four-stages", solution=_best_four_stages,
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
        faster = "faster" if mine < two_stages else "slower"
        return not_yet(f"these four stages take {_micro_seconds(mine)} per pass, {faster} than "
                       f"the tutorial's two ({_micro_seconds(two_stages)}), and another cut is "
                       "shorter still. Which stage is the slowest here? Give it less work: "
                       "the trace shows which IPUs wait.")
    return right(f"{', '.join(names)}: one pass takes {_micro_seconds(mine)}, against "
                 f"{_micro_seconds(two_stages)} with the tutorial's two stages. dense256 keeps "
                 "a stage with only flatten, and the layers after it are shared out so that no "
                 "stage is much slower than the others. More stages pay when they shorten the "
                 "slowest one by more than the exchanges they add.")


__all__ = ["check_device_for_splits", "check_balanced_split", "check_four_stages"]
