"""The learners' progress files and the instructor's view of them (``python -m ipu_emulator
progress``): what a check writes, what survives a killed kernel's torn line, who is stuck."""
import json
import os

import pytest

from ipu_emulator.__main__ import main
from ipu_emulator.cli import progress as progress_command
from ipu_emulator.exercises import REGISTRY, exercise, not_yet, right
from ipu_emulator.exercises import progress
import importlib
import pkgutil

import ipu_emulator.exercises as exercises_package

for _module in pkgutil.iter_modules(exercises_package.__path__):   # every numeric exercise
    importlib.import_module(f"{exercises_package.__name__}.{_module.name}")


@exercise("test.progress-demo", solution=lambda: 4, wrong=(3,))
def check_four(answer):
    return right("four") if answer == 4 else not_yet("count again")


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "home" / ".ipu-lab" / "progress.jsonl"
    monkeypatch.setenv(progress.PROGRESS_VARIABLE, str(path))
    monkeypatch.delenv("IPU_LAB_SOLUTIONS", raising=False)
    return path


def test_every_answer_checked_is_noted_with_its_outcome_and_feedback(progress_file):
    check_four(3)
    check_four(...)        # the cell run with no answer yet: not an attempt
    check_four(4)
    attempts = progress.read(str(progress_file))
    assert [(a.exercise, a.ok) for a in attempts] == [("test.progress-demo", False),
                                                      ("test.progress-demo", True)]
    assert attempts[0].said == "Not yet. Hint: count again"
    assert attempts[1].said == "Right: four"
    assert attempts[0].time <= attempts[1].time


def test_nothing_is_noted_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    home = os.environ.get("HOME", "")
    before = os.path.exists(os.path.join(home, ".ipu-lab"))
    assert check_four(4).ok
    assert os.listdir(tmp_path) == []
    assert os.path.exists(os.path.join(home, ".ipu-lab")) == before


def test_an_unwritable_progress_file_never_fails_a_check(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(progress.PROGRESS_VARIABLE, str(blocker / "progress.jsonl"))
    assert check_four(4).ok
    assert check_four(3).text == "Not yet. Hint: count again"


def test_a_line_torn_by_a_killed_kernel_is_skipped_and_the_next_one_kept(progress_file):
    check_four(4)
    with open(progress_file, "a") as f:
        f.write('{"time": 12.5, "exercise": "test.progress-de')   # killed mid-write
    check_four(3)                                                    # the next kernel appends
    assert [a.ok for a in progress.read(str(progress_file))] == [True, False]


def test_stuck_means_three_not_yet_in_a_row_since_the_last_right():
    A = progress.Attempt
    two = [A(1, "x", False), A(2, "x", False)]
    assert progress.summarise("a", two, now=3).status == "working"
    three = two + [A(3, "x", False)]
    assert progress.summarise("a", three, now=4).status == "stuck"
    assert progress.summarise("a", three + [A(4, "x", True)], now=5).status == "working"
    # misses at another exercise do not count towards the current one
    mixed = [A(1, "x", False), A(2, "x", False), A(3, "y", False)]
    p = progress.summarise("a", mixed, now=4)
    assert (p.current, p.misses_in_a_row, p.status) == ("y", 1, "working")
    quiet = progress.summarise("a", [A(0, "x", True)], now=progress.QUIET_AFTER_S + 1)
    assert quiet.status == "quiet"


def test_right_exercises_are_listed_in_course_order_once():
    A = progress.Attempt
    attempts = [A(1, "08.b", True), A(2, "01.a", True), A(3, "08.b", True), A(4, "05.c", False)]
    p = progress.summarise("a", attempts, now=5, course=["01.a", "05.c", "08.b"])
    assert p.right == ["01.a", "08.b"]


def write_attempts(home, *attempts):
    path = progress.progress_file(str(home))
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        for t, name, ok in attempts:
            f.write(json.dumps({"time": t, "exercise": name, "ok": ok, "said": "..."}) + "\n")


@pytest.fixture
def homes(tmp_path):
    homes = tmp_path / "homes"
    write_attempts(homes / "ada", (100, "01.port-the-model", True), (200, "02.loop-on-device", True))
    write_attempts(homes / "bob", *[(100 + i, "02.loop-on-device", False) for i in range(3)])
    write_attempts(homes / "cy", (10, "01.port-the-model", True))
    (homes / "dee").mkdir()
    return homes


def test_the_class_view_puts_stuck_then_quiet_learners_first(homes):
    now = 10 + progress.QUIET_AFTER_S + 5
    rows = progress.class_progress(str(homes), now=now)
    assert [(p.learner, p.status) for p in rows] == [
        ("bob", "stuck"), ("cy", "quiet"), ("ada", "working"), ("dee", "not started")]


def test_the_command_prints_one_line_a_learner(homes, capsys):
    assert main(["progress", str(homes)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"4 learner(s) in {homes}, {len(progress_command.course_exercises())} "
                             "exercises in the course")
    bob = next(line for line in out if line.startswith("bob "))
    assert "stuck" in bob and "02.loop-on-device" in bob and " 3 " in bob


def test_the_command_speaks_json(homes, capsys):
    assert main(["progress", "--json", str(homes)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    ada = next(r for r in rows if r["learner"] == "ada")
    assert ada["right"] == ["01.port-the-model", "02.loop-on-device"]
    assert ada["exercises"] == len(progress_command.course_exercises())


def test_the_command_says_when_the_homes_are_missing(tmp_path, capsys):
    assert main(["progress", str(tmp_path / "nowhere")]) == 1
    assert "no such folder of learners' homes" in capsys.readouterr().err


def test_the_course_lists_every_numeric_exercise_in_notebook_order():
    course = progress_command.course_exercises()
    numeric = {name for name in REGISTRY if name[:2].isdigit()}
    assert numeric <= set(course)
    assert course == sorted(course, key=lambda name: name[:2])
    assert len(course) == len(set(course))
