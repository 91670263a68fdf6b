"""Notebook 03's exercises: steps per execution, and what Graphcore would have measured on an
ideal host.

Both work on Graphcore's tutorial 3 measurement: 10,000 training steps, batches of 32, the
loss sent back through an outfeed each step, simulated on a GC200 by ``sim.feeds``, as the
notebook's feeds explorer simulates it.  The checks take the step cost the notebook recorded
(``looped_run.step_cost``); without it they use ``REFERENCE_STEP_COST``, that step as the
emulator recorded it.

    >>> check_ideal_host_ratio(1.63).ok
    False
    >>> check_steps_per_execution(_fewest_steps_per_execution()).ok
    True
"""
from __future__ import annotations

from typing import Optional

from ipu_emulator.exercises import (exercise, is_number, is_whole_number, not_yet, right,
                                    smallest_whole_number)
from ipu_emulator.record import ComputeCost
from ipu_emulator.sim import feeds
from ipu_emulator.sim.feeds import tutorial3_step_cost
from ipu_emulator.sim.hardware import HostModel

TARGET = "ipu2"
STEPS = 10_000
TUTORIAL_STEPS_PER_EXECUTION = 10
# Launching engine runs may take at most this share of the whole training's time.
LAUNCH_BUDGET = 0.02
RATIO_TOLERANCE = 0.05



# One training step of the notebook's MLP (batches of 32, SGD), as the emulator recorded it
# from the traced tf.function.
REFERENCE_STEP_COST = ComputeCost(
    forward_flops=6516706.0, backward_flops=6595232.0, weight_update_flops=407080.0,
    bytes_accessed=4913020.0, parameter_bytes=814180, activation_bytes=54412,
    phase_bytes=(615240.0, 634028.0, 3663752.0), phase_op_cycles=(16300.0, 7000.0, 12100.0))


def with_feeds(steps_per_execution: int, step_cost: Optional[ComputeCost] = None,
               host: Optional[HostModel] = None):
    """``(total, launching)``: simulated seconds of the 10,000 steps with feeds."""
    total, launching, _ = feeds.with_feeds(STEPS, steps_per_execution,
                                           step_cost or REFERENCE_STEP_COST,
                                           host or HostModel.tutorial3(), TARGET)
    return total, launching


def without_feeds(step_cost: Optional[ComputeCost] = None, host: Optional[HostModel] = None):
    """Simulated seconds of the 10,000 steps, one engine run each, the batch passed in."""
    total, _ = feeds.without_feeds(STEPS, step_cost or REFERENCE_STEP_COST,
                                   host or HostModel.tutorial3(), TARGET)
    return total


def launch_fraction(steps_per_execution: int, step_cost: Optional[ComputeCost] = None) -> float:
    """Share of the training, tutorial 3 host, spent launching engine runs."""
    total, launching = with_feeds(steps_per_execution, step_cost)
    return launching / total


def _fewest_steps_per_execution(step_cost: Optional[ComputeCost] = None) -> int:
    return smallest_whole_number(
        lambda steps: launch_fraction(steps, step_cost) <= LAUNCH_BUDGET, limit=STEPS)


@exercise("03.steps-per-execution", solution=_fewest_steps_per_execution,
          wrong=(10, 20, 50, 100, 0, "40"))
def check_steps_per_execution(steps_per_execution, step_cost: Optional[ComputeCost] = None):
    """The fewest steps per execution for which launching engine runs takes at most 2 % of
    the tutorial's 10,000 steps (tutorial 3 host)."""
    if not is_whole_number(steps_per_execution):
        return not_yet("answer with a whole number of steps per execution, without quotes.")
    if not 1 <= steps_per_execution <= STEPS:
        return not_yet("steps per execution runs from 1 (no loop) to the number of steps.")
    share = launch_fraction(steps_per_execution, step_cost)
    if share > LAUNCH_BUDGET:
        return not_yet(f"at {steps_per_execution} steps per execution, launching is {share:.1%} "
                       "of the total, over the budget. Try larger values with "
                       "simulate(FeedsConfig(...)).")
    if (steps_per_execution > 1
            and launch_fraction(steps_per_execution - 1, step_cost) <= LAUNCH_BUDGET):
        return not_yet(f"{steps_per_execution} steps per execution meet the budget (launching "
                       f"is {share:.1%}), but fewer would too. Which is the smallest value "
                       "that does?")
    total, _ = with_feeds(steps_per_execution, step_cost)
    tutorial_total, _ = with_feeds(TUTORIAL_STEPS_PER_EXECUTION, step_cost)
    return right(f"{steps_per_execution} steps per execution: launching is {share:.1%} of "
                 f"{total:.2f} s, against {tutorial_total:.2f} s at the tutorial's 10. Beyond "
                 "this, more steps per execution save little: what remains is the host "
                 "preparing every batch, which no feed removes.")


def ideal_host_ratio(step_cost: Optional[ComputeCost] = None) -> float:
    """Without feeds / with feeds (10 steps per execution), on a host that prepares batches
    instantly and only pays each launch."""
    ideal = HostModel()
    total, _ = with_feeds(TUTORIAL_STEPS_PER_EXECUTION, step_cost, host=ideal)
    return without_feeds(step_cost, host=ideal) / total


@exercise("03.ideal-host-ratio", solution=ideal_host_ratio,
          wrong=(1.63, 1.65, 10, 100, 0.5, "7"))
def check_ideal_host_ratio(ratio, step_cost: Optional[ComputeCost] = None):
    """The speed-up from the feeds Graphcore would have measured with an ideal host."""
    if not is_number(ratio):
        return not_yet("answer with a number (time without feeds / time with feeds), "
                       "without quotes.")
    exact = ideal_host_ratio(step_cost)
    if abs(ratio / exact - 1) <= RATIO_TOLERANCE:
        return right(f"about {exact:.1f}x, against the 1.63x measured. The feeds save the "
                     "same 9,000 launches either way; on the tutorial's host they are a small "
                     "share of a total dominated by preparing batches, on an ideal host they "
                     "are most of it.")
    if ratio <= 1:
        return not_yet("the feeds make the training faster, so the ratio is above 1: divide the "
                       "time without feeds by the time with feeds.")
    if ratio < 2:
        return not_yet("that is about the tutorial 3 host's ratio. Simulate again with "
                       "host=\"ideal host\" in FeedsConfig, or hardware.HostModel().")
    if ratio > exact:
        return not_yet("too high. The ideal host still pays one launch per engine run, and "
                       "the IPU still computes every step: simulate both programs and divide "
                       "their totals.")
    return not_yet("too low. Simulate both programs with the ideal host and divide the time "
                   "without feeds by the time with feeds.")


__all__ = ["check_steps_per_execution", "check_ideal_host_ratio", "with_feeds",
           "without_feeds", "launch_fraction", "ideal_host_ratio", "tutorial3_step_cost",
           "REFERENCE_STEP_COST"]
