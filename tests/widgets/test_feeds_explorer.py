"""FeedsExplorer: steps per execution against the host's launch overhead (pure simulator)."""
import subprocess
import sys

import pytest

from ipu_emulator.sim import hardware
from widgets.feeds_explorer import (FeedsConfig, FeedsExplorer, simulate, sweep,
                                    tutorial3_step_cost)


def test_reproduces_tutorial_3_within_15_percent():
    result = simulate(FeedsConfig())  # 10,000 steps, 10 per execution, tutorial 3's host
    assert result.ok, result.error
    published_with, published_without = hardware.TUTORIAL3_LOOPED[1], hardware.TUTORIAL3_PER_STEP[1]
    assert result.with_feeds.total_seconds == pytest.approx(published_with, rel=0.15)
    assert result.without_feeds.total_seconds == pytest.approx(published_without, rel=0.15)
    assert result.speedup == pytest.approx(published_without / published_with, rel=0.15)
    assert result.with_feeds.engine_runs == 1_000
    assert result.without_feeds.engine_runs == 10_000


def test_launch_overhead_shrinks_as_steps_per_execution_grow():
    fractions = [simulate(FeedsConfig(steps_per_execution=n)).with_feeds.launch_fraction
                 for n in (1, 2, 5, 10, 100, 1000)]
    assert all(a > b for a, b in zip(fractions, fractions[1:]))
    totals = [seconds for _, seconds in sweep(FeedsConfig())]
    assert all(a >= b for a, b in zip(totals, totals[1:]))
    one = simulate(FeedsConfig(steps_per_execution=1))
    assert one.with_feeds.total_seconds == pytest.approx(one.without_feeds.total_seconds, rel=0.01)


def test_an_ideal_host_makes_feeds_matter_even_more():
    tutorial = simulate(FeedsConfig())
    ideal = simulate(FeedsConfig(host="ideal host"))
    assert ideal.speedup > 2 * tutorial.speedup


def test_a_remainder_becomes_one_shorter_engine_run():
    result = simulate(FeedsConfig(steps=25, steps_per_execution=10))
    assert result.with_feeds.engine_runs == 3
    full = simulate(FeedsConfig(steps=20, steps_per_execution=10)).with_feeds.total_seconds
    assert full < result.with_feeds.total_seconds < 1.5 * full


def test_a_recorded_step_cost_is_used():
    heavy = tutorial3_step_cost().scaled(1000)
    assert (simulate(FeedsConfig(step_cost=heavy)).with_feeds.total_seconds
            > simulate(FeedsConfig()).with_feeds.total_seconds)


@pytest.mark.parametrize("change", [{"steps_per_execution": 0}, {"steps": -5},
                                    {"host": "a quantum host"}, {"ipu_version": "ipu9"}])
def test_invalid_configurations_are_reported_not_raised(change):
    result = simulate(FeedsConfig().with_changes(**change))
    assert not result.ok and result.error


def test_widget_redraws_and_keeps_the_last_valid_drawing():
    explorer = FeedsExplorer()
    first_image, first_count = explorer.image.value, explorer.redraw_count
    assert "1.6" in explorer.summary.value and explorer.message.value == ""
    explorer.steps_per_execution.value = 100
    assert explorer.result.config.steps_per_execution == 100
    assert explorer.redraw_count == first_count + 1 and explorer.image.value != first_image
    drawn = explorer.image.value
    explorer._base = explorer._base.with_changes(batch_size=0)   # an impossible model
    explorer.refresh()
    assert "cannot run" in explorer.message.value
    assert explorer.image.value == drawn and explorer.last_valid.config.steps_per_execution == 100


def test_importing_the_explorer_does_not_import_tensorflow():
    code = ("import sys; from widgets.feeds_explorer import FeedsExplorer; FeedsExplorer(); "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
