"""Notebook 08's bubble exercise: a count too small and one too large get the same hint, with
no bubble figure to search by (the playground's table and the formula are the learner's
tools); a count Grouped refuses gets the SDK's message."""
from ipu_emulator.exercises import nb08_playground as nb08


def test_too_small_and_too_large_get_the_same_hint():
    too_small = nb08.check_accumulation_for_small_bubble(24).text
    too_large = nb08.check_accumulation_for_small_bubble(40).text
    assert too_small == too_large and "%" not in too_small.replace("10 %", "")
    assert nb08.check_accumulation_for_small_bubble(32).ok


def test_a_count_grouped_refuses_gets_the_sdks_message():
    assert "must be a multiple of 8, but it is 30" in \
        nb08.check_accumulation_for_small_bubble(30).text
