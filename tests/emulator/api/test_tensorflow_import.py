"""``import ipu_emulator`` makes TensorFlow's first import run without the garbage collector's
full passes and freezes what it made (ipu_emulator/tensorflow_import.py): checked once with the
real TensorFlow in a new interpreter (about 4 s of CPU, what one TensorFlow process saves about
0.5 s of), and with a small module of our own in this process for the rest."""
import gc
import sys
import textwrap

import pytest

from ipu_emulator import tensorflow_import
from tests.support.child_python import REPORTER, run_python

CHILD = REPORTER + textwrap.dedent("""
    import gc, weakref
    import ipu_emulator
    from ipu_emulator import tensorflow_import
    full_passes = []
    gc.callbacks.append(lambda phase, info: full_passes.append(1)
                        if phase == "start" and info["generation"] == 2 else None)
    report("watching before", tensorflow_import.installed())
    import tensorflow.compat.v1 as tf
    report("full passes during the import", len(full_passes))
    report("frozen", gc.get_freeze_count())
    report("collector on", gc.isenabled())
    report("watching after", tensorflow_import.installed())

    class Node:
        pass
    node = Node(); node.itself = node; gone = weakref.ref(node); del node
    gc.collect()
    report("a cycle made afterwards is collected", gone() is None)
    report("tensorflow works", float(tf.reduce_sum(tf.ones(3)).numpy()))
""")


def test_tensorflows_first_import_runs_without_full_passes_and_is_frozen():
    found = run_python(CHILD, timeout=180).check().results
    assert found == {"watching before": True, "full passes during the import": 0,
                     "frozen": found["frozen"], "collector on": True, "watching after": False,
                     "a cycle made afterwards is collected": True, "tensorflow works": 3.0}
    assert found["frozen"] > 100_000, found   # TensorFlow's objects, not a handful


@pytest.fixture
def a_module(tmp_path, monkeypatch):
    """A module of our own whose code records whether the collector ran while it loaded."""
    (tmp_path / "ipu_lab_probe_module.py").write_text(
        "import gc\ncollector_on_while_loading = gc.isenabled()\nmade = [object()]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "ipu_lab_probe_module"
    tensorflow_import.uninstall("ipu_lab_probe_module")
    sys.modules.pop("ipu_lab_probe_module", None)


@pytest.fixture
def collector_restored():
    was_on = gc.isenabled()
    yield
    (gc.enable if was_on else gc.disable)()


def test_its_code_runs_with_the_collector_off_then_on_again(a_module, collector_restored):
    gc.enable()
    assert tensorflow_import.install(a_module) and tensorflow_import.installed(a_module)
    frozen_before = gc.get_freeze_count()
    module = __import__(a_module)
    assert module.collector_on_while_loading is False
    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen_before
    assert not tensorflow_import.installed(a_module)      # one import only
    assert "exec_module" not in vars(module.__loader__)   # the loader's own method again


def test_a_program_that_turned_the_collector_off_finds_it_off(a_module, collector_restored):
    gc.disable()
    tensorflow_import.install(a_module)
    __import__(a_module)
    assert not gc.isenabled()


def test_a_module_loaded_already_is_not_watched():
    assert "tensorflow" in sys.modules   # this process imported it while collecting tests
    assert tensorflow_import.install("tensorflow") is False
    assert not tensorflow_import.installed("tensorflow")


def test_an_import_that_fails_leaves_the_collector_on(tmp_path, monkeypatch,
                                                       collector_restored):
    (tmp_path / "ipu_lab_broken_module.py").write_text("raise ImportError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    gc.enable()
    tensorflow_import.install("ipu_lab_broken_module")
    with pytest.raises(ImportError, match="broken on purpose"):
        __import__("ipu_lab_broken_module")
    assert gc.isenabled() and not tensorflow_import.installed("ipu_lab_broken_module")
