"""Exercises with automatic feedback, for the notebooks: plain functions, no grading server.

Each notebook's exercises live in a module of this package (``nb08_playground``,
``nb09_pipelining``, ...).  A "your turn" cell leaves ``...`` where the learner's answer goes and
calls a check::

    from ipu_emulator.exercises import nb08_playground as exercises
    fastest = ...             # your answer
    exercises.check_fastest_schedule(fastest)

A check never raises at the learner: it returns ``Feedback`` (shown as a coloured box), which
says "Right" and why, or "Not yet" with a hint, never the answer.  ``...`` left in place asks
for an answer; an answer of the wrong type, or one whose evaluation fails, gets a hint too.

Solutions are in each notebook, in a ``<details>`` block the learner opens.  The same
solutions are written here as functions, so that the test command can run every notebook
with ``IPU_LAB_SOLUTIONS=1``: each check then fills ``...`` with its solution and raises if
the solution fails, so a solution that drifts from its check fails the tests.

Every answer checked is also noted in the learner's progress file when the class's hub asks
for one (``progress``), so the instructor sees who is stuck.

Pure Python: no TensorFlow, NumPy or widgets import.

    >>> @exercise("doc.demo", solution=lambda: 4, wrong=(3,))
    ... def check_four(answer):
    ...     if answer == 4:
    ...         return right("four it is")
    ...     return not_yet("count the IPUs in the trace")
    >>> check_four(4).ok, check_four(3).text
    (True, 'Not yet. Hint: count the IPUs in the trace')
    >>> check_four(...).text
    'Not yet. Replace ... with your answer, then run the cell again.'
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from html import escape
from typing import Callable, Dict, Optional, Tuple

from ipu_emulator.exercises import progress

SOLUTIONS_VARIABLE = "IPU_LAB_SOLUTIONS"


@dataclass(frozen=True)
class Feedback:
    """What a check says: ``ok`` and a sentence (``text``), displayed as a coloured box."""

    ok: bool
    text: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        colour, border = ("#e8f5e9", "#2e7d32") if self.ok else ("#fff8e1", "#b26a00")
        return (f"<div style='background:{colour};border-left:4px solid {border};"
                f"padding:6px 10px'>{escape(self.text)}</div>")


def right(why: str) -> Feedback:
    return Feedback(True, f"Right: {why}")


def not_yet(hint: str) -> Feedback:
    return Feedback(False, f"Not yet. Hint: {hint}")


def solutions_mode() -> bool:
    """Whether checks fill ``...`` with their solutions (``IPU_LAB_SOLUTIONS=1``)."""
    return os.environ.get(SOLUTIONS_VARIABLE, "") not in ("", "0")


@dataclass(frozen=True)
class Exercise:
    """A registered exercise: its check, its solution and answers it must turn down."""

    name: str
    check: Callable
    solution: Callable
    wrong: Tuple = ()


# "NN.short-name" -> Exercise, for the tests ("doc." names are this module's examples).
REGISTRY: Dict[str, Exercise] = {}


class SolutionFailed(AssertionError):
    """In solutions mode, an exercise's own solution did not pass its check."""


def exercise(name: str, solution: Callable, wrong: Tuple = (),
             hint_on_error: Optional[str] = None):
    """Make ``check(answer, *context)`` an exercise named ``"NN.short-name"`` (NN: its
    notebook): ``...`` asks for an answer (or, in solutions mode, becomes
    ``solution(*context)``); an exception inside the check becomes a hint; in solutions mode a
    failing solution raises ``SolutionFailed``.  ``wrong``: answers the check must turn down
    (the tests try them)."""
    def decorate(check):
        @functools.wraps(check)
        def run(answer=..., *context, **named):
            filled = answer is ... and solutions_mode()
            if filled:
                answer = solution(*context, **named)
            if answer is ...:
                return Feedback(False, "Not yet. Replace ... with your answer, then run the "
                                       "cell again.")
            try:
                feedback = check(answer, *context, **named)
            except Exception as error:  # pylint: disable=broad-except  (a hint, not a traceback)
                feedback = not_yet(hint_on_error or f"checking that answer raised "
                                   f"{type(error).__name__}: {error}")
            progress.record(name, feedback.ok, feedback.text)
            if filled and not feedback.ok:
                raise SolutionFailed(f"the solution of exercise {name!r} fails its check: "
                                     f"{feedback.text}")
            return feedback
        REGISTRY[name] = Exercise(name, run, solution, tuple(wrong))
        run.exercise_name = name
        return run
    return decorate


def is_whole_number(value) -> bool:
    """An ``int`` answer, not ``True``/``False`` (which Python counts as ints).

    >>> is_whole_number(3), is_whole_number(3.0), is_whole_number(True), is_whole_number("3")
    (True, False, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """An ``int`` or ``float`` answer, not ``True``/``False``.

    >>> is_number(0.5), is_number(2), is_number(False), is_number("0.5")
    (True, True, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# How far ``smallest_whole_number`` searches by default: above every answer the exercises
# ask for (the largest, notebook 10's micro-batches, is 134), and a few seconds of simulating
# at most when nothing up to it meets the budget.
SEARCH_LIMIT = 10_000


def smallest_whole_number(holds: Callable[[int], bool], limit: int = SEARCH_LIMIT) -> int:
    """The smallest n from 1 to ``limit`` for which ``holds(n)``, when it holds for every
    larger n too (a share that falls as n grows, under a budget): doubling, then bisection.

    >>> smallest_whole_number(lambda n: 100 / n <= 7)
    15

    When ``holds(limit)`` is false the answer is not there (or the simulator behind ``holds``
    is broken): a ``ValueError`` says so, rather than a search that doubles ``n`` until the
    simulation of it runs out of memory.

    >>> smallest_whole_number(lambda n: False, limit=100)
    Traceback (most recent call last):
    ...
    ValueError: the condition never holds for a whole number from 1 to 100
    """
    if limit < 1:
        raise ValueError(f"the search limit must be at least 1, got {limit}")
    low, high = 0, 1
    while not holds(high):
        if high >= limit:
            raise ValueError(f"the condition never holds for a whole number from 1 to {limit}")
        low, high = high, min(2 * high, limit)
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle
    return high


__all__ = ["Feedback", "right", "not_yet", "exercise", "solutions_mode", "REGISTRY",
           "Exercise", "SOLUTIONS_VARIABLE", "SolutionFailed", "smallest_whole_number",
           "SEARCH_LIMIT"]
