"""What `pip install .` installs: every package of ipu_emulator/, and widgets/ as ipu_lab_widgets.

pyproject.toml lists the packages by hand (a find directive cannot install widgets/ under
another name), so a new subpackage left out of the list would be missing from the wheel the
JupyterLite site installs while the editable install still found it.
"""
import pathlib

import pytest
from setuptools import find_packages

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on; 3.10 has no TOML reader of its own

ROOT = pathlib.Path(__file__).resolve().parents[2]


def setuptools_config():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_of_the_emulator_is_listed():
    listed = set(setuptools_config()["packages"])
    found = set(find_packages(str(ROOT), include=["ipu_emulator", "ipu_emulator.*"]))
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - found == {"ipu_lab_widgets"}


def test_the_widgets_folder_installs_as_ipu_lab_widgets():
    config = setuptools_config()
    assert config["package-dir"] == {"ipu_lab_widgets": "widgets"}
    assert (ROOT / config["package-dir"]["ipu_lab_widgets"] / "__init__.py").is_file()
