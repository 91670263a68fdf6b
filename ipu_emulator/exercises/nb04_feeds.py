"""Notebook 04's exercise: the feeds explorer without TensorFlow (tutorial 3's MLP from the
cost model, 10,000 steps, batches of 32, simulated on a GC200 by ``sim.feeds``, as the
feeds explorer simulates it).

On the ideal host, the fewest steps per execution at which launching engine runs takes at
most half of the training: where the launches stop being the larger cost.  A wrong answer gets
a hint on the method, the same whatever the number: never the launch share that number gives,
nor whether to go up or down, so the check cannot be used as a countdown.

    >>> check_break_even(_break_even()).ok
    True
    >>> check_break_even(10).text.startswith("Not yet. Hint: compare one launch")
    True
"""
from __future__ import annotations

from typing import Optional, Tuple

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right, smallest_whole_number
from ipu_emulator.record import ComputeCost
from ipu_emulator.sim import feeds
from ipu_emulator.sim.feeds import tutorial3_step_cost
from ipu_emulator.sim.hardware import HostModel

TARGET = "ipu2"
STEPS = 10_000
LAUNCH_SHARE = 0.5


def with_feeds(steps_per_execution: int, step_cost: Optional[ComputeCost] = None,
               host: Optional[HostModel] = None) -> Tuple[float, float]:
    """``(total, launching)``: simulated seconds of the 10,000 steps with feeds (the tutorial
    3 host and its MLP unless told)."""
    total, launching, _ = feeds.with_feeds(STEPS, steps_per_execution,
                                           step_cost or tutorial3_step_cost(),
                                           host or HostModel.tutorial3(), TARGET)
    return total, launching


def ideal_launch_share(steps_per_execution: int) -> float:
    """Share of the training spent launching engine runs, ideal host."""
    total, launching = with_feeds(steps_per_execution, tutorial3_step_cost(), HostModel())
    return launching / total


def _break_even() -> int:
    return smallest_whole_number(lambda n: ideal_launch_share(n) <= LAUNCH_SHARE, limit=STEPS)


@exercise("04.break-even", solution=_break_even, wrong=(10, 28, 30, 50, 100, 1000, 0, "60"))
def check_break_even(steps_per_execution):
    """The fewest steps per execution at which launching takes at most half of the training,
    on the ideal host."""
    if not is_whole_number(steps_per_execution):
        return not_yet("answer with a whole number of steps per execution, without quotes.")
    if not 1 <= steps_per_execution <= STEPS:
        return not_yet("steps per execution runs from 1 (no loop) to the number of steps.")
    if steps_per_execution != _break_even():
        return not_yet("compare one launch with one step. An engine run of n steps costs one "
                       "launch (h, printed at the top) plus n steps of IPU work (each step's "
                       "compute and its batch's copy in: the ideal host's trace shows them), "
                       "so launching is half of it when the n steps together take as long as "
                       "the launch. Work out that n from the two times, then check the whole "
                       "numbers next to it with simulate(FeedsConfig(host=\"ideal host\", "
                       "steps_per_execution=n)): the answer is the fewest at or under 50 %.")
    share = ideal_launch_share(steps_per_execution)
    return right(f"{steps_per_execution} steps per execution: launching is {share:.1%} of the "
                 "time. One launch (about a millisecond of host time) costs as much as that "
                 "many steps of this small model on the IPU; below it, the IPU mostly waits "
                 "for the host.")


__all__ = ["check_break_even", "ideal_launch_share", "with_feeds", "STEPS", "TARGET"]
