"""scripts/colab_release.py: the "Open in Colab" links and the notebooks' Colab install cell.

The install itself, from this checkout into an environment with Colab's versions, is what
`make test-colab` does first (CI runs it); these tests pin what the script writes and what the
cell does where it runs.  About 1 s.
"""
import importlib.util
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "https://github.com/example-owner/ipu-lab"

spec = importlib.util.spec_from_file_location("colab_release", ROOT / "scripts/colab_release.py")
colab_release = importlib.util.module_from_spec(spec)
spec.loader.exec_module(colab_release)
VERSION = colab_release.release_version()


@pytest.fixture
def checkout(tmp_path):
    """The files the script writes, copied: the notebooks, README.md and pyproject.toml."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks",
                    ignore=shutil.ignore_patterns("traces", ".ipynb_checkpoints"))
    for name in ("README.md", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_every_notebook_links_to_its_release_and_installs_it_first(checkout):
    written = colab_release.write_links(checkout, REPOSITORY)
    assert len(written) == 13
    for path in written:
        notebook = nbformat.read(path, as_version=4)
        title, install = notebook.cells[0], notebook.cells[1]
        assert title.source.splitlines()[0] == (
            f"[Open in Colab](https://colab.research.google.com/github/example-owner/ipu-lab"
            f"/blob/v{VERSION}/notebooks/{path.name})")
        assert title.source.splitlines()[2].startswith("# "), "the title stays in its cell"
        assert install.cell_type == "code"
        assert install.metadata["tags"] == ["colab-install"]
        assert (f"ipu-emulator @ https://github.com/example-owner/ipu-lab/archive/refs/tags/"
                f"v{VERSION}.tar.gz") in install.source
        assert "--no-deps" in install.source
    readme = (checkout / "README.md").read_text()
    assert readme.count("](https://colab.research.google.com/github/") == 13


def test_writing_the_links_again_replaces_them(checkout):
    colab_release.write_links(checkout, "https://github.com/someone-else/old-name")
    colab_release.write_links(checkout, REPOSITORY)
    first = {path: path.read_text() for path in [*checkout.glob("notebooks/*.ipynb"),
                                                 checkout / "README.md"]}
    colab_release.write_links(checkout, REPOSITORY)
    assert {path: path.read_text() for path in first} == first
    assert "someone-else" not in "".join(first.values())
    notebook = nbformat.read(checkout / "notebooks/07_sharding.ipynb", as_version=4)
    assert [cell.metadata.get("tags") for cell in notebook.cells].count(["colab-install"]) == 1


def test_an_address_that_is_not_a_github_repository_is_refused():
    with pytest.raises(ValueError, match="not a GitHub repository's address"):
        colab_release.colab_url("https://gitlab.com/a/b", VERSION, "07_sharding.ipynb")


def run_install_cell(monkeypatch, *, on_colab, installed_version):
    """Run the cell as a kernel would; returns the commands it gave subprocess.run."""
    calls = []
    monkeypatch.setattr(subprocess, "run",
                        lambda command, **_: calls.append(command) or types.SimpleNamespace(
                            returncode=0))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    import importlib.metadata

    def version(name):
        if installed_version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed_version
    monkeypatch.setattr(importlib.metadata, "version", version)
    source = colab_release.install_cell_source("file:///the/release.tar.gz", VERSION)
    exec(source, {})
    return calls


def test_the_install_cell_installs_only_on_colab_and_only_when_needed(monkeypatch, capsys):
    assert run_install_cell(monkeypatch, on_colab=False, installed_version=None) == []
    assert capsys.readouterr().out == ""
    assert run_install_cell(monkeypatch, on_colab=True, installed_version=VERSION) == []
    [command] = run_install_cell(monkeypatch, on_colab=True, installed_version="0.0.1")
    assert command[1:] == ["-m", "pip", "install", "--quiet", "--no-deps",
                           "ipu-emulator @ file:///the/release.tar.gz"]
    [command] = run_install_cell(monkeypatch, on_colab=True, installed_version=None)
    assert "The lab is installed: run the next cells." in capsys.readouterr().out
