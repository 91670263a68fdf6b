"""End to end: the tutorial-4-style replicated script runs unmodified through the runner."""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_contrib_era_replicated_script_trains_two_replicas(tmp_path):
    env = dict(os.environ, IPU_EMULATOR_DATA="sample", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-m", "ipu_emulator", "run", "--tf1", "--seed", "1",
         str(ROOT / "examples" / "tf1_replicated.py"), "--epochs", "2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    losses = [float(m) for m in re.findall(r"mean loss ([0-9.]+)", result.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0]
    # 4,000 sample digits / (32 per batch x 2 replicas) = 62 steps, each with a replica axis.
    assert result.stdout.count("outfeed shape (62, 2)") == 2
    assert "ipu_emulator: 2 engine runs, 124 loop iterations" in result.stderr
