"""Every exercise: unsolved it asks for an answer, its solution passes, the wrong answers it
lists are turned down with a hint that does not give the answer away, and nothing raises at
the learner; in solutions mode ``...`` becomes the solution and a failing one raises."""
import importlib
import pkgutil

import pytest

import ipu_emulator.exercises as exercises
from ipu_emulator.exercises import (REGISTRY, SOLUTIONS_VARIABLE, Feedback, SolutionFailed,
                                    exercise, not_yet, right)

for module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"{exercises.__name__}.{module.name}")

EXERCISES = sorted(name for name in REGISTRY if not name.startswith(("doc.", "test.")))


@pytest.mark.parametrize("name", EXERCISES)
def test_unsolved_asks_for_an_answer(name, monkeypatch):
    monkeypatch.delenv(SOLUTIONS_VARIABLE, raising=False)
    feedback = REGISTRY[name].check(...)
    assert isinstance(feedback, Feedback) and not feedback.ok
    assert "Replace ... with your answer" in feedback.text


@pytest.mark.parametrize("name", EXERCISES)
def test_the_solution_passes_and_wrong_answers_get_a_hint(name):
    entry = REGISTRY[name]
    solution = entry.solution()
    assert entry.check(solution).ok
    assert entry.wrong, f"{name} lists no wrong answers to try"
    for answer in entry.wrong:
        feedback = entry.check(answer)
        assert not feedback.ok and feedback.text.startswith("Not yet. Hint: "), (answer, feedback)
        if isinstance(solution, (int, float)) and not isinstance(solution, bool):
            # A hint never gives a number away (a choice among names may list them all).
            assert f"{solution:g}" not in feedback.text.replace(f"{answer}", "")


@pytest.mark.parametrize("name", EXERCISES)
def test_solutions_mode_fills_in_the_solution(name, monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert REGISTRY[name].check(...).ok


def test_a_check_that_raises_gives_a_hint_and_a_failing_solution_raises(monkeypatch):
    @exercise("test.raises", solution=lambda: 0, wrong=(1,))
    def check(answer):
        if answer == 0:
            raise ZeroDivisionError("division by zero")
        return right("fine") if answer == 2 else not_yet("try 2")

    feedback = check(0)
    assert not feedback.ok and "ZeroDivisionError: division by zero" in feedback.text
    assert "<div" in feedback._repr_html_() and check(2)._repr_html_().count("#2e7d32") == 1
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    with pytest.raises(SolutionFailed, match="'test.raises' fails its check"):
        check(...)
    assert check(2).ok  # an answer given is checked as it is


# --- the searches behind the solutions: bounded --------------------------------------------


@pytest.mark.parametrize("answer", [1, 2, 3, 15, 64, 65, 999, 1000])
def test_the_search_finds_the_threshold_and_asks_only_up_to_its_limit(answer):
    asked = []

    def holds(n):
        asked.append(n)
        return n >= answer

    assert exercises.smallest_whole_number(holds, limit=1000) == answer
    assert max(asked) <= 1000
    # Doubling then bisection: about two probes per binary digit of the limit.
    assert len(asked) <= 2 * (1000).bit_length() + 1


@pytest.mark.parametrize("limit", [1, 2, 7, 100, exercises.SEARCH_LIMIT])
def test_a_budget_never_met_is_an_error_after_at_most_the_limit(limit):
    asked = []

    def never(n):
        asked.append(n)
        return False

    with pytest.raises(ValueError, match=f"never holds .* 1 to {limit}$"):
        exercises.smallest_whole_number(never, limit=limit)
    assert max(asked) == limit                  # the limit itself was tried, nothing beyond
    assert len(asked) <= limit.bit_length() + 1

