"""Notebook 10's exercise beyond the generic checks: the simulated bubble the check judges by
agrees with the formula the notebook teaches, and answers a learner may type get a hint that
says how to find the answer, never which way it lies."""
from fractions import Fraction

from ipu_emulator.exercises import nb10_schedules as nb10


def test_the_simulated_bubbles_follow_the_formula():
    for chunks in (1, 2, 3, 4):
        assert abs(nb10.interleaved_bubble(chunks) - float(Fraction(3, 8 * chunks + 3))) < 1e-12


def test_the_answer_is_the_formulas_answer():
    assert nb10._fewest_chunks() == 4          # 3/(8v+3) < 1/10  <=>  v > 27/8


def test_answers_a_learner_may_type():
    assert "whole number" in nb10.check_chunks_per_ipu(4.0).text
    assert "plain 1F1B" in nb10.check_chunks_per_ipu(0).text


def test_too_few_and_too_many_chunks_get_the_same_hint():
    too_few, too_many = nb10.check_chunks_per_ipu(3).text, nb10.check_chunks_per_ipu(6).text
    assert too_few == too_many and "%" not in too_few.replace("< 0.1", "")
