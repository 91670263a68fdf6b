"""Make Graphcore's import paths resolve to the emulator.

Original scripts say ``from tensorflow.python import ipu`` or
``from tensorflow.contrib.ipu import ipu_compiler``.  Stock TensorFlow has neither, so a
meta-path finder maps those names onto ``ipu_emulator`` modules:

    tensorflow.python.ipu[.X]   ->  ipu_emulator.ipu[.X]
    tensorflow.contrib          ->  ipu_emulator.compat.contrib
    tensorflow.contrib.ipu      ->  ipu_emulator.compat.contrib.ipu
    tensorflow.contrib.ipu.X    ->  ipu_emulator.ipu.X

    tensorflow.compiler.plugin[.X]  ->  ipu_emulator.compat.plugin[.X]  (gen_*_ops stubs)
    tensorflow.python.keras[.X]     ->  tf_keras[.X] (else tf_keras.src.X): see below

When ``ipu_emulator.ipu.X`` is not a module file but a module the package re-exports (as the
SDK's ``ipu`` re-exports ``ipu.ops.rand_ops`` as ``ipu.rand_ops``), the name resolves to that
module, so ``import tensorflow.python.ipu.rand_ops`` works as well as attribute access.

``python -m ipu_emulator run`` installs it before running a script; ``install()`` does the
same in any process.

``tensorflow.python.keras`` was Keras itself in the TensorFlow versions of the SDK (TF 1.15
to 2.6), and SDK-era scripts import it (``from tensorflow.python.keras.datasets import
mnist``).  TF 2.21 still has a package of that name, but it is a trimmed copy that TensorFlow
uses internally, and its classes do not mix with legacy Keras (``tf_keras``), which
``tf.keras`` is under the emulator.  ``install_keras()`` therefore takes the name over once
TensorFlow has loaded: TensorFlow's own modules keep the copy they imported, and the name
then resolves to ``tf_keras``.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import types

# Whole module names first, then prefixes for their submodules; the first match wins.
_EXACT = {
    "tensorflow.python.ipu": "ipu_emulator.ipu",
    "tensorflow.contrib.ipu": "ipu_emulator.compat.contrib.ipu",
    "tensorflow.contrib": "ipu_emulator.compat.contrib",
    # Modules only the contrib era had.
    "tensorflow.contrib.ipu.ipu_optimizer": "ipu_emulator.compat.contrib.ipu.ipu_optimizer",
    "tensorflow.contrib.ipu.gradient_accumulation_optimizer":
        "ipu_emulator.compat.contrib.ipu.gradient_accumulation_optimizer",
    "tensorflow.contrib.ipu.popops_cross_replica_sum":
        "ipu_emulator.compat.contrib.ipu.popops_cross_replica_sum",
    # 0.9.x homes of ops that later moved to ``ipu.ops`` under other names.
    "tensorflow.contrib.ipu.poprand": "ipu_emulator.ipu.ops.rand_ops",
    "tensorflow.contrib.ipu.popnn_embedding": "ipu_emulator.ipu.ops.embedding_ops",
    "tensorflow.contrib.ipu.popnn_normalization": "ipu_emulator.ipu.ops.normalization_ops",
    "tensorflow.contrib.ipu.popnn_rnn": "ipu_emulator.ipu.ops.rnn_ops",
    "tensorflow.contrib.ipu.internal": "ipu_emulator.ipu.ops.internal_ops",
}
# ``tensorflow.python.keras.X`` whose legacy-Keras home has another name.
_KERAS_RENAMED = (
    ("optimizer_v2.learning_rate_schedule",
     "tf_keras.src.optimizers.schedules.learning_rate_schedule"),
    ("optimizer_v2", "tf_keras.src.optimizers.legacy"),
    ("optimizer_v1", "tf_keras.src.optimizers.optimizer_v1"),
)
# contrib.ipu's submodules are the modern modules themselves.
_PREFIXES = (
    ("tensorflow.python.ipu.", "ipu_emulator.ipu."),
    ("tensorflow.contrib.ipu.", "ipu_emulator.ipu."),
    ("tensorflow.compiler.plugin", "ipu_emulator.compat.plugin"),
)
_KERAS = "tensorflow.python.keras."
_keras_taken_over = False  # set by install_keras() once TensorFlow has loaded


def _targets(fullname):
    """The emulator (or tf_keras) names ``fullname`` may resolve to, in order of preference;
    empty if it is not one of the names this finder handles."""
    if fullname == "tensorflow.python.keras":
        # Only once taken over: TensorFlow's own import of the name must find its package.
        return ["tf_keras"] if _keras_taken_over else []
    if fullname in _EXACT:
        return [_EXACT[fullname]]
    if fullname.startswith(_KERAS) and _keras_taken_over:
        rest = fullname[len(_KERAS):]
        for old, new in _KERAS_RENAMED:
            if rest == old or rest.startswith(old + "."):
                return [new + rest[len(old):]]
        # Public API modules first (tf_keras.layers), then the implementation's.
        return ["tf_keras." + rest, "tf_keras.src." + rest]
    for alias, target in _PREFIXES:
        if fullname.startswith(alias):
            return [target + fullname[len(alias):]]
    return []


def _target(fullname):
    targets = _targets(fullname)
    return targets[0] if targets else None


def _existing(real):
    """``real`` if it is a module, else the module its parent re-exports under that name
    (``ipu_emulator.ipu.rand_ops`` -> ``ipu_emulator.ipu.ops.rand_ops``), else None."""
    try:
        if importlib.util.find_spec(real) is not None:
            return real
    except (ImportError, ValueError):  # a missing parent package
        return None
    parent, _, child = real.rpartition(".")
    try:
        attribute = getattr(importlib.import_module(parent), child, None)
    except ImportError:
        return None
    return attribute.__name__ if isinstance(attribute, types.ModuleType) else None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self._target = target
        self._real_spec = None

    def create_module(self, spec):
        module = importlib.import_module(self._target)
        self._real_spec = module.__spec__
        return module

    def exec_module(self, module):
        # Already executed under its real name.  The import system has just overwritten the
        # module's ``__spec__`` with the alias's; put the real one back, or the emulator's
        # module would claim to be ``tensorflow.python.ipu`` (``importlib.reload`` and
        # ``find_spec("ipu_emulator.ipu")`` break once the finder is uninstalled).
        if self._real_spec is not None:
            module.__spec__ = self._real_spec
        if self._target.startswith(("tf_keras.datasets", "tf_keras.src.datasets")):
            # SDK-era scripts load MNIST through ``tensorflow.python.keras.datasets``: it
            # goes offline through ipu_emulator.data.datasets as ``tf.keras.datasets`` does.
            from ipu_emulator.data import datasets
            datasets.patch_keras_datasets()


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        for candidate in _targets(fullname):
            real = _existing(candidate)
            if real is not None:
                is_package = hasattr(importlib.import_module(real), "__path__")
                return importlib.util.spec_from_loader(fullname, _AliasLoader(real),
                                                       is_package=is_package)
        return None


_FINDER = _AliasFinder()


def install():
    """Idempotently put the alias finder first on ``sys.meta_path``."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall():
    """Remove the finder and forget the alias names imported through it.

    The emulator's modules stay loaded under their real names; only the aliases
    (``sys.modules["tensorflow.python.ipu"]``, ``tensorflow.contrib``...) go, so after this
    ``import tensorflow.python.ipu`` fails again as it does on stock TensorFlow, and
    ``tensorflow.python.keras`` is TensorFlow's own package again.
    """
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    if _TENSORFLOW_WATCH in sys.meta_path:
        sys.meta_path.remove(_TENSORFLOW_WATCH)
    for name in [n for n in list(sys.modules) if _target(n) is not None]:
        if getattr(sys.modules[name], "__name__", None) == name:
            continue  # a real module of that name (TensorFlow's own tensorflow.python.keras)
        module = sys.modules.pop(name)
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        # Unbind the alias from a real TensorFlow parent (``tensorflow.python.ipu``), never
        # from an emulator module (``ipu_emulator.ipu.loops`` is that module's own attribute).
        if (parent is not None and _target(parent_name) is None
                and getattr(parent, child, None) is module):
            delattr(parent, child)
    _restore_tensorflow_keras()


