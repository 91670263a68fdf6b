"""End to end: unmodified TF1 IPU scripts run through ``python -m ipu_emulator run``."""
import argparse
import atexit
import gc
import re
import sys

import pytest

from ipu_emulator.cli import runner
from tests.support.child_python import ROOT, run_emulator

EXAMPLES = ROOT / "examples"


def epoch_losses(stdout):
    return [float(m) for m in re.findall(r"mean loss ([0-9.]+)", stdout)]


@pytest.fixture(scope="module")
def looped_run(tmp_path_factory):
    """The looped example, run once for the tests of this module that read it."""
    return run_emulator("run", "--tf1", "--seed", "3", "--trace", "trace.json",
                        EXAMPLES / "tf1_loop_with_infeed.py", "--epochs", "2",
                        cwd=tmp_path_factory.mktemp("looped"))




def test_looped_script_trains_and_reports_one_engine_run_per_epoch(looped_run):
    result = looped_run.check()
    losses = epoch_losses(result.stdout)
    assert len(losses) == 2 and losses[1] < losses[0]
    # 2,500 Fashion-MNIST sample images / batch 32 = 78 steps, counted from the outfeed.
    assert "(78 steps)" in result.stdout
    assert "ipu_emulator: 2 engine runs, 156 loop iterations" in result.stderr
    assert "bundled sample" in result.stderr  # the offline data substitution is announced


def test_trace_file_is_chrome_trace_json(looped_run):
    trace = looped_run.check().read_json("trace.json")
    slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    kinds = {e["args"]["kind"] for e in slices}
    assert {"host", "stream_copy", "forward", "backward", "weight_update"} <= kinds
    assert sum(1 for e in slices if e["name"] == "Engine::run") == 2


def test_step_per_run_script_makes_one_engine_run_per_step(tmp_path):
    result = run_emulator("run", "--tf1", EXAMPLES / "tf1_step_per_run.py", "--epochs", "2",
                          cwd=tmp_path).check()
    losses = epoch_losses(result.stdout)
    assert len(losses) == 2 and losses[1] < losses[0]
    assert "ipu_emulator: 156 engine runs, 156 loop iterations" in result.stderr
    # The old configuration API still works and says it is deprecated, as SDK 2.1-2.3 did.
    assert "create_ipu_config (from tensorflow.python.ipu.utils) is deprecated" in result.stderr


def test_seeded_runs_are_repeatable(looped_run, tmp_path):
    # A second run of the same seed (without --trace): the one child this test adds.
    again = run_emulator("run", "--tf1", "--seed", "3", EXAMPLES / "tf1_loop_with_infeed.py",
                         "--epochs", "2", cwd=tmp_path).check()
    assert epoch_losses(again.stdout) == epoch_losses(looped_run.check().stdout)


def test_script_exit_code_and_argv_are_passed_through(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import sys\nprint(sys.argv[1:])\nsys.exit(7)\n")
    result = run_emulator("run", script, "--flag", "value", cwd=tmp_path)
    assert result.returncode == 7
    assert "['--flag', 'value']" in result.stdout
    assert "ran no IPU programs" in result.stderr


def test_missing_script_is_a_clear_error(tmp_path):
    result = run_emulator("run", "no_such_script.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "no such script: no_such_script.py" in result.stderr


def test_the_interpreter_leaves_tensorflows_objects_to_the_system_after_the_scripts_exit(
        tmp_path, monkeypatch):
    """The runner freezes the garbage collector at exit, after the script's own atexit
    handlers, so the interpreter skips a last collection over TensorFlow's objects (1.3 s of
    CPU: bench/exit_cost.py).  In process, with TensorFlow's set-up left out."""
    registered = []
    monkeypatch.setattr(atexit, "register", lambda function, *args: registered.append(function))
    monkeypatch.setattr(runner, "prepare", lambda **settings: None)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = tmp_path / "says_goodbye.py"
    script.write_text("import atexit\natexit.register(print, 'goodbye')\n")
    options = argparse.Namespace(script=str(script), args=[], tf1=False, seed=None, trace=None,
                                 ipu_version="ipu2", quiet=True)
    assert runner.run(options) == 0
    assert registered == [gc.freeze, print], "atexit runs the last registered first"
