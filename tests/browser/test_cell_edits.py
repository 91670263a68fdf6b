"""The lab's JupyterLab extension (jupyter/lab/extensions/ipu-lab-cell-edits) in JupyterLab: a
check refuses a function whose cell was edited in the editor and not run again, before any save,
and again after the page is reloaded while the kernel runs; the cell run again is judged."""
import nbformat
import pytest

from tests.support.lab_driver import (cell_outputs, code_cell, run_cell, show_notebook,
                                      wait_for_notebook)

pytestmark = pytest.mark.browser

EDITED_NOW = "the cell holds other code now"
SOURCES = [
    "from ipu_emulator.code_exercises import cell_runs",
    "def train():\n    return 1",
    "print(cell_runs.stale(train) or 'judged')",
]


def write_notebook(path):
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}})
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in SOURCES]
    nbformat.write(notebook, path)


def verdict(page):
    run_cell(page, 2)
    return cell_outputs(page, 2).inner_text()


def edit_the_exercise(page, text):
    code_cell(page, 1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)


def test_an_edit_not_run_is_seen_before_it_is_saved_and_after_a_reload(shared_page, lab):
    page = shared_page
    write_notebook(lab.root_dir / "cell_edits.ipynb")
    show_notebook(page, lab, "cell_edits.ipynb")
    run_cell(page, 0)
    run_cell(page, 1)
    assert verdict(page).strip() == "judged"

    edit_the_exercise(page, "  # edited")   # not run, not saved (autosave waits 15 s)
    text = verdict(page)
    assert "Run the exercise cell first: it was changed after its last run" in text, text
    assert EDITED_NOW in text, text

    run_cell(page, 1)
    assert verdict(page).strip() == "judged"

    # A reload while the kernel runs: the extension finds the kernel's comm and opens its own.
    page.reload(wait_until="domcontentloaded")
    wait_for_notebook(page, "cell_edits.ipynb")
    edit_the_exercise(page, "\n# edited after the reload")
    text = verdict(page)
    assert EDITED_NOW in text, text
    # The next module loads JupyterLab anew: after a reload JupyterLab opens this notebook
    # again late (its URL's), and it became the current tab over the next notebook opened.
    page.goto("about:blank")
