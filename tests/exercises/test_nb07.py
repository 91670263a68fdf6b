"""Notebook 07's exercises beyond the generic checks: the reasons, the context the notebook
passes in (its recorded run, its four-stage trace), and answers a learner may type."""
from ipu_emulator.exercises import nb07_pipelining as nb07
from ipu_emulator.record import EngineRun, PipelineSettings, ComputeCost
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline


def recorded_like_run(repeat_count=4):
    """An engine run shaped like the notebook's: the tutorial's split, 16 x repeat_count."""
    stages = tuple(cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                          ["dense32"], 32))
    return EngineRun("train", 16 * repeat_count, ComputeCost(), num_ipus=2, stages=stages,
                     pipeline=PipelineSettings("grouped", 16, repeat_count, (0, 1)))


def test_the_schedule_right_and_the_reason_wrong_says_so():
    for reason in ("a", "c"):
        feedback = nb07.check_faster_schedule(("grouped", reason))
        assert not feedback.ok and "the schedule is right" in feedback.text
    assert nb07.check_faster_schedule(["Grouped", "B"]).ok        # a list and capitals work
    assert "pair" in nb07.check_faster_schedule("grouped").text


def test_interleaved_peak_is_named_as_such():
    assert "Interleaved's figure" in nb07.check_in_flight(4).text


def test_a_percentage_or_a_raising_function_gets_a_hint():
    assert "fraction" in nb07.check_bubble_function(lambda s, m: 100 * (s - 1) / (m + s - 1)).text
    feedback = nb07.check_bubble_function(lambda s: s)
    assert not feedback.ok and "two whole numbers" in feedback.text


def test_repeat_count_is_judged_on_the_run_passed_in():
    run = recorded_like_run()
    answer = nb07._smallest_repeat_count(run)
    assert nb07.check_repeat_count(answer, run).ok
    assert not nb07.check_repeat_count(answer - 1, run).ok
    assert not nb07.check_repeat_count(answer + 1, run).ok
    # The built-in model and a run with the same costs agree.
    assert answer == nb07._smallest_repeat_count()


def test_pace_setter_is_judged_on_the_trace_passed_in():
    stages = cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                    ["dense256", "dense128", "dense64"], 32)
    trace = simulate_pipeline(stages, "grouped", 16, batch_size=32, synthetic_data=True)
    # Cut that way, stage 0 is flatten alone and the last stage holds nearly everything.
    assert nb07.check_pace_setter(3, trace).ok
    assert nb07.check_pace_setter("ipu3", trace).ok
    assert not nb07.check_pace_setter(0, trace).ok
    assert "numbered from 0" in nb07.check_pace_setter(7, trace).text
