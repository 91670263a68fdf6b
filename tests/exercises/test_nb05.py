"""Notebook 05's numeric exercise beyond the generic tests: the size it asks about."""
from ipu_emulator.exercises import nb05_replication as exercises


def test_the_all_reduce_carries_one_float32_per_weight():
    assert exercises._gradient_bytes() == 4 * (784 * 32 + 32 + 32 * 10 + 10) == 101_800


def test_an_answer_that_scales_with_the_mini_batch_gets_told_what_the_bytes_count():
    assert "per update, averaged over the images" in exercises.check_all_reduce_bytes(203_600).text
