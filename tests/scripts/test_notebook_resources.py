"""The notebook run holds each kernel to the classroom memory limits and reports each
notebook's time and peak memory (tests/support/notebook_checks.py with notebook_startup.py
beside it), tried on small notebooks in a copy of that set-up."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def run_notebooks(tmp_path, sources, command=None):
    (tmp_path / "notebooks").mkdir()
    # The plugin as the copy's root conftest (it finds notebook_startup.py beside itself); the
    # empty pytest.ini makes the copy the rootdir, where build/ is written.
    shutil.copy(ROOT / "tests" / "support" / "notebook_checks.py", tmp_path / "conftest.py")
    shutil.copy(ROOT / "tests" / "support" / "notebook_startup.py", tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name, cell_sources in sources.items():
        notebook = nbformat.v4.new_notebook()
        cell_sources = [cell_sources] if isinstance(cell_sources, str) else cell_sources
        notebook.cells = [nbformat.v4.new_code_cell(source) for source in cell_sources]
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                           "language": "python"}
        nbformat.write(notebook, tmp_path / "notebooks" / name)
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONSTARTUP", "IPU_LEGIBILITY_LOG", "IPU_RESOURCE_LOG")}
    env["MPLBACKEND"] = "Agg"   # as make test runs the notebooks
    command = command or [sys.executable, "-m", "pytest"]
    return subprocess.run(
        [*command, "--nbval-lax", "-p", "no:cacheprovider", "notebooks"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_kernel_reports_its_own_peak_not_its_parents(tmp_path):
    """Run from a process that holds 0.3 GB: getrusage's ru_maxrss survives exec, so a kernel
    would inherit that peak; the kernel's own (VmHWM) is far lower."""
    code = ("import runpy, sys; held = b'x' * 300_000_000; sys.argv = ['pytest', *sys.argv[1:]];"
            "runpy.run_module('pytest', run_name='__main__')")
    result = run_notebooks(tmp_path, {"small.ipynb": "total = sum(range(1000))"},
                           command=[sys.executable, "-c", code])
    assert result.returncode == 0, result.stdout[-2000:]
    usage = json.loads((tmp_path / "build" / "notebook_resources.json").read_text())
    assert usage["small.ipynb"]["peak_bytes"] < 0.2e9


def test_a_kernel_over_its_limit_fails_and_every_notebook_is_reported(tmp_path):
    result = run_notebooks(tmp_path, {
        "big.ipynb": "held = b'x' * 300_000_000   # over the 0.15 GB allowed without TensorFlow",
        "small.ipynb": "total = sum(range(1000))"})
    assert result.returncode == 1, result.stdout[-2000:]
    assert "Kernel memory over the classroom limit" in result.stdout
    assert "big.ipynb's kernel peaked at 0.3" in result.stdout
    assert "GB of private memory so far" in result.stdout
    assert "1 failed, 1 passed" in result.stdout
    usage = json.loads((tmp_path / "build" / "notebook_resources.json").read_text())
    assert set(usage) == {"big.ipynb", "small.ipynb"}
    assert usage["big.ipynb"]["peak_bytes"] > 0.3e9 > usage["small.ipynb"]["peak_bytes"] > 0
    # The bytes object is private memory; the small kernel's private share is below its RSS.
    assert usage["big.ipynb"]["private_peak_bytes"] > 0.3e9
    assert 0 < usage["small.ipynb"]["private_peak_bytes"] < usage["small.ipynb"]["peak_bytes"]
    assert not usage["small.ipynb"]["tensorflow"]
    assert "notebook kernels: time, peak memory (RSS), private peak" in result.stdout


def test_figures_are_closed_after_each_cell_as_the_inline_backend_does(tmp_path):
    result = run_notebooks(tmp_path, {"figures.ipynb": [
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1], [0, 1])",
        "assert plt.get_fignums() == [], plt.get_fignums()\nfig.savefig('still_usable.png')"]})
    assert "2 passed" in result.stdout, result.stdout[-2000:]
