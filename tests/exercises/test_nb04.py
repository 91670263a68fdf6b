"""Notebook 04's exercises beyond the generic tests: the replication rule they teach."""
from ipu_emulator.exercises import nb04_replication as exercises


def test_the_replication_rule_rounds_the_shards_up_to_a_power_of_two():
    assert [exercises._replication_factor(shards, 8) for shards in (1, 2, 3, 4, 5, 8)] == \
        [8, 4, 2, 2, 1, 1]


def test_the_all_reduce_carries_one_float32_per_weight():
    assert exercises._gradient_bytes() == 4 * (784 * 32 + 32 + 32 * 10 + 10) == 101_800


def test_a_count_that_ignores_the_replicas_gets_told_so():
    assert "replicas" in exercises.check_accumulation_for_batch(16).text
