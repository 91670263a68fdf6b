"""End to end: an unmodified TF2 tutorial-3-style script runs through ``python -m ipu_emulator
run`` (TF2 is the default), with and without feeds."""
import json
import re

import pytest

from test_runner import EXAMPLES, run_cli


def losses(stdout):
    match = re.search(r"loss of the first step ([0-9.]+), of the last step ([0-9.]+)", stdout)
    assert match, stdout
    return float(match.group(1)), float(match.group(2))


@pytest.fixture(scope="module")
def with_feeds(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tf2_feeds")
    result = run_cli("run", "--seed", "1", "--trace", "trace.json", str(EXAMPLES / "tf2_feeds.py"),
                     "--steps", "200", cwd=workdir)
    return result, workdir


@pytest.fixture(scope="module")
def without_feeds(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tf2_no_feeds")
    return run_cli("run", "--seed", "1", str(EXAMPLES / "tf2_feeds.py"), "--steps", "200",
                   "--without-feeds", cwd=workdir)


def test_script_with_feeds_runs_ten_steps_per_engine_run(with_feeds):
    result, _ = with_feeds
    assert result.returncode == 0, result.stderr[-3000:]
    first, last = losses(result.stdout)
    assert last < first
    assert "Time taken with infeed/outfeed" in result.stdout
    assert "ipu_emulator: 20 engine runs, 200 loop iterations" in result.stderr


def test_script_without_feeds_runs_one_step_per_engine_run(without_feeds):
    assert without_feeds.returncode == 0, without_feeds.stderr[-3000:]
    assert "ipu_emulator: 200 engine runs, 200 loop iterations" in without_feeds.stderr


def test_both_programs_train_identically(with_feeds, without_feeds):
    # Same seed, same batches in the same order, same arithmetic: the feeds change only how
    # the steps are grouped into engine runs.
    assert losses(with_feeds[0].stdout) == pytest.approx(losses(without_feeds.stdout), rel=1e-5)


def test_trace_has_one_engine_run_slice_per_execution(with_feeds):
    result, workdir = with_feeds
    assert result.returncode == 0
    trace = json.loads((workdir / "trace.json").read_text())
    slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert sum(1 for e in slices if e["name"] == "Engine::run") == 20
    assert {"forward", "backward", "weight_update", "stream_copy"} <= {
        e["args"]["kind"] for e in slices}
