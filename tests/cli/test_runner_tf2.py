"""End to end: an unmodified TF2 tutorial-3-style script runs through ``python -m ipu_emulator
run`` (TF2 is the default), with and without feeds."""
import re

import pytest

from tests.support.child_python import ROOT, run_emulator

EXAMPLE = ROOT / "examples" / "tf2_feeds.py"


def losses(stdout):
    match = re.search(r"loss of the first step ([0-9.]+), of the last step ([0-9.]+)", stdout)
    assert match, stdout
    return float(match.group(1)), float(match.group(2))


@pytest.fixture(scope="module")
def with_feeds(tmp_path_factory):
    return run_emulator("run", "--seed", "1", "--trace", "trace.json", EXAMPLE, "--steps", "200",
                        cwd=tmp_path_factory.mktemp("tf2_feeds"))


@pytest.fixture(scope="module")
def without_feeds(tmp_path_factory):
    return run_emulator("run", "--seed", "1", EXAMPLE, "--steps", "200", "--without-feeds",
                        cwd=tmp_path_factory.mktemp("tf2_no_feeds"))


def test_script_with_feeds_runs_ten_steps_per_engine_run(with_feeds):
    result = with_feeds.check()
    first, last = losses(result.stdout)
    assert last < first
    assert "Time taken with infeed/outfeed" in result.stdout
    assert "ipu_emulator: 20 engine runs, 200 loop iterations" in result.stderr


def test_script_without_feeds_runs_one_step_per_engine_run(without_feeds):
    without_feeds.check()
    assert "ipu_emulator: 200 engine runs, 200 loop iterations" in without_feeds.stderr


def test_both_programs_train_identically(with_feeds, without_feeds):
    # Same seed, same batches in the same order, same arithmetic: the feeds change only how
    # the steps are grouped into engine runs.
    assert losses(with_feeds.stdout) == pytest.approx(losses(without_feeds.stdout), rel=1e-5)


def test_trace_has_one_engine_run_slice_per_execution(with_feeds):
    trace = with_feeds.check().read_json("trace.json")
    slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert sum(1 for e in slices if e["name"] == "Engine::run") == 20
    assert {"forward", "backward", "weight_update", "stream_copy"} <= {
        e["args"]["kind"] for e in slices}
