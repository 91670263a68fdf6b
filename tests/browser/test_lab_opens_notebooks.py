"""What a learner sees in JupyterLab, in a real browser.

nbval executes every notebook once per test run (with its lesson checks, legibility and memory
limits); running them all a second time here would prove little more.  What only a browser
shows is checked here instead:

- every tutorial notebook, opened as stored, renders its outputs: figures load, the traces
  show their compute, exercise feedback boxes and collapsed lesson checks are drawn, no cell
  shows a traceback and no widget fails to display;
- a TensorFlow notebook runs in a real JupyterLab kernel from the Run menu: an on-device loop
  trains, its simulated trace is drawn inline, an exercise check answers in a feedback box.

Notebook 08's widgets are driven by clicks in ``test_playground.py``.
"""
import json
import re
from pathlib import Path

import nbformat
import pytest

from tests.support.lab_driver import (NOTEBOOKS, cell_states, colour_share, error_outputs,
                                      notebook_panel, output_figures,
                                      output_images, run_all_cells, save_notebook,
                                      saved_notebook, screenshot, screenshots_dir,
                                      show_notebook)

pytestmark = pytest.mark.browser

# Every notebook but the pipeline playground (08), whose widgets test_playground.py drives.
PLAYGROUND = "08_"
TUTORIAL_NOTEBOOKS = sorted(p.name for p in Path(NOTEBOOKS).glob("[0-9][0-9]_*.ipynb")
                            if not p.name.startswith(PLAYGROUND))
# Notebooks whose stored figures are kept as screenshots (build/screenshots/), with how many
# of them are traces that must show their compute as the browser renders it: replicas (05)
# and pipelines (09).
TRACE_FIGURES = {"05": 1, "09": 5}
FORWARD, BACKWARD = "#0072B2", "#D55E00"
FEEDBACK = re.compile(r"^(Right|Not yet)\b")


def test_every_tutorial_notebook_is_checked():
    assert [name[:2] for name in TUTORIAL_NOTEBOOKS] == [f"{n:02d}" for n in range(13) if n != 8]


def _stored(notebook: str) -> dict:
    return json.loads((Path(NOTEBOOKS) / notebook).read_text(encoding="utf-8"))


def _feedback_count(stored: dict) -> int:
    """Exercise feedback boxes among the stored outputs ("Right ..." or "Not yet ...")."""
    return sum(bool(FEEDBACK.search(re.sub(r"<[^>]+>", "", "".join(out["data"]["text/html"]))))
               for cell in stored["cells"] for out in cell.get("outputs", [])
               if "text/html" in out.get("data", {}))


@pytest.mark.parametrize("notebook", TUTORIAL_NOTEBOOKS)
def test_stored_notebook_renders_in_jupyterlab(notebook, shared_page, lab):
    page = shared_page
    stored = _stored(notebook)
    # In the JupyterLab the page shows already (the first test loads it): a learner opening
    # one notebook after another, the one before closed.
    show_notebook(page, lab, notebook, kernel=False)
    panel = notebook_panel(page)
    collapsed = [cell.get("metadata", {}).get("jupyter", {}).get("source_hidden", False)
                 for cell in stored["cells"] if cell["cell_type"] == "code"]
    page.wait_for_function(  # every code cell drawn, with its stored outputs
        "([panel, n]) => panel.querySelectorAll('.jp-Notebook .jp-CodeCell').length === n",
        arg=[panel.element_handle(), len(collapsed)])

    assert error_outputs(page) == [], "a stored cell shows a traceback"
    assert "Error displaying widget" not in panel.inner_text()
    # A lesson check's source is collapsed: the page shows a placeholder, not its code.
    assert [state["hidden"] for state in cell_states(page)] == collapsed
    feedback = panel.locator(".jp-RenderedHTMLCommon").filter(has_text=FEEDBACK)
    assert feedback.count() == _feedback_count(stored)

    assert output_figures(page).count() >= 1, "no figure was rendered"
    images = output_images(page)
    for index in range(images.count()):
        image = images.nth(index)
        image.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0",  # it loads
                               arg=image.element_handle())
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


# A short lesson in the notebooks' own style: TF1 graph mode, an on-device loop, the recorded
# engine run simulated and drawn, and an exercise check.
TENSORFLOW_NOTEBOOK = "browser_tensorflow_run.ipynb"
TENSORFLOW_CELLS = [
    """\
import ipu_emulator
import tensorflow.compat.v1 as tf
tf.get_logger().setLevel("ERROR")
tf.disable_v2_behavior()
from ipu_emulator import ipu, record, views
import matplotlib.pyplot as plt
import numpy as np""",
    """\
STEPS = 50
rng = np.random.RandomState(0)
x = rng.randn(STEPS * 8, 4).astype(np.float32)
y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)).astype(np.float32)
infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
    tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True).repeat())
losses = ipu.ipu_outfeed_queue.IPUOutfeedQueue()


def body(x, y):
    w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer(), use_resource=True)
    loss = tf.reduce_mean(tf.square(x @ w - y))
    return [losses.enqueue(loss), tf.train.GradientDescentOptimizer(0.05).minimize(loss)]


config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()
with ipu.scopes.ipu_scope("/device:IPU:0"):
    train = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(STEPS, body, infeed_queue=infeed))
with record.capture() as runs, tf.Session() as sess:
    sess.run([tf.global_variables_initializer(), infeed.initializer])
    sess.run(train)
    step_losses = sess.run(losses.dequeue())
print(f"loss {step_losses[0]:.2f} -> {step_losses[-1]:.4f} in {runs.engine_runs} engine run")
assert step_losses[-1] < 0.1 * step_losses[0] and runs.engine_runs == 1""",
    """\
timeline = runs.simulate(target="ipu2", batch_size=8, title="50 steps, one engine run")
fig, ax = plt.subplots(figsize=(10, 2.4))
views.plot_timeline(timeline, ax=ax, time_unit="µs", fold_idle=False,
                    window=views.ipu_window(timeline, iterations=range(3)))
fig.tight_layout()
plt.show()""",
    """\
from ipu_emulator.exercises import nb05_replication as exercises
exercises.check_all_reduce_bytes(3)""",
]


def test_a_tensorflow_notebook_runs_in_a_jupyterlab_kernel(shared_page, lab):
    page = shared_page
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in TENSORFLOW_CELLS]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, Path(lab.root_dir) / TENSORFLOW_NOTEBOOK)

    show_notebook(page, lab, TENSORFLOW_NOTEBOOK)
    run_all_cells(page)

    states = cell_states(page)
    assert [state["count"] for state in states] == [1, 2, 3, 4], states
    assert error_outputs(page) == [], "a cell shows a traceback"
    save_notebook(page)
    saved = saved_notebook(lab, TENSORFLOW_NOTEBOOK)
    errors = [(out.get("ename"), out.get("evalue")) for cell in saved["cells"]
              for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert errors == []
    printed = "".join("".join(out.get("text", "")) for out in saved["cells"][1]["outputs"])
    assert "in 1 engine run" in printed

    trace = output_images(page).first
    trace.wait_for(state="visible")
    png = screenshot(trace, screenshots_dir() / "tensorflow_run_trace.png")
    assert all(colour_share(png, colour) > 0.005 for colour in (FORWARD, BACKWARD)), (
        "the inline trace does not show the loop's forward and backward boxes")
    feedback = notebook_panel(page).locator(".jp-RenderedHTMLCommon").filter(has_text=FEEDBACK)
    feedback.first.wait_for(state="visible")
    assert feedback.first.inner_text().startswith("Not yet")
