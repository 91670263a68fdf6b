"""Notebook 05's exercises: gradient accumulation on one IPU.

    >>> check_weight_updates(40).ok, check_weight_updates(640).ok
    (True, False)
    >>> check_accumulation_count(12).ok, check_accumulation_count(10).ok
    (True, False)
    >>> check_sum_learning_rate(0.08).ok
    True
"""
from __future__ import annotations

import math

from ipu_emulator.exercises import exercise, is_number, is_whole_number, not_yet, right

# The notebook's settings (FULL_SIZE = False): 20 runs of 2 updates of 16 mini-batches.
RUNS = 20
REPEAT_COUNT = 2
BATCHES_TO_ACCUMULATE = 16



def _updates_in(training=None) -> int:
    """Weight updates made by the recorded engine runs (``record.capture()``'s result), or by
    the notebook's default settings."""
    if training is None:
        return RUNS * REPEAT_COUNT
    return sum(run.iterations // max(1, run.gradient_accumulation_count)
               for run in training.runs)


def _steps_in(training=None) -> int:
    if training is None:
        return RUNS * REPEAT_COUNT * BATCHES_TO_ACCUMULATE
    return sum(run.iterations for run in training.runs)


@exercise("05.weight-updates", solution=_updates_in, wrong=(640, 20, 2, 16, "40"))
def check_weight_updates(updates, training=None):
    """How many times the training loop changed the weights; ``training``: the recorded runs
    of the loop (optional; the notebook's settings otherwise)."""
    if not is_whole_number(updates):
        return not_yet("answer with a whole number of updates, without quotes.")
    expected, steps = _updates_in(training), _steps_in(training)
    if updates == expected:
        return right(f"{steps} loop iterations (mini-batches), but the optimizer changes the "
                     f"weights only at the end of each group of accumulated mini-batches: "
                     f"{expected} updates, each one on the gradients of a whole group.")
    if updates == steps:
        return not_yet("that counts every mini-batch. The weights change once per group of "
                       "accumulated mini-batches.")
    if training is not None and updates == len(training.runs):
        return not_yet("that counts the sess.run calls. How many weight updates does each "
                       "run make?")
    return not_yet("count the loop iterations of all the runs, then divide by the mini-batches "
                   "accumulated per update.")


# 05.accumulation-count: mini-batches of 32, at least 300 images per update, a loop of 48.
MINI_BATCH = 32
AT_LEAST = 300
LOOP_ITERATIONS = 48


def _smallest_accepted_count() -> int:
    count = math.ceil(AT_LEAST / MINI_BATCH)
    while LOOP_ITERATIONS % count:
        count += 1
    return count


@exercise("05.accumulation-count", solution=_smallest_accepted_count,
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


# 05.sum-learning-rate: accumulate 8 mini-batches with the default SUM at 0.01.
SUM_COUNT = 8
SUM_RATE = 0.01


@exercise("05.sum-learning-rate", solution=lambda: SUM_COUNT * SUM_RATE,
          wrong=(0.01, 0.00125, 0.8, "0.08"))
def check_sum_learning_rate(rate):
    """The learning rate at which one step on the 8-times larger batch makes the same update
    as accumulating 8 mini-batches with ``reduction_method="SUM"`` at 0.01."""
    if not is_number(rate):
        return not_yet("answer with a number, without quotes.")
    expected = SUM_COUNT * SUM_RATE
    if math.isclose(rate, expected, rel_tol=1e-6):
        return right(f"the big batch's gradient is the mean of the {SUM_COUNT} mini-batch "
                     f"gradients, SUM hands the optimizer their sum, {SUM_COUNT} times more, "
                     f"so the big batch needs {SUM_COUNT} x {SUM_RATE} = {rate:g}. With MEAN "
                     "the two learning rates would be the same.")
    if math.isclose(rate, SUM_RATE, rel_tol=1e-6):
        return not_yet("the same learning rate is right for MEAN. SUM hands the optimizer "
                       "the sum of the gradients, not their mean: which update is larger?")
    if rate < SUM_RATE:
        return not_yet("SUM makes the accumulated update larger than the big batch's at the "
                       "same learning rate, so the big batch needs a larger one, not a "
                       "smaller one.")
    return not_yet("by how many times is the sum of the mini-batch gradients larger than "
                   "their mean?")


__all__ = ["check_weight_updates", "check_accumulation_count", "check_sum_learning_rate"]
