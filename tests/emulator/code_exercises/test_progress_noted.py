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


def test_the_course_names_exactly_the_registered_exercises():
    """The course list (plain data, for the progress command) against the registries, which
    fill as the exercise modules are imported."""
    import importlib
    import pkgutil

    import ipu_emulator.code_exercises as code_package
    import ipu_emulator.exercises as numeric_package
    from ipu_emulator.exercises.course import COURSE

    for package in (code_package, numeric_package):
        for module in pkgutil.iter_modules(package.__path__):
            if module.name.startswith("nb"):
                importlib.import_module(f"{package.__name__}.{module.name}")
    registered = set(code_package.CODE_REGISTRY) | {
        name for name in numeric_package.REGISTRY if name[:2].isdigit()}
    assert sorted(COURSE) == sorted(registered)
    assert list(COURSE) == sorted(COURSE, key=lambda name: name[:2])   # notebook order
