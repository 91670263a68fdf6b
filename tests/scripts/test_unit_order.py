"""The order the root conftest.py hands units of work to the workers: longest first, every
notebook named, so that none (notebook 12, the longest, once did) comes last of all and runs
alone at the end of `make test`; and the order of the modules inside the browser unit."""
import importlib.util
from pathlib import Path

from tests.support.child_python import ROOT


def root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", Path(ROOT) / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_notebook_is_handed_out_by_name_before_the_unnamed_units():
    conftest = root_conftest()
    unnamed = len(conftest.FIRST)
    for notebook in sorted((Path(ROOT) / "notebooks").glob("*.ipynb")):
        unit = conftest.unit_of(f"notebooks/{notebook.name}::Cell 0")
        rank = conftest._rank(unit)
        assert rank < unnamed, f"{notebook.name} is not named in conftest.py's FIRST"
        assert conftest.FIRST[rank].startswith("notebooks/"), (notebook.name, conftest.FIRST[rank])


class _Item:
    """As much of a collected test as tests/browser/conftest.py's ordering reads."""

    def __init__(self, path: Path):
        self.path = path
        self.markers = []

    def add_marker(self, marker):
        self.markers.append(marker)


def test_the_browser_module_that_reloads_jupyterlab_runs_after_the_others_that_share_its_page():
    """Inside the browser unit, the module whose test reloads JupyterLab's page comes after the
    modules that share that page, so JupyterLab loads twice rather than three times; the tests
    outside the folder keep their places."""
    from tests.browser import conftest as browser

    assert (browser.HERE / browser.RELOADS_THE_PAGE).is_file()
    shared = ["test_harness.py", "test_lab_opens_notebooks.py", "test_playground.py"]
    items = [_Item(Path(ROOT) / "tests" / "sim" / "test_a.py"),
             *(_Item(browser.HERE / name) for name in [browser.RELOADS_THE_PAGE, *shared]),
             _Item(Path(ROOT) / "tests" / "sim" / "test_b.py")]
    browser.pytest_collection_modifyitems(items)
    assert [item.path.name for item in items] == [
        "test_a.py", *shared, browser.RELOADS_THE_PAGE, "test_b.py"]
    assert [bool(item.markers) for item in items] == [False, True, True, True, True, False]
