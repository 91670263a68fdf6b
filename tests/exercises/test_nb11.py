"""Notebook 11's exercises beyond the generic checks: the simulated bubble the checks judge by
agrees with the formulas the notebook teaches, a count exactly on the goal is not under it,
and answers a learner may type get a hint."""
from fractions import Fraction

from ipu_emulator.exercises import nb11_schedules as nb11


def test_the_simulated_bubbles_follow_the_formulas():
    for micro_batches in (8, 50, 133, 134):
        assert abs(nb11.one_f_one_b_bubble(micro_batches)
                   - float(Fraction(7, micro_batches + 7))) < 1e-12
    for chunks in (1, 2, 3, 4):
        assert abs(nb11.interleaved_bubble(chunks) - float(Fraction(3, 8 * chunks + 3))) < 1e-12


def test_the_answers_are_the_formulas_answers():
    # 7/(M+7) < 1/20  <=>  M > 133;   3/(8v+3) < 1/10  <=>  v > 27/8
    assert nb11._fewest_micro_batches() == 134
    assert nb11._fewest_chunks() == 4


def test_a_count_exactly_on_the_goal_is_not_under_it():
    feedback = nb11.check_micro_batches_for_small_bubble(133)
    assert not feedback.ok and "exactly on the goal" in feedback.text


def test_answers_a_learner_may_type():
    assert "whole number" in nb11.check_micro_batches_for_small_bubble(134.0).text
    assert "at least one" in nb11.check_micro_batches_for_small_bubble(-2).text
    assert "fewer would too" in nb11.check_micro_batches_for_small_bubble(200).text
    assert "plain 1F1B" in nb11.check_chunks_per_ipu(0).text
    assert "1 chunk per IPU the simulated bubble is 27.3%" in nb11.check_chunks_per_ipu(1).text
    assert "fewer would too" in nb11.check_chunks_per_ipu(6).text
