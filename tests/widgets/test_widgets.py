"""PipelinePlayground driven from the kernel: controls in, trace/metrics/messages out."""
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from widgets import PipelinePlayground, PlaygroundConfig, simulate
from widgets.playground_model import IPU_VERSIONS, SCHEDULES, split_points

SVG_START = "<svg"


@pytest.fixture
def playground():
    return PipelinePlayground()


def test_importing_widgets_does_not_import_tensorflow():
    code = ("import sys, widgets; widgets.PipelinePlayground(); "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_initial_state_shows_a_trace_and_metrics(playground):
    assert playground.results[0].ok
    assert playground.trace.value.startswith(SVG_START)
    assert "makespan" in playground.metrics.value
    assert playground.message.value == ""
    assert playground.results[0].config == PlaygroundConfig()


def test_changing_the_schedule_redraws(playground):
    before_image, before_count = playground.trace.value, playground.redraw_count
    playground.controls.schedule.value = "interleaved"
    assert playground.results[0].config.schedule == "interleaved"
    assert playground.redraw_count == before_count + 1
    assert playground.trace.value != before_image
    assert "interleaved" in playground.metrics.value


def test_each_control_reaches_the_simulated_configuration(playground):
    controls = playground.controls
    controls.repeat_count.value = 3
    controls.gradient_accumulation_count.value = 24
    controls.batch_size.value = 64
    controls.replicas.value = 2
    controls.recompute.value = True
    controls.ipu_version.value = "ipu21"
    controls.unit_cost.value = False
    controls.splits.value = ("dense64",)
    config = playground.results[0].config
    assert (config.repeat_count, config.gradient_accumulation_count, config.batch_size,
            config.replicas, config.recompute, config.ipu_version, config.unit_cost,
            config.splits) == (3, 24, 64, 2, True, "ipu21", False, ("dense64",))
    assert playground.results[0].ok
    assert len(playground.results[0].timeline.ipu_lanes) == 2 * 2  # 2 stages x 2 replicas


def test_invalid_combination_shows_the_sdk_message_and_keeps_the_last_trace(playground):
    valid_image = playground.trace.value
    playground.controls.gradient_accumulation_count.value = 6   # grouped, 4 stages: needs 8k
    assert not playground.results[0].ok
    assert "must be a multiple of 8, but it is 6" in playground.message.value
    assert "last valid" in playground.message.value
    assert playground.trace.value == valid_image
    playground.controls.gradient_accumulation_count.value = 16
    assert playground.results[0].ok and playground.message.value == ""


def test_one_stage_is_refused_with_the_sdk_message(playground):
    playground.controls.splits.value = ()
    assert "Pipeline requires at least two computational stages." in playground.message.value


def test_compare_mode_simulates_two_configurations(playground):
    single_height_image = playground.trace.value
    playground.compare.value = True
    assert [r.config.schedule for r in playground.results] == ["grouped", "interleaved"]
    assert playground.trace.value != single_height_image
    assert playground.metrics.value.count("<tr>") == 3  # header + A + B
    playground.compare_controls.schedule.value = "sequential"
    assert playground.results[1].config.schedule == "sequential"
    # Sequential is as slow as sharding: B's makespan exceeds A's (Grouped).
    a, b = (r.timeline.metrics.makespan for r in playground.results)
    assert b > a


def test_changing_the_model_offers_its_layers(playground):
    playground.controls.model.value = "tutorial-convnet"
    assert tuple(playground.controls.splits.options) == split_points("tutorial-convnet")
    assert playground.results[0].config.model == "tutorial-convnet"
    assert playground.results[0].ok


def test_pure_model_reports_errors_instead_of_raising():
    result = simulate(PlaygroundConfig(model="no-such-model"))
    assert not result.ok and "no-such-model" in result.error


_control_changes = st.one_of(
    st.tuples(st.just("schedule"), st.sampled_from(SCHEDULES)),
    st.tuples(st.just("gradient_accumulation_count"), st.integers(1, 64)),
    st.tuples(st.just("repeat_count"), st.integers(1, 8)),
    st.tuples(st.just("batch_size"), st.sampled_from((1, 8, 32, 256))),
    st.tuples(st.just("replicas"), st.sampled_from((1, 2, 4, 8))),
    st.tuples(st.just("recompute"), st.booleans()),
    st.tuples(st.just("unit_cost"), st.booleans()),
    st.tuples(st.just("ipu_version"), st.sampled_from(IPU_VERSIONS)),
    st.tuples(st.just("splits"), st.sets(st.sampled_from(split_points("tutorial-mlp")),
                                         max_size=5).map(tuple)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_control_changes, min_size=1, max_size=6))
def test_random_control_sequences_never_raise(changes):
    playground = PipelinePlayground()
    for name, value in changes:
        getattr(playground.controls, name).value = value
        result = playground.results[0]
        # Either a fresh trace or the SDK's reason why not; never both missing.
        assert result.ok or playground.message.value
        assert playground.trace.value.startswith(SVG_START)
