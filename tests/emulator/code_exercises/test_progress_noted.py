"""A code exercise's check notes each attempt in the learner's progress file, as the numeric
exercises' checks do (tests/exercises/test_progress.py), so the class's hub sees it."""
from ipu_emulator.code_exercises import nb02_loops as code_exercises
from ipu_emulator.exercises import progress
from tests.support.code_exercise_checks import outside_solutions_mode  # noqa: F401  (autouse)


def test_a_code_attempt_is_noted_and_an_empty_cell_is_not(tmp_path, monkeypatch):
    path = tmp_path / ".ipu-lab" / "progress.jsonl"
    monkeypatch.setenv(progress.PROGRESS_VARIABLE, str(path))
    code_exercises.check_loop_on_device(...)                  # nothing written yet: no attempt
    assert not path.exists()
    feedback = code_exercises.check_loop_on_device(42)        # not a function: a hint
    attempts = progress.read(str(path))
    assert [(a.exercise, a.ok, a.said) for a in attempts] == [
        ("02.loop-on-device", False, feedback.text[:progress.SAID_CHARACTERS])]
