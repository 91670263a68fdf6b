"""Build the zero-install JupyterLite site: the TensorFlow-free notebooks (NOTEBOOKS) in the
browser's Pyodide kernel.

Offline from the registries: the Pyodide core from the `pyodide` npm package, every wheel from
PyPI, the project's own wheel built here without TensorFlow.  Nothing is fetched at run time:
the site serves Pyodide, a rewritten pyodide-lock.json whose entries point at wheels in the
site, and the piplite index; `disablePyPIFallback` is on.

    python lite/build.py [--out build/lite] [--work build/lite-work]

`make lite` runs it from build/lite-venv, which holds the pins of lite/requirements-lite.txt
(`jupyter lite`; or give --jupyter), after scripts/ensure_npm.sh made sure npm is there.
How the site is put together, and what tests/lite/ checks in it: lite/README.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent

# The `pyodide` npm package that jupyterlite-pyodide-kernel 0.8.6 was built against (its
# schema's default pyodideUrl names v314.0.6).  Core only: no package wheels.
PYODIDE_NPM = "pyodide@314.0.6"
PYODIDE_CORE = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                "pyodide.js", "package.json"]

# Loaded by the kernel at start-up through pyodide's lock (micropip, then piplite.install of
# ipython and jedi), at the versions Pyodide 314.0.6 locks; PyPI serves them as plain wheels.
LOCK_ROOTS = ["micropip", "packaging", "ipython", "jedi"]
# Not in Pyodide's lock but the kernel itself needs them: ipython 9.12 requires
# ipython-pygments-lexers, and the kernel's start-up runs piplite.install("comm").
KERNEL_EXTRA = {"ipython-pygments-lexers": "1.1.1", "comm": "0.2.3"}
# What the site adds for its notebooks: the widgets (the project's wheel comes on top).
# Not jupyterlab-widgets, which ipywidgets requires: its wheel is the widgets' front end
# (0.7 MB of JavaScript that no Python imports), which the site serves as a JupyterLab
# extension; in the kernel it only cost the learner its download and unpacking before the
# first trace (loadPackage does not read Requires-Dist).
SITE_EXTRA = {"ipywidgets": "8.1.9"}
EXTRA_LOCK = {**KERNEL_EXTRA, **SITE_EXTRA}
EXTRA_DEPENDS = {"ipython": ["ipython-pygments-lexers"],
                 "ipywidgets": ["comm", "ipython", "traitlets"],
                 "ipu-emulator": ["ipywidgets"]}
# The bare site (``--bare-out``): the same JupyterLite, kernel and Pyodide with nothing of
# ours, one empty notebook; tests/lite/ times its kernel start-up as the floor the site's
# first trace is held to.  The widgets' front end (jupyterlab-widgets) is ours, so it goes.
BARE_NOTEBOOK = "empty.ipynb"
WIDGETS_EXTENSION = "@jupyter-widgets/jupyterlab-manager"

NOTEBOOKS = ["notebooks/00_how_an_ipu_runs_a_program.ipynb",
             "notebooks/08_pipeline_playground.ipynb", "notebooks/04_feeds_explorer.ipynb",
             "notebooks/10_pipeline_schedules.ipynb"]


def run(*cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def fetch_pyodide(work: Path) -> Path:
    npm_dir = work / "npm"
    npm_dir.mkdir(parents=True, exist_ok=True)
    installed = npm_dir / "node_modules/pyodide/package.json"
    version = json.loads(installed.read_text())["version"] if installed.exists() else None
    # Kept between builds (a rebuild asks npm for nothing) unless PYODIDE_NPM changed.
    if version != PYODIDE_NPM.split("@")[1] or \
            not (npm_dir / "node_modules/pyodide/pyodide.asm.wasm").exists():
        (npm_dir / "package.json").write_text('{"private": true}\n')
        run("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", PYODIDE_NPM,
            cwd=npm_dir)
    return npm_dir / "node_modules/pyodide"


def lock_closure(lock: dict, extra: dict = EXTRA_LOCK) -> dict:
    """name -> version for LOCK_ROOTS and their lock dependencies, plus ``extra``."""
    packages = {norm(k): v for k, v in lock["packages"].items()}
    need, todo = {}, list(LOCK_ROOTS)
    while todo:
        name = norm(todo.pop())
        if name in need:
            continue
        need[name] = packages[name]["version"]
        todo += packages[name]["depends"]
    need.update(extra)
    return need


def find_wheel(folder: Path, name: str, version: str) -> Path | None:
    """The wheel of ``name`` ``version`` in ``folder`` (wheel names spell ``-`` as ``_``)."""
    return next(folder.glob(f"{re.sub('-', '_', name)}-{version}-*.whl"), None) \
        or next(folder.glob(f"{name}-{version}-*.whl"), None)


def download_wheels(versions: dict, dest: Path) -> None:
    """Download the wheels ``dest`` lacks: a rebuild asks PyPI for nothing."""
    dest.mkdir(parents=True, exist_ok=True)
    missing = sorted((n, v) for n, v in versions.items() if not find_wheel(dest, n, v))
    if not missing:
        return
    # Pure wheels for Pyodide's Python 3.14, whatever the build machine's Python is.
    run(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
        "--python-version", "3.14", "--implementation", "py", "--abi", "none",
        "--platform", "any", "-d", dest, *(f"{n}=={v}" for n, v in missing))


def project_wheel(work: Path, dest: Path) -> Path:
    """The project's wheel from the working tree's files that git does not ignore (tracked or
    new), dependencies off: the wheel of what `pip install -e .` would run."""
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                       "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        # The bundled data samples (6.5 MB) stay out: no notebook of the site trains on data.
        if name.startswith("ipu_emulator/data/") and name.endswith(".npz"):
            continue
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    for old in dest.glob("ipu_emulator-*.whl"):
        old.unlink()
    # With the build tools of requirements-lite.txt (setuptools, wheel), not an isolated build
    # environment that pip would fetch from PyPI each time: a rebuild needs no network.
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        src, "-w", dest)
    return next(dest.glob("ipu_emulator-*.whl"))


def wheel_meta(path: Path) -> tuple[str, str, list]:
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
        top = next((n for n in zf.namelist() if n.endswith(".dist-info/top_level.txt")), None)
        imports = zf.read(top).decode().split() if top else []
        if not imports:
            imports = sorted({n.split("/")[0] for n in zf.namelist()
                              if "/" in n and not n.split("/")[0].endswith((".dist-info", ".data"))})
    name = re.search(r"^Name: (.+)$", text, re.M).group(1).strip()
    version = re.search(r"^Version: (.+)$", text, re.M).group(1).strip()
    return name, version, imports


def write_lock(core: Path, wheels: list, out: Path) -> None:
    """Pyodide's lock with only the packages this site serves, each pointing at its wheel."""
    lock = json.loads((core / "pyodide-lock.json").read_text())
    original = {norm(k): v for k, v in lock["packages"].items()}
    packages = {}
    for whl in wheels:
        name, version, imports = wheel_meta(whl)
        key = norm(name)
        entry = dict(original.get(key) or {
            "name": name, "package_type": "package", "install_dir": "site",
            "unvendored_tests": False, "depends": [], "imports": imports})
        entry.update(version=version, file_name=whl.name, sha256=sha256(whl))
        entry["depends"] = sorted({norm(d) for d in entry["depends"]}
                                  | set(EXTRA_DEPENDS.get(key, [])))
        packages[key] = entry
        shutil.copy2(whl, out / whl.name)
    missing = {d for e in packages.values() for d in e["depends"]} - set(packages)
    if missing:
        raise SystemExit(f"lock dependencies without a wheel: {sorted(missing)}")
    lock["packages"] = packages
    (out / "pyodide-lock.json").write_text(json.dumps(lock, indent=1, sort_keys=True))


