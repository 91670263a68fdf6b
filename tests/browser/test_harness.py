"""Checks of the browser-test helpers themselves (``lab_driver.py``), on small notebooks
written into the server's copy of ``notebooks/``: they tell tracebacks from warnings, see
that Run All stops at an error, compare screenshots, and drive an ipywidgets Dropdown.
"""
import nbformat
import pytest

from tests.support.lab_driver import (cell_states, error_outputs, image_src, images_differ, show_notebook,
                        output_images, pixel_difference, run_all_cells, screenshot,
                        select_dropdown, wait_for_image_change)

pytestmark = pytest.mark.browser


def write_notebook(path, sources, collapsed=()):
    """Code cells with these sources; those whose index is in ``collapsed`` are lesson
    checks, their source hidden as the notebooks store them."""
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}})
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    for index in collapsed:
        notebook.cells[index].metadata = {"tags": ["lesson-check"],
                                          "jupyter": {"source_hidden": True}}
    nbformat.write(notebook, path)


def test_collapsed_lesson_checks_run_and_a_failing_one_stops_the_run(shared_page, lab):
    """A collapsed cell shows no execution count: Run All still finishes, and a failing
    collapsed check is seen as the error that stopped it."""
    write_notebook(lab.root_dir / "collapsed_check.ipynb",
                   ["x = 1", "# Lesson check: x\nassert x == 1", "y = 2",
                    "# Lesson check: y\nassert y == 3", "print('never runs')"],
                   collapsed=(1, 3))
    page = shared_page
    show_notebook(page, lab, "collapsed_check.ipynb")
    run_all_cells(page, timeout=60_000)

    states = cell_states(page)
    assert [cell["hidden"] for cell in states] == [False, True, False, True, False]
    assert [cell["error"] for cell in states] == [False, False, False, True, False]
    assert states[2]["count"] > 0 and states[-1]["count"] == 0
    assert any("AssertionError" in error for error in error_outputs(page))


def test_harness_tells_tracebacks_from_warnings(shared_page, lab):
    """The helpers themselves: stderr warnings are not errors, a traceback is, Run All stops
    there, and screenshots of different figures differ while the same figure does not."""
    write_notebook(lab.root_dir / "harness_check.ipynb", [
        "import sys, warnings\nwarnings.warn('only a warning')\n"
        "print('ValueError-ish text on stderr', file=sys.stderr)",
        "import matplotlib.pyplot as plt\n"
        "for slope in (1, 1, -1):\n"
        "    plt.figure(figsize=(3, 2)); plt.plot([0, 1], [0, slope]); plt.show()",
        "1 / 0",
        "print('never runs')",
    ])

    page = shared_page
    show_notebook(page, lab, "harness_check.ipynb")
    run_all_cells(page, timeout=60_000)

    errors = error_outputs(page)
    assert len(errors) == 1 and "ZeroDivisionError" in errors[0]
    assert [cell["error"] for cell in cell_states(page)] == [False, False, True, False]
    assert cell_states(page)[-1]["count"] == 0          # Run All stopped at the error

    images = output_images(page)
    assert images.count() == 3
    same_a, same_b, other = (screenshot(images.nth(i)) for i in range(3))
    assert pixel_difference(same_a, same_b) == 0.0
    assert images_differ(same_a, other)


def test_harness_drives_a_widget(shared_page, lab):
    """The widget helpers: choosing a Dropdown option redraws an ipywidgets Image."""
    write_notebook(lab.root_dir / "widget_check.ipynb", [
        "import io\n"
        "import ipywidgets as w\n"
        "from matplotlib.figure import Figure\n"
        "def draw(slope):\n"
        "    fig = Figure(figsize=(3, 2)); fig.subplots().plot([0, 1], [0, slope])\n"
        "    buffer = io.BytesIO(); fig.savefig(buffer, format='png'); return buffer.getvalue()\n"
        "choice = w.Dropdown(options=[('rising', 1), ('falling', -1)], value=1,\n"
        "                    description='slope')\n"
        "image = w.Image(value=draw(1), format='png')\n"
        "choice.observe(lambda change: setattr(image, 'value', draw(change['new'])), 'value')\n"
        "w.VBox([choice, image])"])

    page = shared_page
    show_notebook(page, lab, "widget_check.ipynb")
    run_all_cells(page, timeout=60_000)

    image = output_images(page).first
    image.wait_for(state="visible")
    before_png, before_src = screenshot(image), image_src(image)
    select_dropdown(page, "slope", "falling")
    wait_for_image_change(image, before_src)
    assert images_differ(before_png, screenshot(image))
