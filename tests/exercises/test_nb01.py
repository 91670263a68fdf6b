"""Notebook 01's exercises judge answers from the run the notebook passes in."""
import dataclasses

from ipu_emulator.exercises import nb01_porting as exercises


def test_the_bound_is_c_over_c_plus_h_and_follows_the_run_passed_in():
    compute, launch = exercises.compute_and_launch()
    assert compute < launch / 10            # a small step against a ~1 ms launch
    bound = compute / (compute + launch)
    assert exercises.check_busy_bound(bound).ok
    assert not exercises.check_busy_bound(compute / launch * 1.05).ok
    # A step with eight times the work: its own bound, not the reference one.
    heavier = dataclasses.replace(exercises.REFERENCE_STEP,
                                  step_cost=exercises.REFERENCE_STEP.step_cost.scaled(8))
    heavy_compute, heavy_launch = exercises.compute_and_launch(heavier)
    heavy_bound = heavy_compute / (heavy_compute + heavy_launch)
    assert exercises.check_busy_bound(heavy_bound, heavier).ok
    assert not exercises.check_busy_bound(bound, heavier).ok


def test_the_fewest_steps_meet_the_budget_and_one_fewer_does_not():
    steps = exercises._fewest_steps()
    assert exercises.launch_share(steps) <= exercises.LAUNCH_BUDGET
    assert exercises.launch_share(steps - 1) > exercises.LAUNCH_BUDGET
    feedback = exercises.check_steps_per_run(steps - 1)
    assert not feedback.ok and "over the budget" in feedback.text
    assert "fewer" in exercises.check_steps_per_run(steps + 1).text
