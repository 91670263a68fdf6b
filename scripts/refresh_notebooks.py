"""Re-execute notebooks and store them with their outputs, as learners should first see them.

    .venv/bin/python scripts/refresh_notebooks.py                 # every notebook
    .venv/bin/python scripts/refresh_notebooks.py notebooks/07_sharding.ipynb

Runs each notebook top to bottom on the bundled data sample (``IPU_EMULATOR_DATA=sample``)
with matplotlib's inline backend (an inherited ``MPLBACKEND=Agg`` would drop the figures), then
removes TensorFlow's C++ start-up lines (absl ``I0000 ...``), which say nothing about the
lesson and differ from machine to machine.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
TF_STARTUP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl|[IEW]\d{4} \d\d:\d\d:\d\d|[IEW]0000 )")


def strip_startup_noise(path: Path) -> int:
    """Drop TensorFlow's start-up lines from stderr outputs; return how many went."""
    notebook = nbformat.read(path, as_version=4)
    removed = 0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            if output.output_type == "stream" and output.name == "stderr":
                lines = output.text.splitlines(keepends=True)
                quiet = [line for line in lines if not TF_STARTUP_NOISE.match(line)]
                removed += len(lines) - len(quiet)
                if not "".join(quiet).strip():
                    continue
                output.text = "".join(quiet)
            kept.append(output)
        cell.outputs = kept
    nbformat.write(notebook, path)
    return removed


def execute(path: Path) -> None:
    env = dict(os.environ, IPU_EMULATOR_DATA="sample")
    env.pop("MPLBACKEND", None)
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook",
                    "--execute", "--inplace", str(path)], check=True, env=env, cwd=ROOT)


def main(paths) -> None:
    notebooks = [Path(p) for p in paths] or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    for path in notebooks:
        print(f"executing {path.name} ...", flush=True)
        execute(path)
        print(f"  stored; {strip_startup_noise(path)} start-up log lines removed")


if __name__ == "__main__":
    main(sys.argv[1:])
