"""TensorFlow's first import, without the garbage collector's passes over it, then frozen.

Importing TensorFlow makes about 280,000 Python objects that live as long as the process.
While they are made, Python's collector keeps walking the growing heap in full passes, and
after the import every full pass walks them again.  None of it frees anything.  So ``install()``
(run by ``import ipu_emulator``, which the notebooks, the runner and the tests do before
TensorFlow loads) makes TensorFlow's first import run with the collector off, then freezes what
the process holds (``gc.freeze``: the collector no longer looks at those objects).

Measured (``bench/tensorflow_import.py``, fresh Pythons alternating, medians): importing the
emulator, TensorFlow, legacy Keras and the IPU API took 3.06 s of CPU against 3.74 s (6 rounds)
and 3.62 s against 4.08 s (4 rounds), none of it in full collections against 0.40-0.46 s.
A notebook kernel running notebook 12 spent 0.37 s in full collections against 3.54 s.

The objects a program makes afterwards are collected as before.  What the import left as
garbage in reference cycles stays in memory (about 13,000 objects).  A program that turned
the collector off itself finds it still off.
"""
from __future__ import annotations

import gc
import importlib.abc
import importlib.util
import sys

MODULE = "tensorflow"


class _FirstImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: on the first import of ``module`` it takes the spec the other
    finders give and runs that module's code with the collector off, then freezes."""

    def __init__(self, module: str):
        self.module = module

    def find_spec(self, name, path=None, target=None):
        if name != self.module:
            return None
        uninstall(name)   # one import only; also keeps find_spec below from coming back here
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run_module_code = loader.exec_module

        def exec_module(module):
            was_on = gc.isenabled()
            gc.disable()
            try:
                run_module_code(module)
            finally:
                del loader.exec_module   # the loader's own method again
                if was_on:
                    gc.enable()
                gc.freeze()

        loader.exec_module = exec_module
        return spec


def install(module: str = MODULE) -> bool:
    """Watch for ``module``'s first import (a top-level name); False (nothing done) if it is
    loaded already."""
    if module in sys.modules:
        return False
    if not installed(module):
        sys.meta_path.insert(0, _FirstImport(module))
    return True


def installed(module: str = MODULE) -> bool:
    return any(_watches(finder, module) for finder in sys.meta_path)


def uninstall(module: str = MODULE) -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not _watches(finder, module)]


def _watches(finder, module: str) -> bool:
    return isinstance(finder, _FirstImport) and finder.module == module
