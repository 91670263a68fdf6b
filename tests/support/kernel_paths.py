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

nbval starts a notebook's kernel in its first cell's set-up, with this process's environment;
``pytest_runtest_setup`` sets the variable for that set-up only, so nothing else the worker
starts later inherits it.  The kernel logs the value it started with (notebook_startup.py) and
``pytest_runtest_makereport`` fails the notebook's cells if it is not the assigned one.
"""
import functools
import json
import os
from pathlib import Path

import pytest

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
    before = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = "0" if path == EIGEN else "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = before


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
