"""``python -m ipu_emulator simulate``: JSON facts, text output, errors, no TensorFlow."""
import json
import subprocess
import sys
import textwrap

import pytest

from ipu_emulator.cli import simulate as simulate_command


def simulate(*args, check=True):
    result = subprocess.run([sys.executable, "-m", "ipu_emulator", "simulate", *args],
                            capture_output=True, text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def simulate_json(*args):
    return json.loads(simulate(*args, "--json").stdout)


@pytest.mark.parametrize("schedule, end", [("grouped", 11), ("interleaved", 8)])
def test_unit_cost_json_gives_the_tutorials_first_backward_end(schedule, end):
    data = simulate_json("--stages", "4", "--micro-batches", "8", "--schedule", schedule,
                         "--unit-cost")
    first = [e for e in data["events"]
             if e["kind"] == "backward" and e["stage"] == 0 and e["micro_batch"] == 0]
    assert [e["end"] for e in first] == [end]
    for event in data["events"]:
        assert {"ipu", "stage", "kind", "micro_batch", "start", "end"} <= set(event)
    assert data["metrics"]["makespan"] == 22
    assert (data["clock"], data["time_unit"]) == ("unit time steps", "step")
    assert data["metrics"]["bubble_fraction"] == pytest.approx(3 / 11)
    assert set(data["metrics"]["utilisation"]) == {"0", "1", "2", "3"}
    assert data["metrics"]["peak_in_flight"]["0"] == (7 if schedule == "grouped" else 4)
    assert data["schedule"]["name"] == schedule
    assert data["schedule"]["ipu_actions"][3].startswith("3F0 3B0")
    updates = [e for e in data["events"] if e["kind"] == "weight_update"]
    assert len(updates) == 4 and all(e["micro_batch"] is None for e in updates)


def test_model_json_has_throughput_memory_and_phases(tmp_path):
    trace_file = tmp_path / "pipeline.json"
    data = simulate_json("--model", "tutorial-mlp", "--splits", "dense128", "dense32",
                         "--batch-size", "32", "--gradient-accumulation-count", "12",
                         "--repeat-count", "2", "--replicas", "2", "--ipu-version", "ipu2",
                         "--recompute", "--perfetto", str(trace_file))
    metrics = data["metrics"]
    assert (data["clock"], data["time_unit"]) == ("simulated IPU time", "s")
    assert metrics["samples_per_second"] > 0
    assert metrics["effective_batch_size"] == 2 * 32 * 12
    assert set(metrics["peak_memory_bytes"]) == {str(i) for i in range(6)}
    assert metrics["peak_memory_bytes"]["0"] > metrics["peak_memory_bytes"]["2"] > 0
    assert [p["name"] for p in data["phases"]][:4] == ["ramp-up", "main", "ramp-down",
                                                        "weight update"]
    assert any(e["kind"] == "recompute" for e in data["events"])
    chrome = json.loads(trace_file.read_text())
    assert any(e.get("name") == "Engine::run" for e in chrome["traceEvents"])


def test_text_output_prints_the_schedule_and_the_summary():
    out = simulate("--stages", "2", "--micro-batches", "4", "--schedule", "1f1b",
                   "--unit-cost").stdout
    assert "1f1b schedule: 2 stages on 2 IPUs" in out
    assert "IPU0: 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3 0U" in out
    assert "makespan (unit time steps)" in out and "bubble fraction" in out


def test_invalid_combination_exits_non_zero_with_the_sdk_message():
    result = simulate("--stages", "3", "--micro-batches", "10", "--schedule", "grouped",
                      check=False)
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "FailedPreconditionError: The number of iterations of the pipeline must be a multiple "
        "of 6, but it is 10. This number might be called `gradient_accumulation_count`, "
        "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending on the "
        "API used.")


@pytest.mark.parametrize("args, message", [
    (["--stages", "4", "--micro-batches", "8", "--schedule", "interleaved",
      "--device-mapping", "0", "1", "1", "0"],
     "NotImplementedError: The pipelining schedule 'Interleaved' does not currently support"),
    (["--stages", "1", "--schedule", "gpipe"],
     "ValueError: Pipeline requires at least two computational stages."),
    (["--schedule", "fastest"], "Unknown pipeline schedule 'fastest'"),
    (["--model", "tutorial-mlp", "--splits", "nope"], "unknown split layer 'nope'"),
    (["--model", "tutorial-mlp", "--stages", "3"], "--stages 3 disagrees with --splits"),
])
def test_invalid_inputs_report_the_real_message(args, message, capsys):
    assert simulate_command.main(args) == 1
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_simulator_modules_do_not_import_tensorflow():
    code = textwrap.dedent("""
        import sys
        from ipu_emulator.cli import simulate
        from ipu_emulator.sim import pipeline_simulator, schedules
        from ipu_emulator.__main__ import main
        main(["simulate", "--stages", "4", "--micro-batches", "8", "--json"])
        print("tensorflow" in sys.modules, file=sys.stderr)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stderr.strip() == "False"


def test_a_model_without_splits_runs_on_one_ipu_and_json_gives_cycles():
    data = simulate_json("--model", "tutorial-mlp", "--synthetic-data", "--micro-batches", "16")
    assert data["schedule"]["name"] == "single-ipu" and data["schedule"]["num_stages"] == 1
    assert data["schedule"]["ipu_actions"][0].endswith("0F15 0B15 0U")
    assert data["clock_hz"] == 1.33e9                       # ipu2
    assert data["metrics"]["makespan_cycles"] == round(data["metrics"]["makespan"] * 1.33e9)
    event = data["events"][0]
    assert event["end_cycles"] == round(event["end"] * 1.33e9)
    # Synthetic data: no infeed copies from the host, only the losses' outfeed.
    copies = [e["name"] for e in data["events"] if e["kind"] == "stream_copy"]
    assert copies and not any("infeed" in name for name in copies)


def test_one_ipu_sharding_and_pipelining_of_one_model_can_be_compared():
    def per_sample(*args):
        return 1 / simulate_json("--model", "tutorial-mlp", "--synthetic-data", *args)[
            "metrics"]["samples_per_second"]
    single = per_sample()
    pipelined = per_sample("--splits", "dense32", "--schedule", "grouped")
    sharded = per_sample("--splits", "dense32", "--schedule", "sequential")
    assert pipelined < single < sharded  # the tutorial's lesson, steps 1 to 3
