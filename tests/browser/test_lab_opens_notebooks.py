"""A learner's first step, in a real browser: open notebook 01 in JupyterLab and run it all.

nbval already checks that the notebooks execute; this checks what a person sees in
JupyterLab: every cell runs from the menu, no cell shows a traceback, and the simulated trace
(a matplotlib figure) is rendered in the page.
"""
import pytest

from lab_driver import (cell_states, error_outputs, open_notebook, output_images,
                        run_all_cells, save_notebook, saved_notebook, screenshot)

pytestmark = pytest.mark.browser

NOTEBOOK = "01_porting_a_simple_example.ipynb"


def test_notebook_01_runs_in_jupyterlab_without_errors(page, lab, tmp_path):
    open_notebook(page, lab, NOTEBOOK)
    run_all_cells(page)

    states = cell_states(page)
    assert states, "no code cells found in the page"
    assert error_outputs(page) == [], "a cell shows a traceback"
    not_run = [i for i, cell in enumerate(states) if cell["count"] == 0]
    assert not_run == [], f"code cells {not_run} did not run"

    # The notebook as JupyterLab saved it: output_type "error" is exact, whatever the text.
    save_notebook(page)
    errors = [(i, out.get("ename"), out.get("evalue"))
              for i, cell in enumerate(saved_notebook(lab, NOTEBOOK)["cells"])
              for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert errors == []

    images = output_images(page)
    assert images.count() >= 1, "no matplotlib figure was rendered"
    first = images.first
    first.wait_for(state="visible")
    assert first.evaluate("img => img.complete && img.naturalWidth > 0"), "figure did not load"

    png = screenshot(first, tmp_path / "first_figure.png")
    assert png.startswith(b"\x89PNG") and len(png) > 1000
    screenshot(page, tmp_path / "notebook_01.png")

