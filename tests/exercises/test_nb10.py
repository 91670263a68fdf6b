"""Notebook 10's exercises beyond the generic checks: they judge by the same simulation as the
feeds explorer the notebook shows, the shortcut for one 10,000-step engine run agrees with
simulating it, and answers a learner may type get a hint."""
from ipu_emulator.exercises import nb10_feeds as nb10
from ipu_emulator.exercises.nb03_feeds import STEPS, tutorial3_step_cost, with_feeds
from ipu_emulator.sim.hardware import HostModel
from ipu_lab_widgets.feeds_explorer import FeedsConfig, simulate


def test_the_checks_see_what_the_explorer_shows():
    for steps_per_execution in (10, nb10._break_even()):
        explorer = simulate(FeedsConfig(host="ideal host",
                                        steps_per_execution=steps_per_execution))
        assert abs(explorer.with_feeds.launch_fraction
                   - nb10.ideal_launch_share(steps_per_execution)) < 1e-12
    one_run = simulate(FeedsConfig(steps_per_execution=1000))  # 10 runs of 1,000 steps
    assert abs(one_run.speedup - nb10.most_speed_up()) < 0.01


def test_one_long_engine_run_is_the_short_runs_line():
    for host in (HostModel(), HostModel.tutorial3()):
        simulated, _ = with_feeds(STEPS, tutorial3_step_cost(), host)   # one run of all steps
        assert abs(nb10.one_run_seconds(STEPS, host) / simulated - 1) < 1e-9


def test_break_even_is_where_launching_falls_to_half():
    answer = nb10._break_even()
    assert nb10.ideal_launch_share(answer) <= 0.5 < nb10.ideal_launch_share(answer - 1)
    assert "fewer would too" in nb10.check_break_even(answer + 1).text


def test_answers_a_learner_may_type():
    assert "whole number" in nb10.check_break_even(64.0).text
    assert "from 1" in nb10.check_break_even(20_000).text
    assert "tutorial's 10 steps" in nb10.check_most_speed_up(1.63).text
    assert "ideal host" in nb10.check_most_speed_up(60).text
    assert "above 1" in nb10.check_most_speed_up(0.6).text
    assert nb10.check_most_speed_up(round(nb10.most_speed_up(), 2)).ok
