"""One pass cut out of a pipeline's engine run, for side-by-side lessons."""
import pytest

from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.bubbles import bubble_breakdown
from ipu_emulator.sim.passes import one_pass
from ipu_emulator.sim.pipeline_simulator import IN_FLIGHT_COUNTER, simulate_pipeline, unit_stages
from ipu_emulator.sim.timeline import simulate_engine_runs


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "1f1b"])
def test_a_pass_of_a_repeated_run_is_the_single_pass_run(schedule):
    single = simulate_pipeline(unit_stages(4), schedule, 8, unit_cost=True)
    repeated = simulate_pipeline(unit_stages(4), schedule, 8, repeat_count=3, unit_cost=True)
    for index in range(3):
        cut = one_pass(repeated, index)
        assert cut.metrics.makespan == single.metrics.makespan
        assert cut.metrics.bubble_fraction == pytest.approx(single.metrics.bubble_fraction)
        assert sorted((e.lane, e.name, e.start, e.end) for e in cut.events) == sorted(
            (e.lane, e.name, e.start, e.end) for e in single.events)
        assert [name for name, _, _ in cut.phases] == [name for name, _, _ in single.phases]


def test_a_pass_with_real_costs_drops_the_host_and_keeps_its_counters():
    stages = cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                    ("dense32",), 32)
    run = simulate_pipeline(stages, "grouped", 16, repeat_count=2, batch_size=32,
                            synthetic_data=True)
    cut = one_pass(run, 1, title="second pass")
    assert cut.lanes == ["IPU0", "IPU1"] and cut.title == "second pass"
    assert min(e.start for e in cut.events) == 0
    assert cut.metrics.makespan < run.metrics.makespan / 2  # no launch, one pass of two
    assert bubble_breakdown(cut)["host"] == pytest.approx(0, abs=1e-12)
    in_flight = [s for s in cut.counters if s.name == IN_FLIGHT_COUNTER and s.lane == "IPU0"]
    assert in_flight[0].time == 0 and max(s.value for s in in_flight) == 3


def test_asking_for_a_pass_that_is_not_there_says_what_is():
    run = simulate_pipeline(unit_stages(2), "grouped", 4, repeat_count=2, unit_cost=True)
    with pytest.raises(ValueError, match=r"one_pass\(5\): this timeline has passes 0 to 1\."):
        one_pass(run, 5)
    looped = simulate_engine_runs([EngineRun("step", 3, ComputeCost(forward_flops=1e9))])
    with pytest.raises(ValueError, match="is not a pipeline"):
        one_pass(looped)
