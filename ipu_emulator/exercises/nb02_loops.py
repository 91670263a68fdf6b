"""Notebook 02's exercises: one launch against many looped steps, and splitting an epoch.

Both checks judge an answer against the simulator, from the looped epoch the notebook
recorded (passed as ``run``: one engine run whose loop made every step of the epoch, each
batch from the infeed); without it they use notebook 01's recorded step, looped over an epoch
of 125 steps.

    >>> check_steps_per_launch(1).ok
    False
    >>> check_split_epoch(_smallest_split()).ok
    True
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ipu_emulator.exercises import exercise, is_number, is_whole_number, not_yet, right
from ipu_emulator.exercises.nb01_porting import REFERENCE_STEP, looped
from ipu_emulator.record import EngineRun, ProgramRecord
from ipu_emulator.sim.timeline import simulate_engine_runs

TARGET = "ipu2"
EPOCH_STEPS = 125
# A number read off a trace lands within this (relative) of the simulated one.
READING_TOLERANCE = 0.2
# Launching engine runs may take at most this share of the simulated epoch.
LAUNCH_BUDGET = 0.5

REFERENCE_EPOCH = looped(REFERENCE_STEP, EPOCH_STEPS)


def launch_and_step(run: Optional[EngineRun] = None):
    """``(h, s)``: one launch, and one looped step on the IPU (copies included), both
    simulated, from the looped epoch ``run``."""
    run = run or REFERENCE_EPOCH
    metrics = simulate_engine_runs([run], target=TARGET).metrics
    launch = metrics.host_overhead_time
    return launch, (metrics.makespan - launch) / run.iterations


def _steps_per_launch(run: Optional[EngineRun] = None) -> float:
    launch, step = launch_and_step(run)
    return launch / step


@exercise("02.steps-per-launch", solution=_steps_per_launch,
          wrong=(1, 4, 125, 1000, 0.05, "20"))
def check_steps_per_launch(steps, run: Optional[EngineRun] = None):
    """About how many looped steps the IPU makes in the time one engine-run launch takes."""
    if not is_number(steps):
        return not_yet("answer with a number of steps, without quotes.")
    launch, step = launch_and_step(run)
    exact = launch / step
    if abs(steps / exact - 1) <= READING_TOLERANCE:
        return right(f"about {exact:.0f}: a launch costs {launch * 1e3:.2f} ms and a looped step "
                     f"about {step * 1e6:.0f} µs on the IPU, copies included. Per step, "
                     "every sess.run wastes that many steps' worth of IPU time, which is why "
                     "the loop's simulated speed-up is so large.")
    if steps > exact:
        return not_yet("fewer than that. Read the launch time h (printed above, in ms) and the "
                       "time from one step's start to the next in the zoomed trace (in µs), "
                       "then divide.")
    return not_yet("more than that. Read the launch time h (printed above, in ms) and the time "
                   "from one step's start to the next in the zoomed trace (in µs), then "
                   "divide, minding the units.")


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def split_epoch(run: EngineRun, repeat_count: int) -> ProgramRecord:
    """The looped epoch ``run`` as ``run.iterations // repeat_count`` engine runs of
    ``repeat_count`` steps each: ``ipu.loops.repeat(repeat_count, ...)`` called that often."""
    return ProgramRecord([dataclasses.replace(run, iterations=repeat_count)]
                         * (run.iterations // repeat_count))


def split_launch_share(repeat_count: int, run: Optional[EngineRun] = None) -> float:
    """Share of the split epoch's simulated time spent launching its engine runs."""
    runs = split_epoch(run or REFERENCE_EPOCH, repeat_count).runs
    return simulate_engine_runs(runs, target=TARGET).metrics.host_overhead_fraction


def _smallest_split(run: Optional[EngineRun] = None) -> int:
    steps = (run or REFERENCE_EPOCH).iterations
    return next(n for n in range(1, steps + 1)
                if steps % n == 0 and split_launch_share(n, run) <= LAUNCH_BUDGET)


@exercise("02.split-epoch", solution=_smallest_split, wrong=(1, 5, 10, 125, 0, "25"))
def check_split_epoch(repeat_count, run: Optional[EngineRun] = None):
    """The smallest repeat count, dividing the epoch, for which launching the epoch's engine
    runs takes at most half its simulated time."""
    if not is_whole_number(repeat_count):
        return not_yet("answer with a whole number of steps per engine run, without quotes.")
    steps = (run or REFERENCE_EPOCH).iterations
    if repeat_count < 1:
        return not_yet("ipu.loops.repeat runs its body at least once.")
    if steps % repeat_count:
        return not_yet(f"{repeat_count} does not divide the steps per epoch, so the epoch "
                       "would not be a whole number of engine runs. Try the divisors.")
    share = split_launch_share(repeat_count, run)
    if share > LAUNCH_BUDGET:
        return not_yet(f"with {_steps(repeat_count)} per engine run, launching is {share:.1%} of "
                       "the epoch, over half. Fewer, longer engine runs launch less often.")
    smaller = [n for n in range(1, repeat_count) if steps % n == 0
               and split_launch_share(n, run) <= LAUNCH_BUDGET]
    if smaller:
        return not_yet(f"{repeat_count} steps per engine run keep launching to {share:.1%}, but "
                       "a smaller divisor also stays within half. Which is the smallest?")
    return right(f"{repeat_count} steps per engine run, {steps // repeat_count} engine runs per "
                 f"epoch: launching is {share:.1%} of the epoch. Every engine run pays a whole "
                 "launch, as long as a score of these small steps, so a loop must hold dozens "
                 "of them before launching stops dominating.")


__all__ = ["check_steps_per_launch", "check_split_epoch", "launch_and_step", "split_epoch",
           "split_launch_share", "REFERENCE_EPOCH"]
