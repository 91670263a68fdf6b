"""Notebook 04's exercise beyond the generic checks: it judges by the same simulation as the
feeds explorer the notebook shows, and its feedback cannot be used as a countdown."""
from ipu_emulator.exercises import nb04_feeds as nb04
from ipu_lab_widgets.feeds_explorer import FeedsConfig, simulate


def test_the_check_sees_what_the_explorer_shows():
    for steps_per_execution in (10, nb04._break_even()):
        explorer = simulate(FeedsConfig(host="ideal host",
                                        steps_per_execution=steps_per_execution))
        assert abs(explorer.with_feeds.launch_fraction
                   - nb04.ideal_launch_share(steps_per_execution)) < 1e-12


def test_break_even_is_where_launching_falls_to_half():
    answer = nb04._break_even()
    assert nb04.ideal_launch_share(answer) <= 0.5 < nb04.ideal_launch_share(answer - 1)


def test_a_wrong_answer_gets_the_method_never_its_share_or_a_direction():
    answer = nb04._break_even()
    wrong = [1, 10, answer - 1, answer + 1, 100, 5000]
    hints = {nb04.check_break_even(n).text for n in wrong}
    assert len(hints) == 1, "the same hint whatever the number: nothing to count down with"
    [hint] = hints
    assert "%" not in hint.replace("50 %", ""), "no launch share but the target"
    for direction in ("larger", "smaller", "fewer", "more", "higher", "lower", "too "):
        assert direction not in hint, direction
    assert "compare one launch with one step" in hint


def test_answers_a_learner_may_type():
    assert "whole number" in nb04.check_break_even(64.0).text
    assert "from 1" in nb04.check_break_even(20_000).text
