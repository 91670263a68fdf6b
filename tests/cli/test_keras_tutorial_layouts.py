"""End to end: TF2 IPU Keras scripts in the layouts of Graphcore's Keras tutorial (our own code)
run unmodified through ``python -m ipu_emulator run`` on the bundled MNIST sample: one IPU with
``steps_per_execution`` sized from the data, four IPUs as two replicas of a two-stage pipeline
with asynchronous callbacks, and two IPUs as two replicas given steps for both.  One child
process each."""
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


def test_two_replicas_take_the_steps_given_for_both_as_the_sdk_does(tmp_path):
    """The replicated path of the tutorial's completed example: steps_per_execution = training
    batches // 2, fit with steps_per_epoch = training batches, evaluate and predict with
    steps = test batches.  The SDK's Keras data adapter (``IPUDataHandler._infer_steps``)
    shares those steps out between the two replicas, so it runs to completion."""
    result = run_emulator("run", "--trace", "trace.json",
                          LAYOUTS / "keras_replicated_steps.py", cwd=tmp_path).check()
    out, err = result.stdout, result.stderr
    match = re.search(r"Training: (\d+) steps per execution, (\d+) steps per epoch", out)
    per_execution, per_epoch = map(int, match.groups())
    assert per_execution == per_epoch // 2
    test_batches = int(re.search(r"Evaluation: (\d+) steps", out).group(1))
    assert test_batches % 2, "the sample's test split makes an odd number of batches of 80"
    per_replica = test_batches // 2
    # An epoch is one engine run of a replica's half of the batches; evaluate and predict one
    # run each of half the test batches (steps_per_execution cut down to them), the odd one
    # dropped with the SDK's warnings.
    runs, iterations = 2 + 2, 2 * per_execution + 2 * per_replica
    assert f"ipu_emulator: {runs} engine runs, {iterations} loop iterations" in err
    assert (f"Dataset of length {test_batches} is being evenly distributed between 2 replicas. "
            "The remaining 1 batch will be dropped.") in err
    assert (f"`steps_per_execution` has been set to {per_execution} but the dataset provided to "
            f"this replica only contains {per_replica} batches. Using {per_replica} as "
            "`steps_per_execution`.") in err
    assert f"Predictions: {2 * per_replica * 80} rows of 10" in out
    last = out.strip().splitlines()[-1]
    match = re.fullmatch(r"Finished: loss ([0-9.]+) -> ([0-9.]+), test accuracy ([0-9.]+), "
                         r"predictions (\d+)", last)
    assert match, out[-2000:]
    assert float(match.group(2)) < float(match.group(1)) and float(match.group(3)) > 0.7
    # The trace shows each replica's steps on its IPU: a forward pass for every step it ran,
    # a backward pass for every training step.
    assert result.busy_lanes() == {"IPU0": {"forward", "backward"},
                                   "IPU1": {"forward", "backward"}}
    events = result.read_json("trace.json")["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    for ipu in ("IPU0", "IPU1"):
        kinds = [e["args"]["kind"] for e in events
                 if e.get("ph") == "X" and lanes[e["tid"]] == ipu]
        assert kinds.count("forward") == iterations
        assert kinds.count("backward") == 2 * per_execution
