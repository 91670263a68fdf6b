"""The simulated clock against Graphcore's step-1 execution trace of the tutorial MLP.

The pipelining tutorial's PopVision trace of step 1 (one Mk2 IPU, batch 32) shows about
23,000 cycles forward, 27,000 backward with gradient accumulation, and 6,200 for the weight
update.  The layer model, timed on ipu2, must stay within 15 % of each.
"""
import pytest

from ipu_emulator.sim import hardware
from ipu_emulator.sim.builtin_models import builtin_model
from ipu_emulator.sim.cost_model import stage_costs
from ipu_emulator.sim.pipeline_simulator import action_seconds

IPU2 = hardware.get_target("ipu2")
[MLP] = stage_costs(builtin_model("tutorial-mlp"), [], batch_size=32)


def test_the_mlps_ops_by_kind():
    # Forward: 5 matmuls; 5 bias adds and 4 relus; the mean; the fused loss.
    # Backward: 5 weight and 4 input gradients; 4 relu gradients and the loss's 2 scalings;
    # 5 bias gradients; 10 accumulator adds.  Update: one SGD kernel per variable.
    assert MLP.op_cycles == (
        hardware.op_cycles({"matmul": 5, "elementwise": 9, "reduction": 1, "loss": 1}),
        hardware.op_cycles({"matmul": 9, "elementwise": 6, "reduction": 5, "variable": 10}),
        hardware.op_cycles({"variable": 10}))


@pytest.mark.parametrize("action, published", [("F", 23_000), ("B", 27_000), ("U", 6_200)])
def test_step_1_cycles_are_within_15_percent_of_the_real_trace(action, published):
    seconds = action_seconds(MLP, action, IPU2, split_backward=False,
                             accumulator_bytes=MLP.parameter_bytes)
    assert seconds * IPU2.clock_hz == pytest.approx(published, rel=0.15)


def test_small_layers_are_bound_by_their_ops_not_their_flops():
    # Most of a forward pass is the ops' fixed cost; the FLOPs (nearly all dense256's, at
    # the efficiency step 3's trace gives) are about a fifth.
    forward = action_seconds(MLP, "F", IPU2, split_backward=False)
    arithmetic = MLP.forward_flops / IPU2.achievable_fp32_flops
    assert 0.1 * forward < arithmetic < 0.25 * forward
