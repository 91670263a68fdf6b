"""Build the zero-install JupyterLite site (issue 15): notebook 00 in the browser's Pyodide kernel.

Offline from the registries: the Pyodide core from the `pyodide` npm package, every wheel from
PyPI, the project's own wheel built here without TensorFlow.  Nothing is fetched at run time:
the site serves Pyodide, a rewritten pyodide-lock.json whose entries point at wheels in the
site, and the piplite index; `disablePyPIFallback` is on.

    python lite/build.py [--out build/lite] [--work /tmp/lite-work]

Needs, on PATH or given by flag: a Python environment with the pins of
lite/requirements-lite.txt (`jupyter lite` on PATH or --jupyter), npm, pip.
Prototype: see lite/README.md for what it does and does not cover yet.
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
# Not in Pyodide's lock but needed: ipython 9.12 requires ipython-pygments-lexers.
EXTRA_LOCK = {"ipython-pygments-lexers": "1.1.1", "comm": "0.2.3",
              "ipywidgets": "8.1.9", "jupyterlab-widgets": "3.0.17"}
EXTRA_DEPENDS = {"ipython": ["ipython-pygments-lexers"],
                 "ipywidgets": ["comm", "ipython", "traitlets", "jupyterlab-widgets"],
                 "ipu-emulator": ["ipywidgets"]}
# Preloaded while Pyodide starts, so the notebook imports them with no %pip cell.
PRELOAD = ["micropip", "ipu-emulator"]

NOTEBOOKS = ["notebooks/00_pipeline_playground.ipynb"]


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
    if not (npm_dir / "node_modules/pyodide/pyodide.asm.wasm").exists():
        (npm_dir / "package.json").write_text('{"private": true}\n')
        run("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", PYODIDE_NPM,
            cwd=npm_dir)
    return npm_dir / "node_modules/pyodide"


def lock_closure(lock: dict) -> dict:
    """name -> version for LOCK_ROOTS and their lock dependencies, plus EXTRA_LOCK."""
    packages = {norm(k): v for k, v in lock["packages"].items()}
    need, todo = {}, list(LOCK_ROOTS)
    while todo:
        name = norm(todo.pop())
        if name in need:
            continue
        need[name] = packages[name]["version"]
        todo += packages[name]["depends"]
    need.update(EXTRA_LOCK)
    return need


def download_wheels(versions: dict, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    # Pure wheels for Pyodide's Python 3.14, whatever the build machine's Python is.
    run(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
        "--python-version", "3.14", "--implementation", "py", "--abi", "none",
        "--platform", "any", "-d", dest, *(f"{n}=={v}" for n, v in sorted(versions.items())))


def project_wheel(work: Path, dest: Path) -> Path:
    """The project's wheel from the working tree's files that git does not ignore (tracked or
    new), dependencies off: the wheel of what `pip install -e .` would run."""
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                       "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    for old in dest.glob("ipu_emulator-*.whl"):
        old.unlink()
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", src, "-w", dest)
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


SHOW_COMPARISON = """\
from IPython.display import HTML, display


def show_comparison(timelines, **options):  # JupyterLite: the SVG trace (no plotting wheel here)
    display(HTML(views.timeline_svg(timelines, **options)))

"""


def lite_notebook(src: Path, dest: Path) -> None:
    """A copy without outputs; matplotlib cells draw the SVG trace instead (no matplotlib wheel
    for Pyodide exists on PyPI or npm)."""
    nb = json.loads(src.read_text())
    nb["metadata"].pop("widgets", None)
    nb["metadata"]["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)",
                                    "language": "python"}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        code = "".join(cell["source"])
        if "import matplotlib.pyplot as plt\n" in code:
            code = code.replace("import matplotlib.pyplot as plt\n", SHOW_COMPARISON)
        code = code.replace("fig = views.plot_comparison(", "show_comparison(")
        code = code.replace("plt.show()\n", "").replace("plt.show()", "")
        if "plt." in code or "matplotlib" in code or "plot_comparison" in code:
            raise SystemExit(f"{src.name}: a cell still uses matplotlib:\n{code}")
        cell["source"] = code
    dest.write_text(json.dumps(nb, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "build/lite")
    ap.add_argument("--work", type=Path, default=REPO / "build/lite-work")
    ap.add_argument("--jupyter", default=str(Path(sys.executable).parent / "jupyter"))
    args = ap.parse_args()
    work, out = args.work.resolve(), args.out.resolve()
    lite_dir = work / "site-src"
    shutil.rmtree(lite_dir, ignore_errors=True)
    static = lite_dir / "static/pyodide"          # jupyterlite's well-known local Pyodide
    static.mkdir(parents=True)
    (lite_dir / "files").mkdir()

    core = fetch_pyodide(work)
    for name in PYODIDE_CORE:
        shutil.copy2(core / name, static / name)
    versions = lock_closure(json.loads((core / "pyodide-lock.json").read_text()))
    wheel_dir = work / "wheels"
    download_wheels(versions, wheel_dir)
    own = project_wheel(work, wheel_dir)
    wheels = [own] + [next(wheel_dir.glob(f"{re.sub('-', '_', n)}-{v}-*.whl"), None)
                      or next(wheel_dir.glob(f"{n}-{v}-*.whl")) for n, v in versions.items()]
    write_lock(core, wheels, static)

    config = json.loads((HERE / "jupyter-lite.json").read_text())
    (lite_dir / "jupyter-lite.json").write_text(json.dumps(config, indent=1))
    # Settings defaults: no news or update checks (they would leave the site), every cell
    # kept in the DOM, the kernel started without a dialog.
    shutil.copy2(HERE / "overrides.json", lite_dir / "overrides.json")
    for nb in NOTEBOOKS:
        lite_notebook(REPO / nb, lite_dir / "files" / Path(nb).name)

    shutil.rmtree(out, ignore_errors=True)
    run(args.jupyter, "lite", "build", "--lite-dir", lite_dir, "--output-dir", out,
        "--contents", lite_dir / "files", "--no-sourcemaps", cwd=lite_dir)
    print(f"site: {out}")


if __name__ == "__main__":
    main()
