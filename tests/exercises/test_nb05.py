"""Notebook 05's exercises beyond the generic tests: the weight updates are counted from the
recorded runs the notebook passes in."""
from types import SimpleNamespace

from ipu_emulator.exercises import nb05_accumulation as exercises


def recorded(runs, iterations, accumulation):
    return SimpleNamespace(runs=[SimpleNamespace(iterations=iterations,
                                                 gradient_accumulation_count=accumulation)
                                 for _ in range(runs)])


def test_updates_are_read_from_the_recorded_runs():
    training = recorded(runs=24, iterations=160, accumulation=16)   # FULL_SIZE = True
    assert exercises.check_weight_updates(240, training).ok
    assert not exercises.check_weight_updates(40, training).ok
    assert "sess.run" in exercises.check_weight_updates(24, training).text


def test_the_smallest_count_divides_the_loop():
    count = exercises._smallest_accepted_count()
    assert exercises.LOOP_ITERATIONS % count == 0
    assert exercises.MINI_BATCH * count >= exercises.AT_LEAST
    assert all(exercises.LOOP_ITERATIONS % smaller or
               exercises.MINI_BATCH * smaller < exercises.AT_LEAST for smaller in range(1, count))
