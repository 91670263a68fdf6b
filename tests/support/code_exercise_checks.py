"""What every code exercise's tests assert (``tests/emulator/code_exercises``): a wrong attempt
gets a hint of its own, an untouched or misused check cell asks for code, the notebook's cell
is the starting code, a check keeps the learner's own IPU configuration; and the fixture they
all use (import it into the test module: ``outside_solutions_mode``)."""
import json

import pytest

from ipu_emulator.exercises import SOLUTIONS_VARIABLE


@pytest.fixture(autouse=True)
def outside_solutions_mode(monkeypatch):
    """The tests check what a learner's attempt gets, so they run outside solutions mode:
    `make test` sets IPU_LAB_SOLUTIONS=1 for the notebooks, and in that mode a check runs the
    exercise's solution instead of the attempt (tests that want the mode set it themselves)."""
    monkeypatch.delenv(SOLUTIONS_VARIABLE, raising=False)



def assert_own_hint(feedback, attempt, attempts):
    """``feedback`` for ``attempt`` is a "Not yet" carrying that attempt's words and no other
    attempt's (``attempts``: ``{name: (code, words)}``): each mistake is told apart."""
    text = feedback.text
    assert not feedback.ok and text.startswith("Not yet."), text
    assert attempts[attempt][1] in text, text
    others = [words for name, (_, words) in attempts.items() if name != attempt]
    assert not any(words in text for words in others), text


def assert_right(feedback):
    assert feedback.ok and feedback.text.startswith("Right"), feedback.text


def assert_not_yet(feedback, words):
    """"Not yet" with ``words`` (a phrase of the hint on the attempt's own mistake), and no
    traceback."""
    text = feedback.text
    assert not feedback.ok and text.startswith("Not yet."), text
    assert words in text, text
    assert "Traceback" not in text and 'File "' not in text, text


def assert_asks_for_code(check):
    """Run with nothing, the check asks for code; given a value, not a function, it says to
    pass the function itself."""
    assert "Write your code" in check().text
    assert "without calling it" in check(3).text


def exercise_cell(notebook_path) -> str:
    """The source of the notebook's one cell tagged ``code-exercise``: what a reset restores."""
    notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
    [cell] = [c for c in notebook["cells"] if "code-exercise" in c["metadata"].get("tags", [])]
    return "".join(cell["source"])


def keeping_the_configuration(check, ipus=4):
    """``check()``'s feedback, the check run after the learner configured an IPU system of
    ``ipus`` IPUs in the notebook; asserts that this system is the configured one again after
    the check (which configures its own device for each run)."""
    from ipu_emulator.runtime import configured_system
    from tests.support.ipu_systems import configure_ipus

    configure_ipus(ipus)
    feedback = check()
    assert [d.num_ipus for d in configured_system.current().devices] == [ipus]
    return feedback


__all__ = ["assert_own_hint", "assert_asks_for_code", "outside_solutions_mode", "exercise_cell",
           "keeping_the_configuration"]
