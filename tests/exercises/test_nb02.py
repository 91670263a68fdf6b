"""Notebook 02's exercises judge answers from the looped epoch the notebook passes in."""
import dataclasses

from ipu_emulator.exercises import nb02_loops as exercises


def test_a_launch_is_worth_about_twenty_looped_steps_and_a_reading_may_be_rough():
    launch, step = exercises.launch_and_step()
    assert 1e-3 < launch < 1.1e-3 and 30e-6 < step < 80e-6
    exact = launch / step
    assert exercises.check_steps_per_launch(round(exact)).ok
    assert exercises.check_steps_per_launch(exact * 1.15).ok       # read off a plot
    assert not exercises.check_steps_per_launch(exact * 1.3).ok


def test_the_split_epoch_keeps_every_step_and_the_answer_follows_the_run():
    record = exercises.split_epoch(exercises.REFERENCE_EPOCH, 25)
    assert record.engine_runs == 5 and record.iterations == 125
    answer = exercises._smallest_split()
    assert exercises.split_launch_share(answer) <= exercises.LAUNCH_BUDGET
    # An epoch of 100 steps has other divisors: 20 steps per engine run is judged, not refused.
    shorter = dataclasses.replace(exercises.REFERENCE_EPOCH, iterations=100)
    assert "does not divide" not in exercises.check_split_epoch(20, shorter).text
    assert exercises.check_split_epoch(exercises._smallest_split(shorter), shorter).ok
