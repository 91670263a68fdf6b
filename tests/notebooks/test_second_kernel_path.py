"""The TensorFlow notebooks' lesson checks hold on a second CPU kernel path.

nbval runs every notebook in `make test` with TensorFlow's default kernels (oneDNN's, on an
x86 host).  A learner's laptop may compute float32 losses and accuracies through other
kernels, in another order, to other last bits, and a lesson check that pinned such a value
would fail there.  So each notebook that imports TensorFlow runs top to bottom a second time
here, in a kernel started with ``TF_ENABLE_ONEDNN_OPTS=0`` (Eigen's kernels), its exercises
solved as in nbval's run, and every cell, its lesson checks among them, must pass.  (On
2026-11-28, notebook 12's check of the float16 accumulators' loss difference failed this way:
0.0085 with oneDNN, 0.0017 with Eigen and on an AVX2-only host.)

Cost: one more run of each TensorFlow notebook, each a test of its own so that the workers
share them (the root conftest.py): about the nbval runs' time again, 10-30 s each; and 10 s
for the test that shows this path catching a pinned value.
"""
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tests.support.child_python import child_env, run_python

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def imports_tensorflow(path: Path) -> bool:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return any(cell["cell_type"] == "code" and "import tensorflow" in "".join(cell["source"])
               for cell in cells)


TENSORFLOW_NOTEBOOKS = [p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
                        if imports_tensorflow(p)]


def test_the_tensorflow_notebooks_are_found():
    assert [p.name[:2] for p in TENSORFLOW_NOTEBOOKS] == [
        "01", "02", "03", "05", "06", "07", "09", "11", "12"]


def run_on_eigens_kernels(notebook, folder):
    """Run ``notebook`` (a NotebookNode) top to bottom in a kernel with Eigen's kernels, in
    ``folder`` (the traces it saves stay there, away from nbval's run of the same notebook);
    returns the error text of the first cell that raised, or None."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", IPU_LAB_SOLUTIONS="1",
               IPU_EMULATOR_DATA="sample")
    for attempt in (1, 2):
        client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(folder)}})
        try:
            client.execute(env=env)
            return None
        except CellExecutionError as error:
            # nbclient's message: the cell's source and the error; its end is enough.
            return str(error)[-3000:]
        except Exception:  # pylint: disable=broad-except
            # The kernel did not start or answer (a port taken between its choice and its
            # bind, on a busy machine): once more, then the error.
            if attempt == 2 or client.code_cells_executed:
                raise
    return None


@pytest.mark.parametrize("notebook", TENSORFLOW_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_every_cell_passes_with_eigens_kernels(notebook, tmp_path):
    error = run_on_eigens_kernels(nbformat.read(notebook, as_version=4), tmp_path)
    if error:
        pytest.fail(f"{notebook.name}, with TF_ENABLE_ONEDNN_OPTS=0:\n{error}", pytrace=False)


# A float32 product whose summation order the kernels choose: its digest, as one cell.
PRODUCT_DIGEST = """\
import hashlib
import numpy as np
import tensorflow as tf
rng = np.random.default_rng(0)
a = rng.normal(size=(256, 1152)).astype(np.float32)
b = rng.normal(size=(1152, 512)).astype(np.float32)
digest = hashlib.sha1(tf.function(tf.matmul)(a, b).numpy().tobytes()).hexdigest()
"""


def test_a_check_pinning_a_value_the_kernels_compute_fails_here(tmp_path):
    """What this path is for: a lesson check that pins a float32 product as oneDNN's kernels
    computed it (a child with the default kernels) fails on Eigen's (about 10 s)."""
    pinned = run_python(PRODUCT_DIGEST + "print(digest)",
                        env=child_env(TF_ENABLE_ONEDNN_OPTS="1")).check().stdout.split()[-1]
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(PRODUCT_DIGEST),
        nbformat.v4.new_code_cell(f"# Lesson check: pinned\nassert digest == {pinned!r}")])
    error = run_on_eigens_kernels(notebook, tmp_path)
    assert error and "AssertionError" in error
