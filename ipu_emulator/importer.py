"""Make Graphcore's import paths resolve to the emulator.

Original scripts say ``from tensorflow.python import ipu`` or
``from tensorflow.contrib.ipu import ipu_compiler``.  Stock TensorFlow has neither, so a
meta-path finder maps those names onto ``ipu_emulator`` modules:

    tensorflow.python.ipu[.X]   ->  ipu_emulator.ipu[.X]
    tensorflow.contrib          ->  ipu_emulator.compat.contrib
    tensorflow.contrib.ipu      ->  ipu_emulator.compat.contrib.ipu
    tensorflow.contrib.ipu.X    ->  ipu_emulator.ipu.X

``python -m ipu_emulator run`` installs it before running a script; ``install()`` does the
same in any process.
"""
import importlib
import importlib.abc
import importlib.util
import sys

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
}
# contrib.ipu's submodules are the modern modules themselves.
_PREFIXES = (
    ("tensorflow.python.ipu.", "ipu_emulator.ipu."),
    ("tensorflow.contrib.ipu.", "ipu_emulator.ipu."),
)


def _target(fullname):
    if fullname in _EXACT:
        return _EXACT[fullname]
    for alias, target in _PREFIXES:
        if fullname.startswith(alias):
            return target + fullname[len(alias):]
    return None


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


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        real = _target(fullname)
        if real is None:
            return None
        if importlib.util.find_spec(real) is None:
            return None
        is_package = hasattr(importlib.import_module(real), "__path__")
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real), is_package=is_package)


_FINDER = _AliasFinder()


def install():
    """Idempotently put the alias finder first on ``sys.meta_path``."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall():
    """Remove the finder and forget the alias names imported through it.

    The emulator's modules stay loaded under their real names; only the aliases
    (``sys.modules["tensorflow.python.ipu"]``, ``tensorflow.contrib``...) go, so after this
    ``import tensorflow.python.ipu`` fails again as it does on stock TensorFlow.
    """
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in list(sys.modules) if _target(n) is not None]:
        module = sys.modules.pop(name)
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        # Unbind the alias from a real TensorFlow parent (``tensorflow.python.ipu``), never
        # from an emulator module (``ipu_emulator.ipu.loops`` is that module's own attribute).
        if (parent is not None and _target(parent_name) is None
                and getattr(parent, child, None) is module):
            delattr(parent, child)
