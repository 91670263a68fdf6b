"""Notebook 06's exercises beyond the generic tests: the turns are read from the trace the
notebook passes in, and sharding's idle fraction is what the simulator finds."""
from ipu_emulator.exercises import nb06_sharding as exercises
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages


def test_turns_are_read_from_the_given_trace():
    three = simulate_pipeline(unit_stages(3), "sequential", 4, unit_cost=True)
    assert exercises.check_turns([0, 1, 2, 1, 0], three).ok
    assert not exercises.check_turns([0, 1, 0], three).ok


def test_sharding_idles_one_minus_one_over_the_shards_whatever_the_mini_batches():
    for mini_batches in (8, 16, 64):
        assert abs(exercises._simulated_idle(mini_batches) - exercises._ideal_idle_fraction()) < 1e-9
