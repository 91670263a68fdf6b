"""Which CPU kernels each TensorFlow notebook's kernel runs on in the notebook run (nbval).

A learner's laptop may compute float32 losses and accuracies through other kernels than ours,
in another order, to other last bits, and a lesson check that pinned such a value would fail
there (on 2026-11-28 notebook 12's check of the float16 accumulators' loss difference did:
0.0085 with oneDNN's kernels, 0.0017 with Eigen's and on an AVX2-only host).  So the notebook
run takes both of TensorFlow's x86 kernel paths: half of the TensorFlow notebooks run with
oneDNN's kernels (TensorFlow's default on x86, what most learners get), the other half in a
kernel started with ``TF_ENABLE_ONEDNN_OPTS=0`` (Eigen's kernels), alternating in the
notebooks' order.  `make test-colab` (the notebooks again, on Google Colab's versions, in CI
after `make test`) sets ``IPU_LAB_KERNEL_PATHS=swapped`` and runs each on the other path, so CI
runs every TensorFlow notebook on both paths and each notebook is run once per stage.  (Until
2026-11-29 `make test` ran each TensorFlow notebook a second time on Eigen's kernels: about
130 s of CPU.)

A notebook's kernel runs with TensorFlow's own intra-op thread count, as a learner's does, not
with the one thread the tests' other processes take (tests/support/intraop_threads.py): on an
AMD EPYC with AVX-512 (2026-12-02), at one thread Eigen's float32 matmul, dense layer and
convolution gave oneDNN's bits exactly, so the second path would have changed nothing there;
at TensorFlow's own count (two threads) Eigen's differ.  It costs the five notebooks on
Eigen's kernels about 1-6 s of CPU (nbval alone in one process, two rounds alternating: 50.4 /
47.6 s against 44.6 / 46.9 s at one thread).

nbval starts a notebook's kernel in its first cell's set-up, with this process's environment;
``pytest_runtest_setup`` sets the variables for that set-up only (``kernel_settings``), so
nothing else the worker starts later inherits them.  The kernel logs what it started with
(notebook_startup.py) and ``pytest_runtest_makereport`` fails the notebook's cells if its path
is not the assigned one or its intra-op pool was given the tests' one thread.
"""
import functools
import json
import os
from pathlib import Path

import pytest

from tests.support import intraop_threads
from tests.support.notebook_checks import RESOURCES_PROPERTY, fail_report

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
SWAP_VARIABLE = "IPU_LAB_KERNEL_PATHS"
ONEDNN, EIGEN = "oneDNN", "Eigen"


def imports_tensorflow(path: Path) -> bool:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return any(cell["cell_type"] == "code" and "import tensorflow" in "".join(cell["source"])
               for cell in cells)


def tensorflow_notebooks(folder: Path = NOTEBOOKS) -> list:
    return [p.name for p in sorted(folder.glob("[0-9][0-9]_*.ipynb")) if imports_tensorflow(p)]


def kernel_paths(notebooks, swapped: bool = False) -> dict:
    """Each TensorFlow notebook's path: Eigen's for the first, third, ... (oneDNN's when
    ``swapped``), oneDNN's for the others."""
    first, second = (ONEDNN, EIGEN) if swapped else (EIGEN, ONEDNN)
    return {name: (first if i % 2 == 0 else second) for i, name in enumerate(notebooks)}


def kernel_settings(path: str) -> dict:
    """What a notebook's kernel on ``path`` (ONEDNN or EIGEN) starts with changed, as
    ``child_env`` takes it: the path's ``TF_ENABLE_ONEDNN_OPTS``, and no intra-op thread count
    (None: removed; TensorFlow sizes its pool to the cores, as in a learner's kernel)."""
    return {VARIABLE: "0" if path == EIGEN else "1", intraop_threads.VARIABLE: None}


@functools.cache   # read once per process: the notebooks are large, asked about per cell
def assigned_paths() -> dict:
    return kernel_paths(tensorflow_notebooks(),
                        swapped=os.environ.get(SWAP_VARIABLE, "") == "swapped")


def assigned_path_of(item):
    """The kernel path of a TensorFlow notebook's cell (an nbval item), else None."""
    if not str(item.path).endswith(".ipynb"):
        return None
    return assigned_paths().get(Path(item.path).name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    path = assigned_path_of(item)
    if path is None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:   # put back when the set-up ends
        for key, value in kernel_settings(path).items():
            if value is None:
                patch.delenv(key, raising=False)
            else:
                patch.setenv(key, value)
        yield


# tryfirst: of the hook wrappers, the last to see the report, after notebook_checks.py has put
# the kernel's usage (its kernels among it) on it.
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    assigned = assigned_path_of(item) if report.when == "call" else None
    if assigned is None:
        return
    usages = [value for key, value in report.user_properties if key == RESOURCES_PROPERTY]
    for notebook, usage in usages:
        if usage.get("kernels") not in (None, assigned):
            fail_report(report, "The notebook's kernel runs on the wrong CPU kernels:",
                        [f"{notebook} is assigned {assigned}'s kernels (tests/support/"
                         f"kernel_paths.py), its kernel started on {usage['kernels']}'s"])
        if usage.get("intraop_threads_setting") is not None:
            fail_report(report, "The notebook's kernel runs with the tests' thread setting:",
                        [f"{notebook}'s kernel started with {intraop_threads.VARIABLE}="
                         f"{usage['intraop_threads_setting']}; a notebook's kernel sizes its "
                         "pool as a learner's does (tests/support/kernel_paths.py)"])
