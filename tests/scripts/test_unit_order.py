"""The order the root conftest.py hands units of work to the workers: longest first, every
notebook named, so that none (notebook 12, the longest, once did) comes last of all and runs
alone at the end of `make test`."""
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
