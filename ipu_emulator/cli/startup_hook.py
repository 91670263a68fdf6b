"""Make Graphcore's imports work under plain ``python3``: the opt-in import hook.

Scripts that start ``python3`` themselves (such as a tutorial's ``profile.sh``) can use:

* **An opt-in import hook.**  ``python -m ipu_emulator install-hook`` writes a ``.pth`` file
  into the active environment's site-packages.  Python runs a ``.pth`` line that starts with
  ``import`` at every start-up, so every interpreter of that environment can then
  ``import tensorflow.python.ipu`` (the emulator).  ``uninstall-hook`` removes the file.
  ``--tf1`` also switches TensorFlow to TF1 graph mode when the IPU API is first imported
  (scripts written for the TF1 SDK expect it); ``--site-dir`` picks another directory.
  Side effect, stated plainly: ``import ipu_emulator`` runs in every interpreter of the
  environment, which sets ``TF_USE_LEGACY_KERAS=1`` (legacy Keras) unless already set.
* **The runner** instead: ``python -m ipu_emulator run wrapper.sh ARGS`` (``shell_wrappers``).

With the hook active, ``POPLAR_ENGINE_OPTIONS`` reports are written when the process exits,
as the runner writes them when the script ends.
"""
from __future__ import annotations

import atexit
import importlib.abc
import os
import sys
import sysconfig

PTH_NAME = "ipu_emulator_hook.pth"
_PTH_LINE = "import ipu_emulator.cli.startup_hook; ipu_emulator.cli.startup_hook.activate(tf1={tf1})\n"


# --- the .pth file ---------------------------------------------------------------------


def default_site_dir() -> str:
    """site-packages of the running interpreter's environment (a venv's, if active)."""
    return sysconfig.get_paths()["purelib"]


def install_hook(site_dir: str | None = None, tf1: bool = False) -> str:
    """Write the ``.pth`` file; returns its path.  Idempotent (rewrites the same file)."""
    site_dir = site_dir or default_site_dir()
    if not os.path.isdir(site_dir):
        raise FileNotFoundError("No such site directory: %s" % site_dir)
    path = os.path.join(site_dir, PTH_NAME)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(_PTH_LINE.format(tf1=bool(tf1)))
    return path


def uninstall_hook(site_dir: str | None = None) -> str | None:
    """Remove the ``.pth`` file; returns its path, or None if it was not there."""
    path = os.path.join(site_dir or default_site_dir(), PTH_NAME)
    if not os.path.exists(path):
        return None
    os.remove(path)
    return path


# --- what the .pth line runs at start-up -----------------------------------------------


class _PrepareOnFirstUse(importlib.abc.MetaPathFinder):
    """Set the process up (datasets, TF1 mode, session hook) the first time a script imports
    the IPU API, then step aside so the importer's alias finder resolves the name."""

    _NAMES = ("tensorflow.python.ipu", "tensorflow.contrib.ipu")

    def __init__(self, tf1: bool):
        self.tf1 = tf1
        self.done = False

    def find_spec(self, fullname, path=None, target=None):
        if self.done or not fullname.startswith(self._NAMES):
            return None
        self.done = True
        from ipu_emulator.cli import runner
        runner.prepare(tf1=self.tf1)
        _report_at_exit()
        return None


_activated = []


def activate(tf1: bool = False) -> None:
    """Called by the ``.pth`` line: cheap (no TensorFlow import until the IPU API is used)."""
    if _activated:
        return
    from ipu_emulator.cli import import_aliases
    import_aliases.install_keras()  # also makes tensorflow.python.keras legacy Keras, once TF loads
    finder = _PrepareOnFirstUse(tf1)
    sys.meta_path.insert(0, finder)
    _activated.append(finder)


def _report_at_exit() -> None:
    from ipu_emulator import record
    from ipu_emulator.cli import profiling

    atexit.register(profiling.report_if_requested,
                    lambda: record.ProgramRecord(runs=list(record.history)))


__all__ = ["install_hook", "uninstall_hook", "activate", "default_site_dir", "PTH_NAME"]