# The browser's kernel has none of these: no Pyodide (emscripten) build of matplotlib or NumPy
# is on PyPI or npm (only on Pyodide's CDN), and TensorFlow has none at all.  Site notebooks
# draw with the SVG trace (views.show_trace) and run the same cells as in the lab.
NOT_IN_THE_BROWSER = ("matplotlib", "numpy", "tensorflow")
_IMPORTS = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w., ]+?)(?:\s+as\s+\w+)?\s*$"
                      r"|%(matplotlib)\b)", re.M)
# The views that draw with matplotlib (imported inside the function, so no import line shows).
MATPLOTLIB_VIEWS = ("plot_timeline(", "plot_comparison(", "plot_losses(")


def browser_problems(code: str) -> list:
    r"""What in a cell's code cannot run in the browser's kernel.

    >>> browser_problems("import numpy as np\nfrom matplotlib import pyplot\nimport json")
    ['imports numpy', 'imports matplotlib']
    >>> browser_problems("import os, tensorflow.compat.v1 as tf\n%matplotlib inline")
    ['imports tensorflow', 'imports matplotlib']
    >>> browser_problems("fig = views.plot_comparison([t])")
    ['calls plot_comparison (draws with matplotlib)']
    """
    found = []
    for match in _IMPORTS.finditer(code):
        names = [match.group(1) or match.group(3)] if not match.group(2) \
            else match.group(2).split(",")
        for name in names:
            top = name.strip().split()[0].split(".")[0] if name.strip() else ""
            if top in NOT_IN_THE_BROWSER:
                found.append(f"imports {top}")
    found += [f"calls {call[:-1]} (draws with matplotlib)" for call in MATPLOTLIB_VIEWS
              if call in code]
    return found


