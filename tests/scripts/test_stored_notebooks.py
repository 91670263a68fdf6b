"""Every figure stored in a notebook is a picture: an output saying ``<Figure size ...>``
carries the image too (a notebook saved from a kernel without the inline backend, such as
one run with MPLBACKEND=Agg, stores the text alone, and learners see no trace).

Only the stored outputs are read; the figures' legibility is checked when the notebooks run
(tests/support/notebook_checks.py), since a stored PNG cannot be checked that way."""
import json
from pathlib import Path

import pytest

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
