"""What a learner sees on opening a stored notebook: outputs free of this machine's paths,
framework log lines, deprecation notes, NumPy scalar reprs and half-drawn progress bars; and
the lesson checks (the asserts that guard each lesson under the test run) kept out of the
teaching cells, in collapsed cells tagged ``lesson-check`` that print nothing."""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
LESSON_CHECK = "lesson-check"

NOISE = {
    "a local path": re.compile(r"/work/|/tmp/|/home/|/root/|\.venv\b|site-packages|ipykernel_"),
    "a framework log line": re.compile(r"^(WARNING|INFO|ERROR):(tensorflow|absl)|^[IWE]\d{4} ",
                                       re.M),
    "a deprecation note": re.compile(r"is deprecated|DeprecationWarning|FutureWarning"),
    "a NumPy scalar repr": re.compile(r"\bnp\.(float|int|bool_)\w*\("),
    "a progress bar": re.compile(r"\d+%\|[^\n]*\|\s*\d+/\d+|\bit/s\]"),
}
ASSERT = re.compile(r"^\s*assert\b", re.M)


def text_of(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def output_text(output) -> str:
    if output["output_type"] == "stream":
        return text_of(output["text"])
    if output["output_type"] == "error":
        return "\n".join(output.get("traceback", []))
    return text_of(output.get("data", {}).get("text/plain", ""))


def noise_in(cells):
    """(cell index, what, the line) of each noisy line in the cells' outputs."""
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            for line in output_text(output).splitlines():
                for what, pattern in NOISE.items():
                    if pattern.search(line):
                        yield index, what, line.strip()[:120]


def misplaced_checks(cells):
    """(cell index, problem) of each assert outside a lesson-check cell and each lesson-check
    cell that is not collapsed, not labelled or prints something."""
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = text_of(cell["source"])
        if LESSON_CHECK not in cell.get("metadata", {}).get("tags", []):
            if ASSERT.search(source):
                yield index, "asserts in a teaching cell (move them to a lesson-check cell)"
            continue
        if not cell["metadata"].get("jupyter", {}).get("source_hidden"):
            yield index, "lesson-check cell not collapsed (jupyter.source_hidden)"
        if not source.startswith("# Lesson check:"):
            yield index, "lesson-check cell does not start with '# Lesson check: ...'"
        if cell.get("outputs"):
            yield index, "lesson-check cell prints something"


def cells_of(notebook: Path):
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_stored_outputs_show_no_noise(notebook):
    found = [f"cell {index}: {what}: {line!r}" for index, what, line in noise_in(cells_of(notebook))]
    assert not found, f"{notebook.name}:\n" + "\n".join(found)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_lesson_checks_are_out_of_the_learners_way(notebook):
    cells = cells_of(notebook)
    found = [f"cell {index}: {problem}" for index, problem in misplaced_checks(cells)]
    assert not found, f"{notebook.name}:\n" + "\n".join(found)
    assert any(LESSON_CHECK in cell.get("metadata", {}).get("tags", []) for cell in cells), (
        f"{notebook.name} has no lesson checks: its lessons are not guarded")


def code_cell(source, outputs=(), tags=(), hidden=False):
    metadata = {"tags": list(tags)}
    if hidden:
        metadata["jupyter"] = {"source_hidden": True}
    return {"cell_type": "code", "source": source, "metadata": metadata, "outputs": list(outputs)}


def test_the_checks_find_each_kind_of_noise_and_misplaced_check():
    stream = {"output_type": "stream", "name": "stderr", "text": (
        "WARNING:tensorflow:From /work/main/.venv/lib/x.py:98: f is deprecated\n"
        "epoch 1/3:   0%|          | 0/125 [00:00<?, ?it/s]\n"
        "{'loss': np.float32(2.33)}\n")}
    found = {what for _, what, _ in noise_in([code_cell("x", [stream])])}
    assert found == set(NOISE)
    clean = {"output_type": "stream", "name": "stdout", "text": "epoch 3/3: 125/125 in 1.4 s\n"}
    assert not list(noise_in([code_cell("x", [clean])]))

    cells = [code_cell("x = 1\nassert x == 1"),
             code_cell("# Lesson check: x\nassert x == 1", tags=[LESSON_CHECK], hidden=True),
             code_cell("assert x == 1", [clean], tags=[LESSON_CHECK])]
    problems = [(index, problem.split(" (")[0]) for index, problem in misplaced_checks(cells)]
    assert problems == [(0, "asserts in a teaching cell"),
                        (2, "lesson-check cell not collapsed"),
                        (2, "lesson-check cell does not start with '# Lesson check: ...'"),
                        (2, "lesson-check cell prints something")]
