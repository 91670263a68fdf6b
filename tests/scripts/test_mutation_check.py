"""scripts/mutation_check.py: its mutations still apply to the code, it runs the fast suite
`make test-fast` runs, and a mutant that hangs is stopped and counted as killed.

The full check (every mutant against the fast suite) takes minutes: run it by hand, as
docs/setup-and-testing.md says.  These tests only keep the script in step with the code.
"""
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import mutation_check  # noqa: E402


def test_every_mutation_applies_to_exactly_one_place_in_the_code():
    for m in mutation_check.MUTATIONS:
        text = (ROOT / m.path).read_text()
        assert text.count(m.original) == 1, f"{m.name}: its line is not (once) in {m.path}"
        assert m.mutated != m.original, m.name
        compile(text.replace(m.original, m.mutated), m.path, "exec")   # still Python
    names = [m.name for m in mutation_check.MUTATIONS]
    assert len(names) == len(set(names))


def test_the_suite_is_the_shared_list_and_every_path_exists():
    paths = mutation_check.fast_suite()
    assert paths and all((ROOT / path).exists() for path in paths)
    assert "ipu_emulator/exercises" in paths and "tests/exercises" in paths
    listed = [line.strip() for line in (ROOT / "tests/fast_suite.txt").read_text().splitlines()
              if line.strip() and not line.lstrip().startswith("#")]
    assert paths == listed


def test_a_command_past_its_deadline_is_stopped_with_what_it_started(tmp_path):
    started = time.monotonic()
    code, _ = mutation_check._run(
        ["/bin/sh", "-c", "sleep 60 & sleep 60"], tmp_path, started + 1.0)
    assert code is None
    assert time.monotonic() - started < 30
