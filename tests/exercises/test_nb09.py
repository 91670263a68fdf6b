"""Notebook 09's exercises beyond the generic checks: the reasons, and answers a learner may
type."""
from ipu_emulator.exercises import nb09_pipelining as nb09


def test_the_schedule_right_and_the_reason_wrong_says_so():
    for reason in ("a", "c"):
        feedback = nb09.check_faster_schedule(("grouped", reason))
        assert not feedback.ok and "schedule is right" in feedback.text
    assert nb09.check_faster_schedule(["Grouped", "B"]).ok        # a list and capitals work
    assert "pair" in nb09.check_faster_schedule("grouped").text


def test_a_percentage_or_a_raising_function_gets_a_hint():
    assert "fraction" in nb09.check_bubble_function(lambda s, m: 100 * (s - 1) / (m + s - 1)).text
    feedback = nb09.check_bubble_function(lambda s: s)
    assert not feedback.ok and "two whole numbers" in feedback.text
