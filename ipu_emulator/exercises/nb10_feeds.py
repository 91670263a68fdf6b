"""Notebook 10's exercises: the feeds explorer without TensorFlow (tutorial 3's MLP from the
cost model, 10,000 steps, batches of 32, simulated on a GC200 by ``sim.feeds``, as the
feeds explorer simulates it).

* On the ideal host, the fewest steps per execution at which launching engine runs takes at
  most half of the training: where the launches stop being the larger cost.
* On the tutorial 3 host, the largest speed-up feeds can give, however many steps per
  execution: the host's per-batch work is paid either way, so the speed-up has a ceiling.

    >>> check_break_even(_break_even()).ok
    True
    >>> check_most_speed_up(1.63).ok
    False
"""
from __future__ import annotations

from ipu_emulator.exercises import (exercise, is_number, is_whole_number, not_yet, right,
                                    smallest_whole_number)
from ipu_emulator.exercises.nb03_feeds import STEPS, TARGET, with_feeds, without_feeds
from ipu_emulator.sim import feeds
from ipu_emulator.sim.feeds import tutorial3_step_cost
from ipu_emulator.sim.hardware import HostModel

LAUNCH_SHARE = 0.5
RATIO_TOLERANCE = 0.02
# Engine runs are identical and blocking, so a run of k steps costs launch + k x (one step):
# two short runs give that line, and the line gives one run of all STEPS steps without
# simulating 10,000 steps (seconds in the browser's kernel).
_SHORT_RUN = 100


def ideal_launch_share(steps_per_execution: int) -> float:
    """Share of the training spent launching engine runs, ideal host."""
    total, launching = with_feeds(steps_per_execution, tutorial3_step_cost(), HostModel())
    return launching / total


def _break_even() -> int:
    return smallest_whole_number(lambda n: ideal_launch_share(n) <= LAUNCH_SHARE, limit=STEPS)


@exercise("10.break-even", solution=_break_even, wrong=(10, 50, 100, 1000, 0, "60"))
def check_break_even(steps_per_execution):
    """The fewest steps per execution at which launching takes at most half of the training,
    on the ideal host."""
    if not is_whole_number(steps_per_execution):
        return not_yet("answer with a whole number of steps per execution, without quotes.")
    if not 1 <= steps_per_execution <= STEPS:
        return not_yet("steps per execution runs from 1 (no loop) to the number of steps.")
    share = ideal_launch_share(steps_per_execution)
    if share > LAUNCH_SHARE:
        return not_yet(f"at {steps_per_execution} steps per execution the ideal host still "
                       f"spends {share:.1%} of the time launching. One launch costs as much "
                       "as how many steps of IPU compute? Try larger values.")
    if steps_per_execution > 1 and ideal_launch_share(steps_per_execution - 1) <= LAUNCH_SHARE:
        return not_yet(f"{steps_per_execution} steps per execution get launching down to "
                       f"{share:.0%}, but fewer would too. Which is the smallest value?")
    return right(f"{steps_per_execution} steps per execution: launching is {share:.1%} of the "
                 "time. One launch (about a millisecond of host time) costs as much as that "
                 "many steps of this small model on the IPU; below it, the IPU mostly waits "
                 "for the host.")


def _simulated_run_seconds(steps: int, host: HostModel) -> float:
    total, _ = feeds.run_seconds(feeds.looped_run(steps, tutorial3_step_cost()), host, TARGET)
    return total


def one_run_seconds(steps: int, host: HostModel) -> float:
    """Simulated seconds of one engine run of ``steps`` steps (launch included)."""
    short, double = (_simulated_run_seconds(n, host) for n in (_SHORT_RUN, 2 * _SHORT_RUN))
    per_step = (double - short) / _SHORT_RUN
    return short + (steps - _SHORT_RUN) * per_step


def most_speed_up() -> float:
    """Without feeds / with feeds at one engine run for the whole training (tutorial 3 host):
    no more launches to save."""
    host = HostModel.tutorial3()
    return without_feeds(tutorial3_step_cost(), host) / one_run_seconds(STEPS, host)


@exercise("10.most-speed-up", solution=most_speed_up,
          wrong=(1.63, 1.5, 63.5, 10, 1.0, "1.8"))
def check_most_speed_up(ratio):
    """The largest speed-up feeds give on the tutorial 3 host, however many steps per
    execution."""
    if not is_number(ratio):
        return not_yet("answer with a number (time without feeds / time with feeds), "
                       "without quotes.")
    best = most_speed_up()
    if abs(ratio / best - 1) <= RATIO_TOLERANCE:
        per_batch = HostModel.tutorial3().host_seconds_per_batch
        return right(f"about {best:.2f}x, and no more: with one engine run for all 10,000 "
                     "steps there are no launches left to save, but the host still prepares "
                     f"every batch ({per_batch * 1e3:.2f} ms each on the tutorial's machine). "
                     "Almost all the time left is that work, which only a faster input "
                     "pipeline removes.")
    if ratio <= 1:
        return not_yet("the feeds make the training faster, so the ratio is above 1: divide "
                       "the time without feeds by the time with feeds.")
    if ratio > 5:
        return not_yet("that is an ideal host's kind of speed-up. Keep the tutorial 3 host: "
                       "its per-batch work does not shrink with steps per execution.")
    if ratio < best:
        tutorial = without_feeds(tutorial3_step_cost(), HostModel.tutorial3()) / with_feeds(
            10, tutorial3_step_cost(), HostModel.tutorial3())[0]
        near = " That is about the speed-up at the tutorial's 10 steps per execution." \
            if abs(ratio / tutorial - 1) <= RATIO_TOLERANCE else ""
        return not_yet("too low: more steps per execution still save launches." + near
                       + " Watch where the speed-up stops growing.")
    return not_yet("too high: the feeds only remove launches, and the host still prepares "
                   "every batch. Read the speed-up at the largest steps per execution.")


__all__ = ["check_break_even", "check_most_speed_up", "ideal_launch_share",
           "one_run_seconds", "most_speed_up"]