def lite_notebook(src: Path, dest: Path) -> None:
    """A copy without outputs or widget state, for the Pyodide kernel; the cells are the
    lab's, unchanged.  Stops the build if a cell needs what the browser lacks."""
    nb = json.loads(src.read_text())
    nb["metadata"].pop("widgets", None)
    nb["metadata"]["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)",
                                    "language": "python"}
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        code = "".join(cell["source"])
        problems = browser_problems(code)
        if problems:
            raise SystemExit(
                f"{src.name}, cell {index}: {', '.join(problems)}; the site's browser kernel "
                f"has no {', '.join(NOT_IN_THE_BROWSER)}. Site notebooks use the standard "
                "library, ipywidgets, ipu_emulator's pure layers and widgets; draw traces "
                f"with views.show_trace.\n--- the cell ---\n{code}")
    dest.write_text(json.dumps(nb, indent=1))


def jupyter_lite_build(jupyter: str, lite_dir: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    run(jupyter, "lite", "build", "--lite-dir", lite_dir, "--output-dir", out,
        "--contents", lite_dir / "files", "--no-sourcemaps", cwd=lite_dir)


def site_source(work: Path, name: str) -> Path:
    """An empty lite dir ``work/<name>`` with the Pyodide core in jupyterlite's well-known
    local place (static/pyodide: `jupyter lite build` copies it and points pyodideUrl at it)."""
    lite_dir = work / name
    shutil.rmtree(lite_dir, ignore_errors=True)
    (lite_dir / "static/pyodide").mkdir(parents=True)
    (lite_dir / "files").mkdir()
    for file in PYODIDE_CORE:
        shutil.copy2(work / "npm/node_modules/pyodide" / file, lite_dir / "static/pyodide" / file)
    return lite_dir


def write_config(lite_dir: Path, bare: bool = False) -> None:
    """jupyter-lite.json and overrides.json: the site's, or the bare site's (nothing
    preloaded, JupyterLite's own app name).  Both keep the kernel off the
    internet and the settings defaults (no news or update checks, every cell kept in the DOM,
    the kernel started without a dialog), which cost nothing at start-up."""
    config = json.loads((HERE / "jupyter-lite.json").read_text())
    data = config["jupyter-config-data"]
    kernel = data["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    if bare:
        del data["appName"], kernel["loadPyodideOptions"]
    (lite_dir / "jupyter-lite.json").write_text(json.dumps(config, indent=1))
    shutil.copy2(HERE / "overrides.json", lite_dir / "overrides.json")


def build_bare(work: Path, out: Path, jupyter: str) -> None:
    """The floor to compare the site with: the same jupyterlite-core, pyodide-kernel and
    Pyodide, only the wheels the kernel itself loads (LOCK_ROOTS, KERNEL_EXTRA), one empty
    notebook, no widgets front end."""
    lite_dir = site_source(work, "bare-src")
    core = work / "npm/node_modules/pyodide"
    versions = lock_closure(json.loads((core / "pyodide-lock.json").read_text()), KERNEL_EXTRA)
    write_lock(core, [find_wheel(work / "wheels", n, v) for n, v in versions.items()],
               lite_dir / "static/pyodide")
    write_config(lite_dir, bare=True)
    empty = {"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {
        "name": "python", "display_name": "Python (Pyodide)", "language": "python"}}}
    (lite_dir / "files" / BARE_NOTEBOOK).write_text(json.dumps(empty, indent=1))
    jupyter_lite_build(jupyter, lite_dir, out)
    # `jupyter lite build` takes every federated extension of its environment; the widgets'
    # is the site's, not JupyterLite's.
    config_file = out / "jupyter-lite.json"
    config = json.loads(config_file.read_text())
    data = config["jupyter-config-data"]
    data["federated_extensions"] = [e for e in data["federated_extensions"]
                                    if e["name"] != WIDGETS_EXTENSION]
    config_file.write_text(json.dumps(config, indent=2))
    shutil.rmtree(out / "extensions" / WIDGETS_EXTENSION)
    (out / "extensions" / WIDGETS_EXTENSION).parent.rmdir()      # its npm scope's folder
    print(f"bare site: {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "build/lite")
    ap.add_argument("--work", type=Path, default=REPO / "build/lite-work")
    ap.add_argument("--bare-out", type=Path, help="also build the bare site (build_bare) here")
    ap.add_argument("--jupyter", default=str(Path(sys.executable).parent / "jupyter"))
    args = ap.parse_args()
    work, out = args.work.resolve(), args.out.resolve()

    core = fetch_pyodide(work)
    lite_dir = site_source(work, "site-src")
    static = lite_dir / "static/pyodide"
    versions = lock_closure(json.loads((core / "pyodide-lock.json").read_text()))
    wheel_dir = work / "wheels"
    download_wheels(versions, wheel_dir)
    own = project_wheel(work, wheel_dir)
    wheels = [own] + [find_wheel(wheel_dir, n, v) for n, v in versions.items()]
    write_lock(core, wheels, static)
    write_config(lite_dir)
    for nb in NOTEBOOKS:
        lite_notebook(REPO / nb, lite_dir / "files" / Path(nb).name)

    jupyter_lite_build(args.jupyter, lite_dir, out)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"site: {out} ({size / 1e6:.1f} MB); serve it with `make serve-lite`")
    if args.bare_out:
        build_bare(work, args.bare_out.resolve(), args.jupyter)


if __name__ == "__main__":
    main()
