"""scripts/refresh_notebooks.py keeps what a learner should read and drops TF's start-up lines."""
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import refresh_notebooks  # noqa: E402


def test_start_up_lines_go_and_real_warnings_stay(tmp_path):
    notebook = nbformat.v4.new_notebook()
    noisy = nbformat.v4.new_code_cell("import tensorflow")
    noisy.outputs = [nbformat.v4.new_output(
        "stream", name="stderr",
        text="WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
             "I0000 00:00:1795327081.423709    9387 port.cc:153] oneDNN custom operations are on.\n"
             "E0000 00:00:1795327086.577099    9387 cuda_platform.cc:52] failed call to cuInit\n")]
    mixed = nbformat.v4.new_code_cell("train()")
    mixed.outputs = [
        nbformat.v4.new_output("stream", name="stderr",
                               text="I0000 00:00:1.0 1 port.cc:1] noise\n"
                                    "UserWarning: the bundled sample is used\n"),
        nbformat.v4.new_output("stream", name="stdout", text="I0000 on stdout stays\n")]
    notebook.cells = [noisy, mixed]
    path = tmp_path / "n.ipynb"
    nbformat.write(notebook, path)

    assert refresh_notebooks.strip_startup_noise(path) == 4
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].outputs == []
    assert [o.text for o in cells[1].outputs] == ["UserWarning: the bundled sample is used\n",
                                                  "I0000 on stdout stays\n"]
