"""A learner's path, in a real browser: open each notebook in JupyterLab and run it all.

nbval already checks that the notebooks execute; this checks what a person sees in
JupyterLab: every cell runs from the menu, no cell shows a traceback, the simulated traces
(matplotlib figures) are rendered in the page, and the widgets display.  Notebook 00 (widgets
only) has its own test in ``test_playground.py``.
"""
from pathlib import Path

import pytest

from lab_driver import (NOTEBOOKS, cell_states, colour_share, error_outputs, notebook_panel,
                        open_notebook, output_images, run_all_cells, save_notebook,
                        saved_notebook, screenshot, screenshots_dir)

pytestmark = pytest.mark.browser

TUTORIAL_NOTEBOOKS = sorted(p.name for p in Path(NOTEBOOKS).glob("[0-9][0-9]_*.ipynb")
                            if not p.name.startswith("00_"))
RUN_ALL_TIMEOUT = 300_000  # ms: the longest notebook takes about 40 s alone, more on a busy CI
# Notebooks whose figures are kept as screenshots (build/screenshots/), with how many of them
# are traces that must show their compute as the browser renders it: replicas (04) and
# pipelines (07).
TRACE_FIGURES = {"04": 1, "07": 5}
FORWARD, BACKWARD = "#0072B2", "#D55E00"


def test_every_tutorial_notebook_is_checked():
    assert [name[:2] for name in TUTORIAL_NOTEBOOKS] == [f"{n:02d}" for n in range(1, 12)]


@pytest.mark.parametrize("notebook", TUTORIAL_NOTEBOOKS)
def test_notebook_runs_in_jupyterlab_without_errors(notebook, page, lab, tmp_path):
    open_notebook(page, lab, notebook)
    run_all_cells(page, timeout=RUN_ALL_TIMEOUT)

    states = cell_states(page)
    assert states, "no code cells found in the page"
    assert error_outputs(page) == [], "a cell shows a traceback"
    not_run = [i for i, cell in enumerate(states) if cell["count"] == 0 and not cell["hidden"]]
    assert not_run == [], f"code cells {not_run} did not run"
    assert "Error displaying widget" not in notebook_panel(page).inner_text()

    # The notebook as JupyterLab saved it: output_type "error" is exact, whatever the text.
    save_notebook(page)
    errors = [(i, out.get("ename"), out.get("evalue"))
              for i, cell in enumerate(saved_notebook(lab, notebook)["cells"])
              for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert errors == []

    images = output_images(page)
    assert images.count() >= 1, "no matplotlib figure was rendered"
    first = images.first
    first.wait_for(state="visible")
    assert first.evaluate("img => img.complete && img.naturalWidth > 0"), "figure did not load"
    png = screenshot(first, tmp_path / "first_figure.png")
    assert png.startswith(b"\x89PNG") and len(png) > 1000
    screenshot(page, tmp_path / f"{notebook[:2]}.png")
    if notebook[:2] in TRACE_FIGURES:
        showing_compute = 0
        for index in range(images.count()):
            figure = screenshot(images.nth(index),
                                screenshots_dir() / f"{notebook[:2]}_figure{index}.png")
            # A trace's forward and backward boxes fill a visible part of it (not a grey
            # host bar and hairlines).
            showing_compute += all(colour_share(figure, colour) > 0.005
                                   for colour in (FORWARD, BACKWARD))
        assert showing_compute >= TRACE_FIGURES[notebook[:2]], (
            f"only {showing_compute} figures of {notebook} show forward and backward boxes")
