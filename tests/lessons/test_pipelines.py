"""The pipelining notebooks' helpers: a recorded run with other settings, the tutorial's
"follow the first mini-batch", the IPUs' span, and the loss plot."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from ipu_emulator.record import ComputeCost, EngineRun, PipelineSettings  # noqa: E402
from ipu_emulator.sim import builtin_models, cost_model  # noqa: E402
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages  # noqa: E402
from ipu_emulator.sim.recorded_runs import simulate_run  # noqa: E402
from ipu_emulator import lessons  # noqa: E402


def pipelined_run(repeat_count=4):
    stages = tuple(cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                          ["dense32"], 32))
    return EngineRun("train", 16 * repeat_count, ComputeCost(), num_ipus=2, stages=stages,
                     pipeline=PipelineSettings("grouped", 16, repeat_count, (0, 1)))


def test_rescheduled_keeps_the_costs_and_follows_the_counts():
    run = pipelined_run()
    other = lessons.rescheduled(run, schedule="sequential", repeat_count=1)
    assert other.stages == run.stages and other.iterations == 16
    assert run.pipeline.schedule == "grouped"                        # the original is untouched
    slower = simulate_run(other, batch_size=32, synthetic_data=True).metrics.makespan
    one_pass = simulate_run(lessons.rescheduled(run, repeat_count=1), batch_size=32,
                            synthetic_data=True).metrics.makespan
    assert slower > one_pass


def test_rescheduled_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="not a pipeline"):
        lessons.rescheduled(EngineRun("p", 1, ComputeCost()), schedule="grouped")
    with pytest.raises(TypeError, match="unknown setting"):
        lessons.rescheduled(pipelined_run(), replicas=2)


def test_the_tutorials_first_mini_batch_and_the_span():
    ends = {name: lessons.first_backward_end(simulate_pipeline(unit_stages(4), name, 16,
                                                               unit_cost=True))
            for name in ("grouped", "interleaved")}
    assert ends == {"grouped": 11, "interleaved": 8}
    timeline = simulate_pipeline(unit_stages(2), "grouped", 4, unit_cost=True)
    assert lessons.ipu_span(timeline) == timeline.metrics.makespan
    with pytest.raises(ValueError, match="no backward pass"):
        lessons.first_backward_end(timeline, micro_batch=99)


def test_plot_losses_draws_each_micro_batch_and_each_update():
    import matplotlib.pyplot as plt
    ax = lessons.plot_losses([2.0, 1.8, 1.6, 1.2, 1.0, 0.9], per_update=3)
    micro, means = ax.get_lines()
    assert len(micro.get_xdata()) == 6
    assert list(means.get_ydata()) == pytest.approx([1.8, 1.0 + 0.1 / 3])
    plt.close(ax.figure)
