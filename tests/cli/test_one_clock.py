"""One clock: the CLI's built-in tutorial MLP and a recorded run of the same model in the
pipelining tutorial's layout are priced alike, phase by phase and stage by stage.

The recorded side runs ``tests/layouts/pipelining_tutorial_layout.py`` unmodified through the
runner (steps 1, 2 and 3, batch 32, 16 mini-batches per weight update), one child process per
case, and reports each engine run's stages.  The CLI side is ``cost_model.stage_costs`` and
``cost_model.shard_costs`` of ``builtin_model("tutorial-mlp")``, what ``python -m ipu_emulator
simulate --model tutorial-mlp`` simulates.  Each phase of each stage must take the same
simulated time within 2 %, and the tensors a shard reads from the other must be the same.
"""
import dataclasses

import pytest

from ipu_emulator.sim import cost_model, hardware
from ipu_emulator.sim.builtin_models import builtin_model
from ipu_emulator.sim.cost_model import StageCost
from ipu_emulator.sim.pipeline_simulator import action_seconds
from tests.support.child_python import REPORTER, ROOT, run_code

LAYOUT = ROOT / "tests" / "layouts" / "pipelining_tutorial_layout.py"
IPU2 = hardware.get_target("ipu2")
CHILD = REPORTER + f"""
import dataclasses, runpy, sys
from ipu_emulator.cli import runner
runner.prepare(tf1=True, seed=1)
from ipu_emulator import record
sys.argv = ["layout", "--batch-size", "32", "--batches-to-accumulate", "16",
            "--repeat-count", "1", "--steps", "1"] + sys.argv[1:]
with record.capture() as runs:
    runpy.run_path({str(LAYOUT)!r}, run_name="__main__")
[run] = [r for r in runs.runs if r.iterations == 16]
report("step", dataclasses.asdict(run.step_cost))
report("stages", [dataclasses.asdict(s) for s in run.stages])
"""
CASES = {
    "single": ["--step", "1"],
    "sharded": ["--step", "2"],
    "colocated": ["--step", "2", "--colocate-gradients"],
    "pipelined": ["--step", "3", "--schedule", "Grouped"],
}


@pytest.fixture(scope="module")
def recorded():
    # One child per step, each forked with TensorFlow imported already (run_code).
    found = {}
    for name, args in CASES.items():
        results = run_code(CHILD, *args, timeout=600).check().results
        stages = tuple(StageCost(**dict(s, layers=tuple(s["layers"]), op_cycles=tuple(
            s["op_cycles"]), reads=tuple(tuple(r) for r in s["reads"])))
            for s in results["stages"])
        found[name] = (results["step"], stages)
    return found


def modelled(name):
    layers = builtin_model("tutorial-mlp")
    if name == "single":
        return tuple(cost_model.stage_costs(layers, [], batch_size=32))
    if name in ("sharded", "colocated"):
        return tuple(cost_model.shard_costs(layers, ["dense32"], batch_size=32,
                                            colocate_gradients=name == "colocated"))
    return tuple(cost_model.stage_costs(layers, ["dense32"], batch_size=32))


def phase_cycles(stage):
    return [action_seconds(stage, kind, IPU2, False) * IPU2.clock_hz for kind in "FBU"]


@pytest.mark.parametrize("name", ["sharded", "colocated", "pipelined"])
def test_each_phase_of_each_stage_agrees_within_2_percent(recorded, name):
    _, stages = recorded[name]
    model = modelled(name)
    assert len(stages) == len(model) == 2
    for real, built in zip(stages, model):
        for ran, priced in zip(phase_cycles(real), phase_cycles(built)):
            assert priced == pytest.approx(ran, rel=0.02, abs=1.0), (real, built)
        assert real.activation_bytes == built.activation_bytes
        assert real.reads == built.reads


def test_one_ipu_agrees_phase_by_phase(recorded):
    step, _ = recorded["single"]
    [stage] = modelled("single")
    assert tuple(step["phase_op_cycles"]) == stage.op_cycles
    assert step["forward_flops"] == pytest.approx(stage.forward_flops, rel=0.02)
    assert step["backward_flops"] == pytest.approx(stage.backward_flops, rel=0.02)
    assert step["activation_bytes"] == stage.activation_bytes


def test_the_sdks_placement_shows_in_the_sharded_costs(recorded):
    _, (first, last) = recorded["sharded"]
    # minimize is built in the last shard's scope: every gradient is computed there...
    assert first.backward_flops == 0 and first.op_cycles[1] == 0
    # ...from the first shard's activations and weights, copied over each mini-batch,
    assert [r for r in last.reads if r[0] == "backward"] == [("backward", 0, 313_344, 5)]
    # and the first shard's weight update reads its accumulated gradients back.
    assert [r for r in first.reads if r[0] == "weight_update"] == [
        ("weight_update", 1, first.parameter_bytes, 6)]
    assert dataclasses.asdict(first)["activation_bytes"] == 0


def test_colocated_gradients_stay_with_their_forward_ops(recorded):
    _, (first, last) = recorded["colocated"]
    # Each shard computes its own layers' gradients and accumulates them where they are:
    assert first.backward_flops > 0.9 * (first.backward_flops + last.backward_flops)
    # only the gradient of dense64's output crosses back, and no update reads across.
    assert first.reads == (("backward", 1, 32 * 64 * 4, 1),)
    assert last.reads == (("forward", 0, 32 * 64 * 4 + 32 * 4, 2),)
