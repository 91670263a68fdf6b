"""Notebook 09's exercises: pipelining the tutorial's classifier over two IPUs (step 3).

Each check judges with the pure simulator: pipelines of equal stages in unit-cost mode.

    >>> check_faster_schedule(("grouped", "b")).ok
    True
    >>> check_faster_schedule(("interleaved", "b")).ok
    False
"""
from __future__ import annotations

from numbers import Real

from ipu_emulator.exercises import exercise, not_yet, right
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages

# The tutorial's diagrams: four equal stages, 16 micro-batches.
STAGES = 4
MICRO_BATCHES = 16


def _diagram(schedule: str, backward_ratio: float):
    return simulate_pipeline(unit_stages(STAGES), schedule, MICRO_BATCHES, unit_cost=True,
                             backward_ratio=backward_ratio)


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


# --- 1. Which schedule finishes first when a backward takes twice a forward, and why ------

REASONS = {
    "a": "Grouped's first micro-batch finishes its backward pass sooner",
    "b": "under Interleaved each IPU alternates a short forward and a long backward, so "
         "neighbouring stages fall out of step and wait for each other",
    "c": "Grouped runs fewer forward and backward passes",
}


@exercise("09.faster-schedule", solution=lambda: ("grouped", "b"),
          wrong=(("interleaved", "b"), ("grouped", "a"), ("grouped", "c"), "grouped",
                 ("sequential", "b")))
def check_faster_schedule(answer):
    """``(schedule, reason)``: the schedule that finishes 16 micro-batches through four equal
    stages first when a backward pass takes twice a forward pass, and the letter of the
    reason."""
    if isinstance(answer, str) or not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return not_yet("answer with a pair in brackets: the schedule's name and the letter of "
                       "the reason, like ('sequential', 'c').")
    schedule, reason = (str(part).strip().lower() for part in answer)
    makespans = {name: _diagram(name, 2.0).metrics.makespan
                 for name in ("grouped", "interleaved", "sequential")}
    if schedule not in makespans:
        return not_yet(f"{answer[0]!r} is not one of Graphcore's schedules: 'grouped', "
                       "'interleaved' or 'sequential'.")
    if schedule != min(makespans, key=makespans.get):
        return not_yet("simulate both schedules with backward_ratio=2.0 and compare their "
                       "makespans (metrics.makespan, in steps).")
    if reason not in REASONS:
        return not_yet("the schedule is right; now give the letter of the reason: 'a', 'b' "
                       "or 'c'.")
    if reason == "a":
        return not_yet("the schedule is right, but follow micro-batch 0 in the diagram above: "
                       "whose backward pass ends sooner?")
    if reason == "c":
        return not_yet("the schedule is right, but count the boxes: both schedules run every "
                       "micro-batch's forward and backward pass once on every IPU.")
    return right(f"Grouped takes {makespans['grouped']:g} steps, Interleaved "
                 f"{makespans['interleaved']:g}. Grouped's IPUs all run forwards, then all run "
                 "backwards, so in every step they do work of the same length. Under "
                 "Interleaved an IPU running a one-step forward waits for its neighbour's "
                 "two-step backward: that idle time is the imbalance in its bubble split.")


# --- 2. The textbook bubble fraction --------------------------------------------------------

BUBBLE_CASES = ((2, 16), (2, 4), (4, 16), (4, 32), (3, 12), (8, 16))


def _textbook(stages: int, micro_batches: int) -> float:
    return (stages - 1) / (micro_batches + stages - 1)


def _simulated_bubble(stages: int, micro_batches: int) -> float:
    return simulate_pipeline(unit_stages(stages), "grouped", micro_batches,
                             unit_cost=True).metrics.bubble_fraction


@exercise("09.textbook-bubble", solution=lambda: _textbook,
          wrong=(lambda s, m: (s - 1) / m, lambda s, m: (s - 1) / (m + s), lambda s, m: 0.0,
                 0.0588),
          hint_on_error="your function raised an error. It receives two whole numbers, the "
                        "stages S and the micro-batches M, and returns a fraction.")
def check_bubble_function(function):
    """A function ``(stages, micro_batches) -> bubble fraction`` for equal stages, unit cost."""
    if not callable(function):
        return not_yet("answer with a function of two numbers, S and M, e.g. one written "
                       "with def or lambda.")
    for stages, micro_batches in BUBBLE_CASES:
        expected = _simulated_bubble(stages, micro_batches)
        got = function(stages, micro_batches)
        if not _is_number(got):
            return not_yet(f"for S={stages}, M={micro_batches} your function returned "
                           f"{got!r}, not a number.")
        if abs(got - 100 * expected) < 1e-6 and expected > 0:
            return not_yet("return a fraction (0.5 for half), not a percentage.")
        if abs(got - expected) > 1e-9:
            return not_yet(f"for S={stages} stages and M={micro_batches} micro-batches the "
                           f"simulator finds a bubble of {expected:.2%}, your function "
                           f"{float(got):.2%}. Count the steps of one pass: M+S-1 of them, and "
                           "in how many is each IPU idle?")
    return right("the simulator agrees for every case tried. Each IPU idles S-1 steps while "
                 "the pipeline fills and drains, out of M+S-1 steps per pass. For this "
                 "notebook's 2 stages and 16 micro-batches that is 1/17 = 5.9 %, close to "
                 "the ramp-up plus ramp-down of the recorded pass 0. The formula leaves out "
                 "communication and imbalance, which real stages add.")


__all__ = ["check_faster_schedule", "check_bubble_function"]
