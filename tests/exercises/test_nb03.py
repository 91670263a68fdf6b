"""Notebook 03's exercises simulate exactly what the notebook's feeds explorer simulates."""
import pytest

from ipu_emulator.exercises import nb03_feeds as exercises
from ipu_emulator.sim.hardware import HostModel
from ipu_lab_widgets.feeds_explorer import FeedsConfig, simulate

RECORDED = exercises.REFERENCE_STEP_COST


@pytest.mark.parametrize("steps_per_execution", [1, 10, 37, 300])
def test_the_launch_share_is_the_feeds_explorers(steps_per_execution):
    result = simulate(FeedsConfig(steps_per_execution=steps_per_execution, step_cost=RECORDED))
    assert exercises.launch_fraction(steps_per_execution) == pytest.approx(
        result.with_feeds.launch_fraction)


def test_the_ideal_host_ratio_is_the_feeds_explorers_and_far_above_the_tutorials():
    result = simulate(FeedsConfig(host="ideal host", step_cost=RECORDED))
    assert exercises.ideal_host_ratio() == pytest.approx(result.speedup)
    tutorial = simulate(FeedsConfig(step_cost=RECORDED))
    assert exercises.without_feeds(host=HostModel.tutorial3()) == pytest.approx(
        tutorial.without_feeds.total_seconds)
    assert exercises.ideal_host_ratio() > 3 * tutorial.speedup


def test_the_answer_follows_the_step_cost_passed_in():
    for step_cost in (exercises.tutorial3_step_cost(), RECORDED.scaled(50)):
        answer = exercises._fewest_steps_per_execution(step_cost)
        assert exercises.check_steps_per_execution(answer, step_cost).ok
        assert exercises.launch_fraction(answer - 1, step_cost) > exercises.LAUNCH_BUDGET
        ratio = exercises.ideal_host_ratio(step_cost)
        assert exercises.check_ideal_host_ratio(ratio, step_cost).ok
