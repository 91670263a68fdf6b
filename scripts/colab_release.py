"""The lab on Google Colab: an "Open in Colab" link on every notebook, and a first cell that,
only on Colab, installs the lab at the notebook's own release.

    .venv/bin/python scripts/colab_release.py links --repository https://github.com/OWNER/NAME
        puts the link at the top of each notebook's title cell, the install cell after it and
        a table of the links in README.md; run again after a version bump (it replaces what it
        wrote before, never adds a second copy).
    python scripts/colab_release.py install-as-colab --source DIR
        runs the install cell exactly as the notebooks carry it, as Colab's kernel would (the
        module google.colab present), installing the lab from DIR: `make test-colab` does so.

Both need the release's address: a public GitHub repository with a tag ``v<version>`` per
release (pyproject.toml's version), from which Colab opens a notebook and pip installs the lab.
The install takes ``--no-deps``: Colab's runtime already holds every package the emulator needs
(TensorFlow 2.20, tf_keras, numpy, matplotlib, ipywidgets 7.7, tqdm, TensorBoard: pyproject.toml
takes those versions, and `make test-colab` checks it with `pip check`), so nothing of the
runtime is replaced and no restart is needed; the sample data is inside the package.
"""
import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "ipu-emulator"
INSTALL_CELL_TAG = "colab-install"
COLAB_LINK_TEXT = "Open in Colab"
README_BEGIN = "<!-- colab-links: written by scripts/colab_release.py -->"
README_END = "<!-- /colab-links -->"
GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)/?$")


def release_version(root: Path = ROOT) -> str:
    import tomllib
    with open(root / "pyproject.toml", "rb") as project:
        return tomllib.load(project)["project"]["version"]


def github_path(repository: str) -> str:
    """'OWNER/NAME' of a repository's https://github.com/ address, or ValueError."""
    found = GITHUB.match(repository)
    if not found:
        raise ValueError(f"not a GitHub repository's address: {repository!r} "
                         "(expected https://github.com/OWNER/NAME)")
    return f"{found['owner']}/{found['name']}"


def release_archive(repository: str, version: str) -> str:
    return f"https://github.com/{github_path(repository)}/archive/refs/tags/v{version}.tar.gz"


def colab_url(repository: str, version: str, notebook: str) -> str:
    return (f"https://colab.research.google.com/github/{github_path(repository)}"
            f"/blob/v{version}/notebooks/{notebook}")


def install_cell_source(source: str, version: str) -> str:
    """The notebooks' first code cell.  `source` is what pip installs: the release's archive
    (or, in `make test-colab`, this checkout).  Plain Python, no IPython magic, so that it runs
    the same in any kernel and in install_as_colab."""
    return f'''\
# On Google Colab only: install the IPU tutorial lab, release {version}, beside Colab's own
# TensorFlow, numpy and Jupyter (none of them is replaced; no restart needed). Anywhere else
# (make lab, a hub, Binder) the lab is installed already and this cell does nothing.
import importlib.metadata, subprocess, sys
if "google.colab" in sys.modules:
    try:
        installed = importlib.metadata.version("{DISTRIBUTION}")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != "{version}":
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                              "{DISTRIBUTION} @ {source}"])
        print("The lab is installed: run the next cells." if pip.returncode == 0 else
              "The install failed (see pip's message above): check the runtime's internet "
              "connection, then run this cell again.")
'''


def link_line(repository: str, version: str, notebook: str) -> str:
    return f"[{COLAB_LINK_TEXT}]({colab_url(repository, version, notebook)})"


def add_to_notebook(path: Path, repository: str, version: str) -> None:
    """The link as the title cell's first line and the install cell right after the title;
    what an earlier run wrote is replaced."""
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [cell for cell in notebook.cells
                      if INSTALL_CELL_TAG not in cell.metadata.get("tags", [])]
    title = notebook.cells[0]
    lines = [line for line in title.source.splitlines()
             if not line.startswith(f"[{COLAB_LINK_TEXT}](")]
    title.source = "\n".join([link_line(repository, version, path.name), "", *lines]).replace(
        "\n\n\n", "\n\n")
    cell = nbformat.v4.new_code_cell(
        install_cell_source(release_archive(repository, version), version),
        metadata={"tags": [INSTALL_CELL_TAG]})
    cell.id = INSTALL_CELL_TAG   # a fixed id: writing the links again changes nothing
    notebook.cells.insert(1, cell)
    nbformat.write(notebook, path)


def readme_table(repository: str, version: str, notebooks: list[Path]) -> str:
    rows = [f"| `{path.stem}` | {link_line(repository, version, path.name)} |"
            for path in notebooks]
    return "\n".join([README_BEGIN, "", f"Every notebook on Google Colab (release {version}; "
                      "its first cell installs the lab there):", "",
                      "| notebook | |", "|---|---|", *rows, "", README_END])


def add_to_readme(readme: Path, table: str, after_heading: str = "## Running a workshop") -> None:
    text = readme.read_text()
    if README_BEGIN in text:
        start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
        text = text[:start] + table + text[end:]
    else:
        at = text.index(after_heading)
        text = text[:at] + table + "\n\n" + text[at:]
    readme.write_text(text)


def write_links(root: Path, repository: str) -> list[Path]:
    version = release_version(root)
    notebooks = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in notebooks:
        add_to_notebook(path, repository, version)
    add_to_readme(root / "README.md", readme_table(repository, version, notebooks))
    return notebooks


def install_as_colab(source: str, version: str) -> float:
    """Run the install cell as Colab's kernel would, with `source` in place of the release's
    archive; returns the seconds it took."""
    import types
    sys.modules.setdefault("google", types.ModuleType("google"))
    sys.modules["google.colab"] = types.ModuleType("google.colab")
    started = time.perf_counter()
    exec(install_cell_source(source, version), {"__name__": "__colab_cell__"})
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    links = commands.add_parser("links", help="write the Colab links and install cells")
    links.add_argument("--repository", required=True, help="https://github.com/OWNER/NAME")
    install = commands.add_parser("install-as-colab", help="run the install cell, as on Colab")
    install.add_argument("--source", default=str(ROOT), help="a folder or archive of the lab")
    arguments = parser.parse_args(argv)
    if arguments.command == "links":
        written = write_links(ROOT, arguments.repository)
        print(f"{len(written)} notebooks and README.md link to {arguments.repository}")
        return 0
    source = arguments.source
    source = source if "://" in source else Path(source).resolve().as_uri()
    version = release_version()
    seconds = install_as_colab(source, version)
    import importlib.metadata
    try:
        installed = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    print(f"the Colab install cell took {seconds:.1f} s and left {DISTRIBUTION} {installed}")
    return 0 if installed == version else 1


if __name__ == "__main__":
    sys.exit(main())
