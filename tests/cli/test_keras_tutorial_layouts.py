"""End to end: TF2 IPU Keras scripts in the layouts of Graphcore's Keras tutorial (our own code)
run unmodified through ``python -m ipu_emulator run`` on the bundled MNIST sample: one IPU with
``steps_per_execution`` sized from the data, and four IPUs as two replicas of a two-stage
pipeline with asynchronous callbacks.  One child process each."""
import re

from tests.support.child_python import ROOT, run_emulator

LAYOUTS = ROOT / "tests" / "layouts"


def test_functional_model_with_steps_per_execution_from_the_data_length(tmp_path):
    result = run_emulator("run", LAYOUTS / "keras_mnist_steps_per_execution.py", "--functional",
                          cwd=tmp_path).check()
    # 24,000 training digits in batches of 64: 375 whole batches, one engine run an epoch;
    # the 2,500 test digits: 39 batches, one engine run.
    assert "Training: 375 steps per execution" in result.stdout
    assert "Evaluating: 39 steps per execution" in result.stdout
    assert "ipu_emulator: 3 engine runs, 789 loop iterations" in result.stderr
    last = result.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"Finished: loss ([0-9.]+) -> ([0-9.]+), test accuracy ([0-9.]+)", last)
    assert match, result.stdout[-2000:]
    first, final, accuracy = map(float, match.groups())
    assert final < first and accuracy > 0.7


def test_two_replicas_of_a_two_stage_pipeline_with_asynchronous_callbacks(tmp_path):
    result = run_emulator("run", "--trace", "trace.json",
                          LAYOUTS / "keras_pipelined_two_replicas.py", cwd=tmp_path).check()
    out, err = result.stdout, result.stderr
    last = out.strip().splitlines()[-1]
    match = re.fullmatch(r"Finished: loss ([0-9.]+) -> ([0-9.]+), test accuracy ([0-9.]+), "
                         r"steps per execution (\d+)/(\d+)", last)
    assert match, out[-2000:]
    assert float(match.group(2)) < float(match.group(1))
    # len(data) // (64 x 2 replicas), rounded down to a multiple of 8: 24,000 -> 184, and the
    # test split's 2,500 -> 16 (the 1,000-digit test split of old gave 0).
    assert match.group(4, 5) == ("184", "16")
    # Per replica: an epoch is one run of 184 steps; the callback's evaluations one run of 8
    # (with the SDK's warning, counted per replica); the final evaluation one run of 16.
    assert "ipu_emulator: 5 engine runs, 400 loop iterations" in err
    assert ("`steps_per_execution` has been set to 184 but the dataset provided to this "
            "replica only contains 8 batches. Using 8 as `steps_per_execution`.") in err
    # Asynchronous callbacks see every step: filters drawn at steps 0, 8, ..., 176 of each
    # epoch.
    assert "Filter pictures rendered: 46 of shape (3, 24)" in out
    assert (tmp_path / "filters.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    accuracies = re.search(r"Held-out accuracy after each epoch: (.*)", out).group(1).split()
    assert len(accuracies) == 2 and float(accuracies[1]) > float(accuracies[0])
    assert "Log lines: 3" in out                          # CSVLogger: a header and 2 epochs
    busy = result.busy_lanes()
    # Two replicas, each a pipeline over two IPUs.
    assert busy == {f"IPU{i}": {"forward", "backward"} for i in range(4)}
