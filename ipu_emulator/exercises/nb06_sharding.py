"""Notebook 06's exercises: sharding, the IPUs taking turns, and its idle fraction.

    >>> check_turns([0, 1]).ok, check_turns([0, 1, 0]).ok
    (True, False)
    >>> check_sharding_idle_fraction(0.75).ok, check_sharding_idle_fraction(0.25).ok
    (True, False)
"""
from __future__ import annotations

import math
from typing import List

from ipu_emulator.exercises import exercise, is_number, is_whole_number, not_yet, right
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.bubbles import textbook_bubble
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages

COMPUTE = ("forward", "backward", "weight_update")
MINI_BATCHES = 16


def turns_in(timeline, mini_batch: int = 0) -> List[int]:
    """The IPUs that compute for ``mini_batch`` in ``timeline``, in order, each turn written
    once (the notebook's lesson check compares its solution with it)."""
    events = sorted((e for e in timeline.events
                     if e.kind in COMPUTE and getattr(e, "micro_batch", None) == mini_batch),
                    key=lambda e: e.start)
    turns: List[int] = []
    for e in events:
        ipu = int(e.lane.replace("IPU", ""))
        if not turns or turns[-1] != ipu:
            turns.append(ipu)
    return turns


def _what_if_turns() -> List[int]:
    """Without a recorded trace: the tutorial's model cut after dense64, sharded as its step 2
    is (``minimize`` in the last shard's scope), as a what-if."""
    shards = cost_model.shard_costs(builtin_models.builtin_model("tutorial-mlp"), ["dense32"],
                                    batch_size=32)
    return turns_in(simulate_pipeline(shards, "sequential", MINI_BATCHES, batch_size=32,
                                      synthetic_data=True, fifos=False))


def _solution_turns(timeline=None) -> List[int]:
    return turns_in(timeline) if timeline is not None else _what_if_turns()


@exercise("06.turns", solution=_solution_turns,
          wrong=([0, 1, 0], [0, 1, 1, 0], [1, 0, 1], [0, 1, 0, 1], [1, 0], "0, 1"))
def check_turns(turns, timeline=None):
    """The IPUs that compute for mini-batch 0, in the order they take their turns (each turn
    written once); ``timeline``: the trace the learner reads (optional)."""
    if not isinstance(turns, (list, tuple)) or not all(
            is_whole_number(t) for t in turns):
        return not_yet("answer with a list of IPU numbers, such as [1, 0].")
    turns = list(turns)
    expected = _solution_turns(timeline)
    if turns == expected:
        return right("IPU0 runs its layers' forward pass, then IPU1 the rest of the forward "
                     "pass, the loss and the whole backward pass: minimize was built inside "
                     "ipu_shard(1), so every gradient is computed there, from IPU0's "
                     "activations and weights copied over. IPU0 waits until the weight "
                     "update. In every turn one IPU computes while the other waits: that "
                     "waiting is sharding's bubble.")
    if turns == expected + [0]:
        return not_yet("that is what happens when each gradient runs with its forward op "
                       "(minimize(colocate_gradients_with_ops=True)). Here minimize was built "
                       "inside ipu_shard(1): where do the gradient ops it builds run?")
    if any(a == b for a, b in zip(turns, turns[1:])):
        return not_yet("write an IPU once per turn: two neighbours in your list are the same "
                       "IPU.")
    if turns and turns[0] != expected[0]:
        return not_yet("which IPU holds the first layers, the ones the images enter?")
    if len(turns) < len(expected):
        return not_yet("follow the mini-batch all the way: forward through both IPUs, and "
                       "then backward. Where does the backward pass end?")
    return not_yet("read the zoomed trace of the first two mini-batches: look at the boxes "
                   "numbered 0 on each lane, from left to right.")


# 06.sharding-idle-fraction: 4 equal shards, free communication, no host launch.
SHARDS = 4


def _ideal_idle_fraction(shards: int = SHARDS) -> float:
    return 1 - 1 / shards


def _simulated_idle(mini_batches: int) -> float:
    """Sharding (the Sequential schedule) on ``SHARDS`` unit-cost stages, nothing else."""
    return simulate_pipeline(unit_stages(SHARDS), "sequential", mini_batches, unit_cost=True,
                             backward_ratio=2.0).metrics.bubble_fraction


@exercise("06.sharding-idle-fraction", solution=_ideal_idle_fraction,
          wrong=(0.25, 0.5, 0.0, 75, "0.75"))
def check_sharding_idle_fraction(fraction):
    """The idle fraction (bubble) of a model sharded over 4 IPUs with equal shards, free
    communication and no host launch, as a fraction between 0 and 1."""
    if not is_number(fraction):
        return not_yet("answer with a number, without quotes.")
    if fraction > 1:
        return not_yet("give a fraction between 0 and 1, not a percentage.")
    expected = _ideal_idle_fraction()
    if math.isclose(fraction, expected, abs_tol=0.005):
        simulated = {m: _simulated_idle(m) for m in (8, 64)}
        pipelined = textbook_bubble(SHARDS, 64)
        return right(f"at any moment one IPU of {SHARDS} computes and the others wait: "
                     f"{SHARDS - 1} of every {SHARDS} IPU-seconds are idle. The simulator "
                     f"agrees: {simulated[8]:.0%} with 8 mini-batches, {simulated[64]:.0%} "
                     "with 64. More mini-batches do not help, as they would a pipeline "
                     f"(a pipeline of {SHARDS} equal stages idles {pipelined:.0%} with 64), and "
                     "more shards make it worse: sharding is for fitting a model, not for "
                     "speed.")
    if math.isclose(fraction, 1 / SHARDS, abs_tol=0.005):
        return not_yet("that is the share of the time each IPU computes. The question asks "
                       "for the rest.")
    if fraction <= 0.01:
        return not_yet("even with perfect balance, can two shards compute at the same time? "
                       "Look at the trace above.")
    return not_yet("at any moment, how many of the IPUs compute? The rest of them are idle.")


__all__ = ["check_turns", "check_sharding_idle_fraction", "turns_in"]