# --- tensorflow.python.keras -----------------------------------------------------------

_saved_keras = {}  # TensorFlow's own tensorflow.python.keras[.X] modules, while taken over


def install_keras():
    """Make ``tensorflow.python.keras`` resolve to legacy Keras (see the module docstring):
    at once if TensorFlow is loaded, else as soon as it has been."""
    install()
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None and getattr(tensorflow, "__version__", None):
        _take_over_tensorflow_keras()
    elif _TENSORFLOW_WATCH not in sys.meta_path:
        sys.meta_path.insert(0, _TENSORFLOW_WATCH)


def _take_over_tensorflow_keras():
    global _keras_taken_over
    _keras_taken_over = True
    names = [n for n in sys.modules if n == "tensorflow.python.keras" or n.startswith(_KERAS)]
    for name in names:
        if sys.modules[name].__name__ == name:  # TensorFlow's, not an alias already
            _saved_keras[name] = sys.modules.pop(name)
    python = sys.modules.get("tensorflow.python")
    if python is not None and "keras" in vars(python):
        # ``from tensorflow.python import keras`` reads this attribute without importing.
        delattr(python, "keras")


def _restore_tensorflow_keras():
    global _keras_taken_over
    _keras_taken_over = False
    if not _saved_keras:
        return
    sys.modules.update(_saved_keras)
    python = sys.modules.get("tensorflow.python")
    if python is not None and "tensorflow.python.keras" in _saved_keras:
        python.keras = _saved_keras["tensorflow.python.keras"]
    _saved_keras.clear()


class _AfterTensorFlowLoads(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` with the normal finders, and takes ``tensorflow.python.keras``
    over once TensorFlow's ``__init__`` has run (used by the start-up import hook, which is
    installed before anything imports TensorFlow)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("tensorflow")
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            _take_over_tensorflow_keras()

        spec.loader.exec_module = exec_module
        return spec


_TENSORFLOW_WATCH = _AfterTensorFlowLoads()
