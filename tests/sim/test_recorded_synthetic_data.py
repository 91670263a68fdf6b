"""Recorded pipelined and replicated runs are shown with synthetic data by default, as
Graphcore profiled them; anything else keeps its host transfers; either can be asked for."""
import pytest

from ipu_emulator.record import ComputeCost, EngineRun, PipelineSettings, ProgramRecord
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.recorded_runs import simulate_record

STAGES = tuple(cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                      ("dense128", "dense64", "dense32"), 32))
FEEDS = dict(infeed_bytes_per_iteration=32 * 784 * 4, outfeed_bytes_per_iteration=4)


def pipelined_run():
    settings = PipelineSettings("grouped", 16, 1, (0, 1, 2, 3))
    return EngineRun("train", 16, ComputeCost(), stages=STAGES, pipeline=settings,
                     num_ipus=4, **FEEDS)


def looped_run(replicas=1):
    return EngineRun("train", 10, ComputeCost(forward_flops=1e9, backward_flops=2e9),
                     replicas=replicas, num_ipus=replicas, **FEEDS)


def copies(timeline):
    return [e for e in timeline.events if e.kind == "stream_copy"]


@pytest.mark.parametrize("run", [pipelined_run(), looped_run(replicas=4)],
                         ids=["pipelined", "replicated"])
def test_pipelines_and_replicas_default_to_synthetic_data_and_say_so(run):
    shown = simulate_record(ProgramRecord([run]), title="my run")
    assert copies(shown) == []
    assert shown.title == "my run, synthetic data"
    with_data = simulate_record(ProgramRecord([run]), title="my run", synthetic_data=False)
    assert copies(with_data) and with_data.title == "my run"
    assert with_data.metrics.makespan > shown.metrics.makespan


def test_a_single_ipu_loop_keeps_its_feeds_unless_asked():
    record = ProgramRecord([looped_run()])
    assert copies(simulate_record(record)) and "synthetic" not in simulate_record(record).title
    synthetic = simulate_record(record, synthetic_data=True)
    assert copies(synthetic) == [] and synthetic.title.endswith(", synthetic data")


def test_the_record_passes_the_choice_on():
    record = ProgramRecord([pipelined_run()])
    assert copies(record.simulate(synthetic_data=False))
    assert copies(record.simulate()) == []


def sharded_run(**feeds):
    return EngineRun("train", 4, ComputeCost(), stages=STAGES[:2], num_ipus=2, **feeds)


def test_a_sharded_run_copies_to_the_host_only_what_its_outfeed_takes():
    """Issue 38: notebook 07's sharded program has no outfeed, and its trace drew a 4-byte
    outfeed copy every mini-batch.  Without an outfeed: no outfeed copy; with one: a copy of
    its enqueued bytes per iteration."""
    def outfeed_copies(run):
        return [e for e in copies(simulate_record(ProgramRecord([run])))
                if "outfeed" in e.name]

    assert outfeed_copies(sharded_run(infeed_bytes_per_iteration=32 * 784 * 4)) == []
    fed = outfeed_copies(sharded_run(infeed_bytes_per_iteration=32 * 784 * 4,
                                     outfeed_bytes_per_iteration=8))
    assert len(fed) == 4 and {e.args["bytes"] for e in fed} == {8}
