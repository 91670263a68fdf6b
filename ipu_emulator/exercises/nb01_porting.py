"""Notebook 01's exercises: one ``sess.run`` per training step, and what its launches cost.

Both checks judge an answer against the simulator, from the engine run the notebook recorded
(passed as ``run``); without it they use ``REFERENCE_STEP``, one step of notebook 01's model
as the emulator recorded it (batches of 32, Adam).

    >>> check_busy_bound(0.5).ok
    False
    >>> check_steps_per_run(_fewest_steps()).ok
    True
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ipu_emulator.exercises import (exercise, is_number, is_whole_number, not_yet, right,
                                    smallest_whole_number)
from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim.timeline import simulate_engine_runs

TARGET = "ipu2"
COMPUTE_KINDS = ("forward", "backward", "weight_update")
# Launching engine runs may take at most this share of the simulated time.
LAUNCH_BUDGET = 0.25
# A number computed from the two printed figures lands this close (relative) to the exact one.
BOUND_TOLERANCE = 0.01

# One training step of notebook 01's model (two 8-filter 3x3 convolutions and a dense layer,
# batches of 32 float32 images, Adam), as the emulator recorded it from the TensorFlow graph.
REFERENCE_STEP = EngineRun(
    "program_1", iterations=1,
    step_cost=ComputeCost(forward_flops=37523616.0, backward_flops=73859813.0,
                          weight_update_flops=760728.0, bytes_accessed=26598097.0,
                          parameter_bytes=760736, activation_bytes=5581576,
                          phase_bytes=(11262685.0, 13560236.0, 1775176.0),
                          gradient_bytes=253576, phase_op_cycles=(28030.0, 16000.0, 3660.0)),
    input_bytes=100480, output_bytes=4)


def compute_and_launch(run: Optional[EngineRun] = None):
    """``(c, h)``: simulated IPU compute and host launch time of one step run alone."""
    run = run or REFERENCE_STEP
    metrics = simulate_engine_runs([dataclasses.replace(run, iterations=1)],
                                   target=TARGET).metrics
    compute = sum(metrics.busy_time_by_kind[0].get(kind, 0.0) for kind in COMPUTE_KINDS)
    return compute, metrics.host_overhead_time


def _busy_bound(run: Optional[EngineRun] = None) -> float:
    compute, launch = compute_and_launch(run)
    return compute / (compute + launch)


@exercise("01.busy-bound", solution=_busy_bound, wrong=(0.96, 0.042, 0.5, 4.0, "0.04"))
def check_busy_bound(bound, run: Optional[EngineRun] = None):
    """The most the IPU can compute, as a fraction of the time, with one sess.run per step:
    c / (c + h), from the per-step figures the notebook prints."""
    if not is_number(bound):
        return not_yet("answer with a number (a fraction between 0 and 1), without quotes.")
    if not 0 < bound < 1:
        return not_yet("give the bound as a fraction between 0 and 1 (50 % would be 0.5).")
    compute, launch = compute_and_launch(run)
    exact = compute / (compute + launch)
    if abs(bound / exact - 1) <= BOUND_TOLERANCE:
        return right(f"c / (c + h) = {exact:.2%}. Even if the copies and syncs took no time, "
                     "the IPU would compute only that share of each step: the rest of every "
                     "step is the host launching the next engine run. The measured "
                     "utilisation is a little lower, because the copies do take time.")
    if abs(bound / (launch / (compute + launch)) - 1) <= BOUND_TOLERANCE:
        return not_yet("that is the share of the time spent launching, h / (c + h). The "
                       "question asks for the share the IPU can spend computing.")
    if abs(bound / (compute / launch) - 1) <= 2 * BOUND_TOLERANCE:
        return not_yet("close, but that is c / h. A step lasts the launch plus the compute, "
                       "so divide c by their sum.")
    return not_yet("take c, the IPU compute per step, and h, the host launch per step, from "
                   "the cell above (both in µs), and compute c / (c + h).")


def looped(run: EngineRun, steps: int) -> EngineRun:
    """``run``'s step done ``steps`` times in one engine run, each batch streamed in by an
    infeed (the notebook's what-if)."""
    return dataclasses.replace(run, iterations=steps,
                               infeed_bytes_per_iteration=run.input_bytes, input_bytes=0)


def launch_share(steps: int, run: Optional[EngineRun] = None) -> float:
    """Share of one looped engine run's simulated time spent launching it."""
    return simulate_engine_runs([looped(run or REFERENCE_STEP, steps)],
                                target=TARGET).metrics.host_overhead_fraction


def _fewest_steps(run: Optional[EngineRun] = None) -> int:
    return smallest_whole_number(lambda steps: launch_share(steps, run) <= LAUNCH_BUDGET)


@exercise("01.steps-per-run", solution=_fewest_steps, wrong=(10, 125, 1000, 0, "60"))
def check_steps_per_run(steps, run: Optional[EngineRun] = None):
    """The fewest steps one engine run must hold for launching to take at most a quarter of
    its simulated time."""
    if not is_whole_number(steps):
        return not_yet("answer with a whole number of steps, without quotes.")
    if steps < 1:
        return not_yet("an engine run holds at least one step.")
    share = launch_share(steps, run)
    if share > LAUNCH_BUDGET:
        plural = "s" if steps > 1 else ""
        return not_yet(f"with {steps} step{plural} per engine run, launching it is "
                       f"{share:.1%} of the time, over the budget. More steps share the same "
                       "launch: simulate looped(steps) for larger counts.")
    if steps > 1 and launch_share(steps - 1, run) <= LAUNCH_BUDGET:
        return not_yet(f"{steps} steps meet the budget (launching is {share:.1%}), but fewer "
                       "would too. Which is the smallest count that does?")
    return right(f"{steps} steps per engine run: launching is {share:.1%} of the time, one "
                 "step fewer and it is over a quarter. One launch lasts as long as about twenty "
                 "of this model's steps, so it takes dozens of steps to make it a small share: "
                 "notebook 02 runs a whole epoch per launch.")


__all__ = ["check_busy_bound", "check_steps_per_run", "compute_and_launch", "looped",
           "launch_share", "REFERENCE_STEP"]
