"""The TensorFlow notebooks' lesson checks hold on both of TensorFlow's x86 CPU kernel paths.

nbval runs half of the TensorFlow notebooks on oneDNN's kernels and half on Eigen's
(tests/support/kernel_paths.py), and `make test-colab` swaps them, so CI runs each on both; a
notebook whose kernel did not start on its assigned path fails its cells (the same plugin,
from what the kernel logged: tests/support/notebook_checks.py).  Here: the split itself, and what the second path is for.
"""
import os

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tests.support.child_python import child_env, run_code
from tests.support.intraop_threads import VARIABLE as INTRAOP_VARIABLE
from tests.support.kernel_paths import (EIGEN, ONEDNN, SWAP_VARIABLE, assigned_paths,
                                        kernel_paths, kernel_settings, tensorflow_notebooks)
from tests.support.notebook_kernels import UnixSocketKernelManager


def test_the_tensorflow_notebooks_are_found():
    assert [name[:2] for name in tensorflow_notebooks()] == [
        "01", "02", "03", "05", "06", "07", "09", "11", "12"]


def test_each_stage_runs_both_paths_and_the_two_stages_every_notebook_on_each():
    notebooks = tensorflow_notebooks()
    ours, colabs = kernel_paths(notebooks), kernel_paths(notebooks, swapped=True)
    assert set(ours) == set(colabs) == set(notebooks)
    for paths in (ours, colabs):
        assert sorted(set(paths.values())) == [EIGEN, ONEDNN]
    assert all({ours[name], colabs[name]} == {EIGEN, ONEDNN} for name in notebooks)
    # notebook 12's float16 check is the one that failed on Eigen's kernels (2026-11-28)
    assert ours["12_further_considerations.ipynb"] == EIGEN
    expected = colabs if os.environ.get(SWAP_VARIABLE) == "swapped" else ours
    assert assigned_paths() == expected


def run_on_path(notebook, folder, onednn: bool):
    """Run ``notebook`` (a NotebookNode) top to bottom in a kernel with oneDNN's kernels or
    Eigen's, started with what nbval changes for a notebook's (``kernel_settings``), in
    ``folder``; returns the error text of the first cell that raised, or None."""
    env = child_env(**kernel_settings(ONEDNN if onednn else EIGEN))
    # Over Unix sockets, as the notebook run's kernels (no port to lose before the kernel
    # binds it: tests/support/notebook_kernels.py).
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            kernel_manager_class=UnixSocketKernelManager,
                            resources={"metadata": {"path": str(folder)}})
    try:
        client.execute(env=env)
        return None
    except CellExecutionError as error:
        # nbclient's message: the cell's source and the error; its end is enough.
        return str(error)[-3000:]


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


def default_path_digest():
    """PRODUCT_DIGEST as the host's default kernel path computes it (oneDNN's on most x86
    hosts, Eigen's on some AMD ones) in a notebook's kernel, in a child forked from the
    preloaded Python: (whether that path is oneDNN's, the digest).  The child drops the tests'
    one intra-op thread before its first op, as a notebook's kernel starts without it."""
    code = (f"import os\nos.environ.pop({INTRAOP_VARIABLE!r}, None)\n" + PRODUCT_DIGEST
            + "from tensorflow.python.util import _pywrap_util_port\n"
              "print(_pywrap_util_port.IsMklEnabled(), digest)")
    onednn, digest = run_code(code).check().stdout.split()[-2:]
    assert onednn in ("True", "False")
    return onednn == "True", digest


def test_a_check_pinning_a_value_the_kernels_compute_fails_on_the_other_path(tmp_path):
    """What the second path is for: a lesson check that pins a float32 product as the host's
    default path computed it fails on the other path (about 4 s of CPU, most of it the
    notebook's kernel on the other path, a new process).  Until 2026-12-01 the value pinned
    was always oneDNN's: on a host whose default is Eigen's that took one more TensorFlow
    process, a new one asking for oneDNN.  Until 2026-12-02 both ran with the tests' one
    intra-op thread, and on an AMD EPYC with AVX-512 the two paths gave the same bits there."""
    onednn, pinned = default_path_digest()
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(PRODUCT_DIGEST),
        nbformat.v4.new_code_cell(f"# Lesson check: pinned\nassert digest == {pinned!r}")])
    error = run_on_path(notebook, tmp_path, onednn=not onednn)
    assert error and "AssertionError" in error
