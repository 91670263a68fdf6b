"""Notebook 06's numeric exercise: an accumulation count the compiler accepts.

(The notebook's code exercise, making a program accumulate, is
``ipu_emulator.code_exercises.nb06_accumulation``.)

    >>> check_accumulation_count(12).ok, check_accumulation_count(10).ok
    (True, False)
"""
from __future__ import annotations

import math

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right

# 06.accumulation-count: mini-batches of 32, at least 300 images per update, a loop of 48.
MINI_BATCH = 32
AT_LEAST = 300
LOOP_ITERATIONS = 48


def _smallest_accepted_count() -> int:
    count = math.ceil(AT_LEAST / MINI_BATCH)
    while LOOP_ITERATIONS % count:
        count += 1
    return count


@exercise("06.accumulation-count", solution=_smallest_accepted_count,
          wrong=(10, 9, 16, 24, 48, "12"))
def check_accumulation_count(count):
    """The smallest ``num_mini_batches`` that gives at least 300 images per update with
    mini-batches of 32, in a loop of 48 iterations the compiler accepts."""
    if not is_whole_number(count):
        return not_yet("answer with a whole number of mini-batches, without quotes.")
    if count < 1:
        return not_yet("the optimizer refuses a count below one.")
    effective = MINI_BATCH * count
    if effective < AT_LEAST:
        return not_yet(f"{count} mini-batches of {MINI_BATCH} make {effective} images per "
                       "update: too few.")
    if LOOP_ITERATIONS % count:
        return not_yet(f"{count} mini-batches give enough images, but a loop of "
                       f"{LOOP_ITERATIONS} iterations would stop in the middle of a group: the "
                       "compiler refuses it (see the error above). Which counts divide the "
                       "loop?")
    if count != _smallest_accepted_count():
        return not_yet(f"the compiler accepts {count} and it gives enough images, but a "
                       "smaller count does too. Which is the smallest?")
    return right(f"{count} x {MINI_BATCH} = {effective} images per update, and the loop of "
                 f"{LOOP_ITERATIONS} runs exactly {LOOP_ITERATIONS // count} groups. The "
                 "smaller counts that give enough images do not divide the loop.")


__all__ = ["check_accumulation_count"]
