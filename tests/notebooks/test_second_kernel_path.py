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
share them (the root conftest.py): about the nbval runs' time again.
"""
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

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


@pytest.mark.parametrize("notebook", TENSORFLOW_NOTEBOOKS, ids=lambda p: p.name[:2])
def test_every_cell_passes_with_eigens_kernels(notebook, tmp_path):
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", IPU_LAB_SOLUTIONS="1",
               IPU_EMULATOR_DATA="sample")
    for attempt in (1, 2):
        client = NotebookClient(nbformat.read(notebook, as_version=4), timeout=600,
                                kernel_name="python3",
                                # in a folder of its own: the traces it saves, away from
                                # nbval's run of the same notebook
                                resources={"metadata": {"path": str(tmp_path)}})
        try:
            client.execute(env=env)
            return
        except CellExecutionError as error:
            # nbclient's message: the cell's source and the error; its end is enough.
            pytest.fail(f"{notebook.name}, with TF_ENABLE_ONEDNN_OPTS=0:\n{str(error)[-3000:]}",
                        pytrace=False)
        except Exception:  # pylint: disable=broad-except
            # The kernel did not start or answer (a port taken between its choice and its
            # bind, on a busy machine): once more, then the error.
            if attempt == 2 or client.code_cells_executed:
                raise
