"""The exercises as a learner first meets them, in the stored notebooks: each "your turn"
cell ran unsolved and shows feedback that asks for an answer (never a traceback), and each
is followed by a solution the learner can reveal.  (The test command also runs every
notebook with the solutions filled in: IPU_LAB_SOLUTIONS=1 in the Makefile.)"""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
CHECK_CALL = re.compile(r"\bexercises\.check_\w+\(")


def text_of(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def exercise_cells(notebook: Path):
    """(index, cell, the next cell) of each code cell that calls an exercise's check."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and CHECK_CALL.search(text_of(cell["source"])):
            yield index, cell, cells[index + 1] if index + 1 < len(cells) else None


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_each_exercise_is_stored_unsolved_with_feedback_and_a_solution(notebook):
    for index, cell, following in exercise_cells(notebook):
        outputs = cell.get("outputs", [])
        assert not [o for o in outputs if o["output_type"] == "error"], f"cell {index}"
        shown = " ".join(text_of(o.get("data", {}).get("text/plain", "")) for o in outputs)
        assert "Replace ... with your answer" in shown, (
            f"{notebook.name} cell {index} should be stored unsolved, asking for an answer; "
            f"it shows {shown[:200]!r}")
        assert following is not None and following["cell_type"] == "markdown" and \
            "<details>" in text_of(following["source"]), (
                f"{notebook.name} cell {index} is not followed by a solution in <details>")


CODE_CHECK_CALL = re.compile(r"\bcode_exercises\.check_\w+\(")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_each_code_exercise_is_stored_as_its_starting_code_with_feedback_and_a_solution(
        notebook):
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if "code-exercise" not in cell.get("metadata", {}).get("tags", []):
            continue
        check, solution = cells[index + 1], cells[index + 2]
        assert CODE_CHECK_CALL.search(text_of(check["source"])), (
            f"{notebook.name} cell {index}: a code exercise is followed by its check")
        outputs = check.get("outputs", [])
        assert not [o for o in outputs if o["output_type"] == "error"], f"cell {index + 1}"
        shown = " ".join(text_of(o.get("data", {}).get("text/plain", "")) for o in outputs)
        assert shown.startswith("Not yet."), (
            f"{notebook.name} cell {index + 1} should show the starting code's feedback; it "
            f"shows {shown[:200]!r}")
        assert solution["cell_type"] == "markdown" and "<details>" in text_of(
            solution["source"]), f"{notebook.name} cell {index + 1} has no solution after it"


def code_exercise_count(notebook: Path) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum("code-exercise" in c.get("metadata", {}).get("tags", []) for c in cells)


def uses_tensorflow(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return any("import tensorflow" in text_of(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_every_notebook_has_an_exercise_and_a_tensorflow_notebook_a_code_exercise(notebook):
    code = code_exercise_count(notebook)
    assert code + len(list(exercise_cells(notebook))) >= 1, f"{notebook.name} has no exercise"
    if uses_tensorflow(notebook):
        assert code >= 1, f"{notebook.name} uses TensorFlow but asks for no IPU code"


def test_at_least_half_of_the_labs_exercises_are_code_exercises():
    code = sum(code_exercise_count(n) for n in NOTEBOOKS)
    numeric = sum(len(list(exercise_cells(n))) for n in NOTEBOOKS)
    assert code >= numeric, f"{code} code exercises against {numeric} numeric ones"
