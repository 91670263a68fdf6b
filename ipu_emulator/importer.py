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

# Most specific first: contrib.ipu's submodules are the modern modules themselves.
_ALIASES = (
    ("tensorflow.python.ipu", "ipu_emulator.ipu", True),
    ("tensorflow.contrib.ipu", "ipu_emulator.compat.contrib.ipu", False),
    ("tensorflow.contrib.ipu.", "ipu_emulator.ipu.", True),
    ("tensorflow.contrib", "ipu_emulator.compat.contrib", False),
)


def _target(fullname):
    for alias, target, with_submodules in _ALIASES:
        if fullname == alias:
            return target
        if with_submodules and alias.endswith(".") and fullname.startswith(alias):
            return target + fullname[len(alias):]
        if with_submodules and fullname.startswith(alias + "."):
            return target + fullname[len(alias):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self._target = target

    def create_module(self, spec):
        return importlib.import_module(self._target)

    def exec_module(self, module):
        pass  # Already executed under its real name.


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
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
