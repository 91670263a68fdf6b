"""The pipelining example and its profiling wrapper, run through the runner end to end."""
import re

from ipu_emulator.cli import profiling
from tests.support.child_python import ROOT, child_env, run_emulator

EXAMPLES = ROOT / "examples"


def run_cli(*args, cwd):
    # No POPLAR_ENGINE_OPTIONS from the shell (child_env drops it): only the wrapper asks
    # for a report.
    return run_emulator("run", *args, cwd=cwd, env=child_env(PYTHONPATH=ROOT))


def test_the_pipelined_example_trains_through_the_runner(tmp_path):
    done = run_cli("--tf1", "--seed", "1", EXAMPLES / "pipelining_step3.py", "--steps", "3",
                   "--repeat-count", "2", "--batches-to-accumulate", "8",
                   "--schedule", "Interleaved", cwd=tmp_path).check()
    losses = [float(line.rsplit(":", 1)[1]) for line in done.stdout.splitlines()
              if "Mean loss" in line]
    assert len(losses) == 2 and losses[-1] < losses[0]  # printed for steps 0 and 2
    assert "3 engine runs, 48 loop iterations" in done.stderr


def test_the_profiling_wrapper_runs_through_the_runner_and_writes_the_report(tmp_path):
    done = run_cli("--tf1", EXAMPLES / "profile_step3.sh", cwd=tmp_path).check()
    report = tmp_path / "profile_step3_pipelining"
    trace = done.read_json(report / profiling.TRACE_FILE)
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {"IPU0", "IPU1"} <= lanes
    slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert {"forward", "backward", "weight_update"} <= {e["cat"] for e in slices}
    # --use_synthetic_data: no infeed copies from the host in the trace
    assert not [e for e in slices if e["cat"] == "stream_copy" and "infeed" in e["name"].lower()]
    summary = (report / profiling.SUMMARY_FILE).read_text()
    # One session run of one pipeline pass of 4 micro-batches (--batches-to-accumulate 4),
    # summarised as a pipeline (the in-flight column appears only for pipelines).
    assert "(1 engine runs recorded in total" in summary
    assert re.search(r"^  engine runs +1$", summary, re.M)
    assert re.search(r"^  loop iterations +4$", summary, re.M)
    assert re.search(r"^  IPU +utilisation +peak memory +in flight", summary, re.M)
