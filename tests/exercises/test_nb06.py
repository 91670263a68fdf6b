"""Notebook 06's numeric exercise beyond the generic tests: the count it asks for."""
from ipu_emulator.exercises import nb06_accumulation as exercises


def test_the_smallest_count_divides_the_loop():
    count = exercises._smallest_accepted_count()
    assert exercises.LOOP_ITERATIONS % count == 0
    assert exercises.MINI_BATCH * count >= exercises.AT_LEAST
    assert all(exercises.LOOP_ITERATIONS % smaller or
               exercises.MINI_BATCH * smaller < exercises.AT_LEAST for smaller in range(1, count))
