"""End to end: an unmodified TF2 IPU Keras script that pipelines an MNIST model over two IPUs
(our layout of the SDK user guide's examples) runs through ``python -m ipu_emulator run``,
trains, and its trace draws the two stages on two IPUs."""
import re

from tests.support.child_python import ROOT, run_emulator

LAYOUT = ROOT / "tests" / "layouts" / "keras_pipelining_layout.py"


# The functional model, built in PipelineStage contexts.  A Sequential model split with
# set_pipeline_stage_assignment (this layout's --sequential) runs in the tutorial's layout in
# tests/cli/test_keras_tutorial_layouts.py, as two replicas of a two-stage pipeline.
def test_pipelined_keras_script_runs_unmodified(tmp_path):
    result = run_emulator("run", "--trace", "trace.json", LAYOUT, cwd=tmp_path).check()
    last = result.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"Training finished: loss ([0-9.]+) -> ([0-9.]+)", last)
    assert match, result.stdout[-2000:]
    assert float(match.group(2)) < float(match.group(1))
    # 2 epochs of 120 batches, 40 per execution.
    assert "ipu_emulator: 6 engine runs, 240 loop iterations" in result.stderr
    busy = result.busy_lanes()
    assert busy == {"IPU0": {"forward", "backward"}, "IPU1": {"forward", "backward"}}
