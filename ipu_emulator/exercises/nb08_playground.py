"""Notebook 08's exercises: the pipeline playground (4 unit-cost stages, backward 2x).

    >>> check_fewest_in_flight("sequential").ok
    True
    >>> check_fewest_in_flight("grouped").ok
    False
"""
from __future__ import annotations

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right
from ipu_emulator.sim.bubbles import textbook_bubble
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError

STAGES = 4
MICRO_BATCHES = 16
BACKWARD_RATIO = 2.0
BUBBLE_GOAL = 0.10


def _peak_in_flight(schedule: str) -> int:
    """Micro-batches IPU0 holds at once, 4 stages x 16 micro-batches, backward 2x."""
    return simulate_pipeline(unit_stages(STAGES), schedule, MICRO_BATCHES, unit_cost=True,
                             backward_ratio=BACKWARD_RATIO).metrics.peak_in_flight[0]


SCHEDULES = ("grouped", "interleaved", "sequential")


@exercise("08.fewest-in-flight", solution=lambda: "sequential",
          wrong=("grouped", "interleaved", "gpipe", 1))
def check_fewest_in_flight(schedule):
    """Which of Graphcore's schedules makes IPU0 hold the fewest micro-batches in flight?"""
    if not isinstance(schedule, str):
        return not_yet("answer with a schedule's name, in quotes: 'grouped', 'interleaved' "
                       "or 'sequential'.")
    name = schedule.strip().lower()
    if name not in SCHEDULES:
        return not_yet(f"{schedule!r} is not one of Graphcore's schedules: 'grouped', "
                       "'interleaved' or 'sequential'.")
    held = {s: _peak_in_flight(s) for s in SCHEDULES}
    if name == min(held, key=held.get):
        return right(f"{name} holds {held[name]} micro-batch at a time (Grouped "
                     f"{held['grouped']}, Interleaved {held['interleaved']}): each micro-batch's "
                     "backward runs before the next forward starts. It pays in time: only one "
                     "IPU works at once, as the next section shows.")
    if name == "grouped":
        return not_yet("Grouped delays every backward to the next group, so IPU0 keeps the most "
                       "activations. Pick each schedule in the playground and read the "
                       "'in flight' strip under IPU0.")
    return not_yet("Interleaved holds fewer than Grouped, but one schedule holds fewer still. "
                   "Pick each schedule in the playground and read the 'in flight' strip under "
                   "IPU0.")


def _smallest_count_below_goal() -> int:
    count = 8
    while textbook_bubble(STAGES, count) >= BUBBLE_GOAL:
        count += 8
    return count


@exercise("08.bubble-below-10-percent", solution=_smallest_count_below_goal,
          wrong=(16, 24, 6, "32"))
def check_accumulation_for_small_bubble(count):
    """The smallest gradient accumulation count Grouped accepts for 4 stages whose bubble is
    under 10 %."""
    if not is_whole_number(count):
        return not_yet("answer with a whole number of micro-batches, without quotes.")
    try:
        timeline = simulate_pipeline(unit_stages(STAGES), "grouped", count, unit_cost=True,
                                     backward_ratio=BACKWARD_RATIO)
    except PipelineConfigurationError as error:
        return not_yet(f"the SDK refuses {count}: {error.message} Try the playground.")
    bubble = timeline.metrics.bubble_fraction
    smaller = count - 8
    if bubble >= BUBBLE_GOAL or (smaller >= 8 and textbook_bubble(STAGES, smaller) < BUBBLE_GOAL):
        # The same words above and below the answer, and no bubble figure: the check is no
        # oracle to search with, the playground's table and the formula are.
        return not_yet("the fill and drain cost S-1 = 3 steps whatever M is, so the bubble "
                       "is (S-1)/(M+S-1). Which is the smallest M that Grouped accepts (a "
                       "multiple of 8) for which that is under 10 %?")
    return right(f"{count} micro-batches: bubble {bubble:.1%} = 3/{count + 3}. Each extra "
                 "micro-batch spreads the same fill and drain over more work.")


__all__ = ["check_fewest_in_flight", "check_accumulation_for_small_bubble"]
