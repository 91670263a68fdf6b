"""End to end: the tutorial-4-style replicated script runs unmodified through the runner."""
import re

from tests.support.child_python import ROOT, run_emulator


def test_contrib_era_replicated_script_trains_two_replicas(tmp_path):
    result = run_emulator("run", "--tf1", "--seed", "1", ROOT / "examples" / "tf1_replicated.py",
                          "--epochs", "2", cwd=tmp_path).check()
    losses = [float(m) for m in re.findall(r"mean loss ([0-9.]+)", result.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0]
    # 24,000 sample digits / (32 per batch x 2 replicas) = 375 steps, each with a replica axis.
    assert result.stdout.count("outfeed shape (375, 2)") == 2
    assert "ipu_emulator: 2 engine runs, 750 loop iterations" in result.stderr
