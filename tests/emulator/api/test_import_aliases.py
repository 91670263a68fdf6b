"""ipu_emulator.cli.import_aliases: Graphcore's import paths resolve to the emulator's modules."""
import importlib
import logging
import sys

import pytest

import ipu_emulator.compat.contrib
import ipu_emulator.ipu
from ipu_emulator.cli import import_aliases

MOVED = ("tensorflow.contrib.ipu has been moved to tensorflow.python.ipu.  This namespace will "
         "be removed in September 2019")


def _aliases():
    return sorted(n for n in sys.modules
                  if n.startswith(("tensorflow.python.ipu", "tensorflow.contrib")))


@pytest.fixture
def installed():
    import_aliases.install()
    try:
        yield
    finally:
        import_aliases.uninstall()


@pytest.fixture
def fresh_contrib():
    """Forget ``ipu_emulator.compat.contrib.ipu`` so importing it runs (and logs) again."""
    sys.modules.pop("ipu_emulator.compat.contrib.ipu", None)
    if hasattr(ipu_emulator.compat.contrib, "ipu"):
        del ipu_emulator.compat.contrib.ipu


def test_tensorflow_python_ipu_paths(installed):
    from tensorflow.python import ipu
    from tensorflow.python.ipu import loops
    import tensorflow.python.ipu.ipu_compiler as aliased_compiler
    import tensorflow.python.ipu.ipu_outfeed_queue  # noqa: F401
    from tensorflow.python.ipu.scopes import ipu_scope

    assert ipu is ipu_emulator.ipu
    assert loops is ipu_emulator.ipu.loops
    assert aliased_compiler is ipu_emulator.ipu.ipu_compiler
    assert sys.modules["tensorflow.python.ipu.ipu_compiler"] is ipu_emulator.ipu.ipu_compiler
    assert (sys.modules["tensorflow.python.ipu.ipu_outfeed_queue"]
            is ipu_emulator.ipu.ipu_outfeed_queue)
    assert ipu_scope is ipu_emulator.ipu.scopes.ipu_scope
    assert ipu.ipu_infeed_queue.IPUInfeedQueue is (
        ipu_emulator.ipu.ipu_infeed_queue.IPUInfeedQueue)


def test_tensorflow_contrib_ipu_paths_and_moved_message(installed, fresh_contrib, caplog):
    with caplog.at_level(logging.WARNING, logger="ipu_emulator"):
        from tensorflow.contrib.ipu import ipu_compiler, ops
        import tensorflow.contrib.ipu.loops as contrib_loops
    assert ipu_compiler is ipu_emulator.ipu.ipu_compiler
    assert ops is ipu_emulator.ipu.ops
    assert ops.ipu_scope is ipu_emulator.ipu.scopes.ipu_scope
    assert contrib_loops is ipu_emulator.ipu.loops
    assert sys.modules["tensorflow.contrib.ipu"] is sys.modules["ipu_emulator.compat.contrib.ipu"]
    assert [r.getMessage() for r in caplog.records].count(MOVED) == 1


def test_aliased_modules_keep_their_real_identity(installed):
    import tensorflow.python.ipu  # noqa: F401
    import tensorflow.python.ipu.loops  # noqa: F401
    assert ipu_emulator.ipu.__name__ == "ipu_emulator.ipu"
    assert ipu_emulator.ipu.__spec__.name == "ipu_emulator.ipu"
    assert ipu_emulator.ipu.loops.__spec__.name == "ipu_emulator.ipu.loops"


def test_uninstall_forgets_the_aliases():
    import_aliases.install()
    import_aliases.install()  # idempotent
    assert sum(f is import_aliases._FINDER for f in sys.meta_path) == 1
    import tensorflow.python.ipu.loops  # noqa: F401
    import tensorflow.contrib.ipu  # noqa: F401
    assert _aliases()
    import_aliases.uninstall()
    assert import_aliases._FINDER not in sys.meta_path
    assert _aliases() == []
    with pytest.raises(ImportError):
        importlib.import_module("tensorflow.python.ipu")
    # The emulator's own modules are untouched and still importable by their names.
    assert importlib.util.find_spec("ipu_emulator.ipu").name == "ipu_emulator.ipu"
    assert ipu_emulator.ipu.loops is importlib.import_module("ipu_emulator.ipu.loops")
    importlib.reload(ipu_emulator.ipu.ops)


def test_not_installed_means_stock_tensorflow():
    assert import_aliases._FINDER not in sys.meta_path
    with pytest.raises(ImportError):
        importlib.import_module("tensorflow.contrib")


def test_tensorflow_python_keras_is_legacy_keras_until_uninstalled():
    import tf_keras
    own = sys.modules["tensorflow.python.keras"]  # TensorFlow's internal copy
    assert own is not tf_keras
    import_aliases.install_keras()
    try:
        from tensorflow.python import keras
        from tensorflow.python.keras.optimizer_v2 import gradient_descent
        import tensorflow.python.keras.engine.training as training
        assert keras is tf_keras
        assert gradient_descent.SGD is tf_keras.optimizers.legacy.SGD  # OptimizerV2, as then
        assert training.Model is tf_keras.Model
    finally:
        import_aliases.uninstall()
    assert sys.modules["tensorflow.python.keras"] is own
    assert sys.modules["tensorflow.python"].keras is own
    assert "tensorflow.python.keras.optimizer_v2.gradient_descent" in sys.modules
    assert sys.modules["tensorflow.python.keras.optimizer_v2.gradient_descent"].__name__ == (
        "tensorflow.python.keras.optimizer_v2.gradient_descent")


def test_contrib_era_module_names_resolve(installed):
    from tensorflow.contrib.ipu import poprand, popnn_rnn, sharding
    import tensorflow.contrib.ipu.popnn_normalization as popnn_normalization
    assert poprand is ipu_emulator.ipu.ops.rand_ops
    assert popnn_rnn is ipu_emulator.ipu.ops.rnn_ops
    assert sharding is ipu_emulator.ipu.sharding
    assert popnn_normalization is ipu_emulator.ipu.ops.normalization_ops
    with pytest.raises(ImportError):
        from tensorflow.contrib.ipu import no_such_module  # noqa: F401
