"""Every figure stored in a notebook is a picture: an output saying ``<Figure size ...>``
carries the image too (a notebook saved from a kernel without the inline backend, such as
one run with MPLBACKEND=Agg, stores the text alone, and learners see no trace).

Only the stored outputs are read. A stored PNG cannot be read back for legibility, so the
matplotlib figures are checked when the notebooks run (tests/support/notebook_checks.py); a
stored SVG trace is text, and is checked here as the learner first sees it."""
import json
from pathlib import Path

import pytest

from ipu_emulator.views.legibility import svg_problems

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
IMAGES = ("image/png", "image/svg+xml")


def bare_figures(notebook: Path):
    """(cell index, figure text) of each figure output without an image."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = data.get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if text.startswith("<Figure size") and not any(kind in data for kind in IMAGES):
                yield index, text.strip()


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_every_stored_figure_is_an_image(notebook):
    bare = [f"cell {index}: {text}" for index, text in bare_figures(notebook)]
    assert not bare, f"{notebook.name} stores figures as text only: " + "; ".join(bare)


def test_a_bare_figure_is_found(tmp_path):
    notebook = tmp_path / "n.ipynb"
    figure = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
              "data": {"text/plain": ["<Figure size 1000x400 with 2 Axes>"]}}
    shown = dict(figure, data=dict(figure["data"], **{"image/png": "iVBORw0KGgo="}))
    notebook.write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": "fig", "metadata": {}, "outputs": [shown]},
        {"cell_type": "markdown", "source": "text", "metadata": {}},
        {"cell_type": "code", "source": "fig", "metadata": {}, "outputs": [figure]},
    ]}), encoding="utf-8")
    assert list(bare_figures(notebook)) == [(2, "<Figure size 1000x400 with 2 Axes>")]


# A trace drawn to scale (``fold_idle=False``) is meant to show compute as hairlines against a
# long launch; every other problem still counts there.
TO_SCALE = "fold_idle=False"
HAIRLINES = "compute drawn only as boxes"


def stored_svgs(notebook: Path):
    """(cell index, the cell's source, SVG text) of each stored SVG output."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        for output in cell.get("outputs", []):
            svg = output.get("data", {}).get("image/svg+xml")
            if svg:
                yield index, source, "".join(svg) if isinstance(svg, list) else svg


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_every_stored_svg_trace_is_legible(notebook):
    problems = []
    for index, source, svg in stored_svgs(notebook):
        for problem in svg_problems(svg):
            if not (TO_SCALE in source and HAIRLINES in problem):
                problems.append(f"cell {index}: {problem}")
    assert not problems, f"{notebook.name}: " + "; ".join(problems[:5])
