"""PipelinePlayground driven from the kernel: controls in, trace/metrics/messages out."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ipu_lab_widgets import PipelinePlayground, PlaygroundConfig, simulate
from ipu_lab_widgets.playground_model import IPU_VERSIONS, SCHEDULES, split_points

SVG_START = "<svg"


@pytest.fixture
def playground():
    return PipelinePlayground()


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


def test_the_real_cost_controls_reach_the_simulated_configuration(playground):
    controls = playground.controls
    controls.unit_cost.value = False
    assert controls.backward_ratio.disabled and not controls.synthetic_data.disabled
    controls.synthetic_data.value = False
    controls.offload_weights.value = True
    controls.offload_activations.value = True
    controls.accumulation_dtype.value = "float16"
    result = playground.results[0]
    assert (result.config.synthetic_data, result.config.offload_weights,
            result.config.offload_activations, result.config.accumulation_dtype) == (
        False, True, True, "float16")
    names = {e.name for e in result.timeline.events}
    assert "StreamCopy infeed (host->IPU)" in names  # real data crosses the host link
    assert "store activations (IPU->streaming memory)" in names
    float16_memory = result.timeline.metrics.peak_memory_bytes[0]
    controls.accumulation_dtype.value = "float32"
    assert playground.results[0].timeline.metrics.peak_memory_bytes[0] > float16_memory
    controls.accumulation_dtype.value = "float16"
    assert "offload weights, offload activations, float16 accumulators" in result.timeline.title
    controls.synthetic_data.value = True
    assert "StreamCopy infeed (host->IPU)" not in {e.name for e in playground.results[0].timeline.events}


def test_a_longer_backward_lets_grouped_beat_interleaved(playground):
    """The tutorial's argument for Grouped, visible in unit-cost mode (default 2 : 1)."""
    playground.compare.value = True
    grouped, interleaved = (r.timeline.metrics.makespan for r in playground.results)
    assert (grouped, interleaved) == (57.0, 72.0)
    for controls in (playground.controls, playground.compare_controls):
        controls.backward_ratio.value = 1.0
    assert {r.timeline.metrics.makespan for r in playground.results} == {38.0}
    assert "textbook (S-1)/(M+S-1) = 3/19" in playground.metrics.value


def test_only_split_points_that_can_run_are_offered(playground):
    assert "flatten" not in playground.controls.splits.options
    for name in playground.controls.splits.options:
        assert simulate(PlaygroundConfig(splits=(name,))).ok, name


def test_following_a_micro_batch_outlines_it_in_the_trace(playground):
    playground.follow.value = 2
    assert playground.trace.value.count('stroke="#000"') >= 2 * 4
    playground.controls.gradient_accumulation_count.value = 8
    assert len(playground.follow.options) == 1 + 8


def test_predict_then_reveal_hides_the_traces_until_the_class_has_guessed():
    playground = PipelinePlayground(predict=True)
    assert playground.hidden() and playground._shown.layout.display == "none"
    assert playground.reveal.disabled  # no guess yet
    drawn = playground.redraw_count
    playground.guess.value = "A"
    assert not playground.reveal.disabled
    playground.reveal.click()
    assert not playground.hidden() and playground._shown.layout.display is None
    assert playground.redraw_count == drawn + 1
    # Grouped (A) beats Interleaved (B) with a longer backward.
    assert "Right:" in playground.verdict.value and "A 57 time steps vs B 72 time steps" \
        in playground.verdict.value
    playground.compare_controls.schedule.value = "1f1b"   # a new question
    assert playground.hidden() and playground.guess.value is None
    assert playground.verdict.value == ""
    playground.guess.value = "A"
    playground.reveal.click()
    assert "Not quite:" in playground.verdict.value and "they tie" in playground.verdict.value


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
    st.tuples(st.just("backward_ratio"), st.sampled_from((1.0, 1.5, 2.0, 3.0))),
    st.tuples(st.just("synthetic_data"), st.booleans()),
    st.tuples(st.just("offload_weights"), st.booleans()),
    st.tuples(st.just("offload_activations"), st.booleans()),
    st.tuples(st.just("accumulation_dtype"), st.sampled_from(("float32", "float16"))),
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
