"""One harness for every code exercise: an exercise is data, its check is the same loop.

An ``Exercise`` is its starting code, its reference solution, how a program is run and read
(``run``: the learner's and the reference's alike, through ``run_attempt`` or its own session,
into facts), what the task leaves free, and its ordered ``rules``: each names one fact the
tutorial's tasks fix, in their order, and says what differs with a hint when the learner's
run does not agree with it.  ``judge`` runs the learner's program and answers with the first
rule that differs, or with the exercise's "Right" text, written from the learner's own run.

Rules read the facts of one run; those that compare it with the reference's run (the
weights, the values returned) read ``facts.reference``, run once per process on first use
(a check given the solution itself takes that run as the reference's: solutions mode).
``probes`` are the smallest wrong changes to the reference's facts, one or more per rule: the
tests apply each to the reference run and expect its rule to be the first to answer, so a
rule that lets a boundary through (one engine run too many, a layer on both IPUs) fails.
"""
from __future__ import annotations

import copy
import operator
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from ipu_emulator import record
from ipu_emulator.code_exercises import code_exercise
from ipu_emulator.code_exercises.reference import Facts, reference_run, remember_reference_run
from ipu_emulator.exercises import Feedback, not_yet, right


@dataclass(frozen=True)
class Rule:
    """One fact the task fixes: ``differs(facts)`` is None when the learner's run agrees,
    else the "Not yet" with what differs, in the learner's numbers, and the hint."""

    fact: str
    differs: Callable[[Facts], Optional[Feedback]]


@dataclass(frozen=True)
class Probe:
    """The smallest wrong change to the reference run's facts that rule ``rule`` must
    catch: ``change(facts)`` returns changed facts (``changed`` makes copies)."""

    rule: str
    change: Callable[[Facts], Facts]
    what: str


@dataclass(frozen=True)
class Exercise:
    """A code exercise as data (see the module's docstring)."""

    name: str                          # "NN.short-name", as progress notes it
    starting_code: str
    solution: Callable
    run: Callable[..., Facts]          # runs a program (learner's or reference's) into facts
    rules: Tuple[Rule, ...]
    right: Callable[[Facts], str]      # the "Right" text, from the learner's run
    call: str                          # how the check is called: "check_port(train)"
    free: Tuple[str, ...] = ()         # what the task leaves to the learner
    probes: Tuple[Probe, ...] = ()
    arguments: int = 1                 # the functions the check takes

    def reference(self) -> Facts:
        return reference_run(self.name, lambda: self.facts_of(self.solution))

    def facts_of(self, program) -> Facts:
        """Run ``program`` (a function; a tuple of them for an exercise of several) and read
        its facts."""
        facts = self.run(*program) if isinstance(program, tuple) else self.run(program)
        facts.exercise = self
        return facts

    def is_solution(self, program) -> bool:
        """Whether ``program`` is the reference solution's own function (its tuple, for an
        exercise of several)."""
        solution = self.solution
        if isinstance(program, tuple) and isinstance(solution, tuple):
            return len(program) == len(solution) and all(map(operator.is_, program, solution))
        return program is solution

    def first_difference(self, facts: Facts) -> Tuple[Optional[Rule], Optional[Feedback]]:
        """The first rule the run does not meet and its "Not yet", or ``(None, None)``."""
        for rule in self.rules:
            said = rule.differs(facts)
            if said is not None:
                return rule, said
        return None, None

    def verdict(self, facts: Facts) -> Feedback:
        _, said = self.first_difference(facts)
        return said if said is not None else right(self.right(facts))

    def judge(self, *programs) -> Feedback:
        """The verdict on the learner's functions (the solution's tuple, in solutions mode)."""
        if programs and isinstance(programs[0], tuple):   # the solution, in place of the
            programs = programs[0]                         # first of the learner's functions
        if len(programs) != self.arguments or not all(map(callable, programs)):
            what = ("the function itself," if self.arguments == 1 else
                    f"{'both' if self.arguments == 2 else 'all'} functions, each")
            return not_yet(f"pass {what} without calling it: {self.call}.")
        program = programs if len(programs) > 1 else programs[0]
        facts = self.facts_of(program)
        if self.is_solution(program):
            # The solution itself (solutions mode; an instructor's run-through): its run is
            # the reference's, which would otherwise run the same program a second time.
            remember_reference_run(self.name, facts)
        return self.verdict(facts)


def check_of(exercise: Exercise, name: str, doc: str):
    """The notebook's check for ``exercise``, named ``name`` (``code_exercise`` adds the
    solutions mode, stale-cell refusal and the folding of errors)."""
    def check(*programs):
        return exercise.judge(*programs)
    check.__name__ = check.__qualname__ = name
    left = f"\n\nLeft to you: {'; '.join(exercise.free)}." if exercise.free else ""
    check.__doc__ = doc + left   # help(check) says what the task leaves free
    check = code_exercise(exercise.name, solution=exercise.solution)(check)
    check.exercise = exercise
    return check


def changed(facts, **values):
    """A copy of ``facts`` (any object) with ``values`` set: for probes."""
    copied = copy.copy(facts)
    for key, value in values.items():
        object.__setattr__(copied, key, value)
    return copied


# Probes of facts that hold the record of their engine runs (``facts.runs``, as a ProgramRun).

def with_engine_runs(facts, runs):
    """``facts`` with ``runs`` (``EngineRun`` records) for its engine runs."""
    return changed(facts, runs=record.ProgramRecord(list(runs)))


def last_run_changed(facts, **values):
    """``facts`` with its last engine run's record changed by ``values``."""
    runs = facts.runs.runs
    return with_engine_runs(facts, runs[:-1] + [changed(runs[-1], **values)])


def engine_runs_like_last(facts, count: int, **values):
    """``facts`` with ``count`` engine runs like its last (changed by ``values``)."""
    return with_engine_runs(facts, [changed(facts.runs.runs[-1], **values)] * count)


__all__ = ["Facts", "Rule", "Probe", "Exercise", "check_of", "changed", "with_engine_runs",
           "last_run_changed", "engine_runs_like_last"]
