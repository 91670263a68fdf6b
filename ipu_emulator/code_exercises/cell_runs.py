"""Which notebook cell defined the learner's function, and how that cell's latest run ended.

A check is given a function (``check_port(train)``).  If the exercise cell's latest run raised
(an import error at its top, a typo), the name still holds the function an earlier run
defined, and judging it would print a verdict under the red traceback about code that is no
longer the cell's.  IPython's ``pre_run_cell``/``post_run_cell`` events tell which cell ran
(``cell_id``, which JupyterLab, Notebook 7, VS Code and nbclient send) and how it ended; the
functions a run bound in the user's namespace are noted against that cell.

A cell edited and not run again is the other stale case.  The kernel does not see the editor,
but it sees the notebook file: Jupyter Server names it to the kernel (``JPY_SESSION_NAME``, the
notebook's path), and JupyterLab saves it (Ctrl-S, or its autosave: every 15 s in this lab,
jupyter/lab/overrides.json; two minutes by JupyterLab's default).
When the file was saved after the cell's latest run and holds other code for that cell than the
run did, the cell was changed since it ran.  An edit not saved yet is not seen; a file saved
before the run says nothing, so a cell run after its edit is never refused.
"""
from __future__ import annotations

import json
import os
import time
import weakref
from typing import Dict, Optional, Tuple

SESSION_VARIABLE = "JPY_SESSION_NAME"


class CellRuns:
    """The latest outcome of each cell run, and the cell each function was defined by."""

    def __init__(self, shell):
        self.shell = shell
        self.latest_error: Dict[str, Optional[BaseException]] = {}
        self.defined_by: Dict[int, Tuple[weakref.ref, str]] = {}
        self.latest_run: Dict[str, Tuple[str, float]] = {}   # cell -> (its code, when)
        self._before: Dict[str, int] = {}

    def pre_run_cell(self, info) -> None:
        self._before = {name: id(value) for name, value in self.shell.user_ns.items()
                        if callable(value)}

    def post_run_cell(self, result) -> None:
        cell = getattr(result.info, "cell_id", None)
        if cell is None:
            return
        self.latest_error[cell] = result.error_before_exec or result.error_in_exec
        self.latest_run[cell] = (result.info.raw_cell, time.time())
        for name, value in list(self.shell.user_ns.items()):
            if callable(value) and hasattr(value, "__code__") \
                    and self._before.get(name) != id(value):
                self.defined_by[id(value)] = (weakref.ref(value), cell)

    def cell_of(self, function) -> Optional[str]:
        """The id of the cell whose run defined ``function``, or None."""
        found = self.defined_by.get(id(function))
        return found[1] if found is not None and found[0]() is function else None

    def raised_since(self, function) -> Optional[BaseException]:
        """The error of the latest run of the cell that defined ``function``, if that run
        raised; None when it did not, or when the cell is unknown."""
        return self.latest_error.get(self.cell_of(function))

    def edited_since(self, function) -> bool:
        """Whether the notebook file, saved after the latest run of the cell that defined
        ``function``, holds other code for that cell than the run did."""
        cell = self.cell_of(function)
        path = os.environ.get(SESSION_VARIABLE, "")
        if cell is None or cell not in self.latest_run or not path.endswith(".ipynb"):
            return False
        code, ran_at = self.latest_run[cell]
        try:
            if os.path.getmtime(path) <= ran_at:
                return False
            with open(path, encoding="utf-8") as file:
                cells = json.load(file).get("cells", [])
        except (OSError, ValueError, AttributeError):
            return False   # no notebook to read: nothing to say
        saved = [entry.get("source", "") for entry in cells
                 if isinstance(entry, dict) and entry.get("id") == cell]
        if not saved:
            return False
        source = saved[0]
        return ("".join(source) if isinstance(source, list) else source) != code


_RUNS: Optional[CellRuns] = None


def install(shell=None) -> Optional[CellRuns]:
    """Listen to the cell runs of ``shell`` (the running IPython's by default; nothing
    outside IPython).  Idempotent per shell."""
    global _RUNS  # pylint: disable=global-statement  (one listener per kernel)
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return None
        shell = get_ipython()
    if shell is None:
        return None
    if _RUNS is not None and _RUNS.shell is shell:
        return _RUNS
    if _RUNS is not None:
        _RUNS.shell.events.unregister("pre_run_cell", _RUNS.pre_run_cell)
        _RUNS.shell.events.unregister("post_run_cell", _RUNS.post_run_cell)
    _RUNS = CellRuns(shell)
    shell.events.register("pre_run_cell", _RUNS.pre_run_cell)
    shell.events.register("post_run_cell", _RUNS.post_run_cell)
    return _RUNS


def stale(function) -> Optional[str]:
    """Why ``function`` must not be judged (its cell's latest run raised, or the cell was
    changed after it, as saved), or None."""
    if _RUNS is None:
        return None
    name = getattr(function, "__name__", "your function")
    error = _RUNS.raised_since(function)
    if error is None:
        if not _RUNS.edited_since(function):
            return None
        return (f"Not yet. Run the exercise cell first: it was changed after its last run "
                f"(the notebook, as last saved, holds other code for it). The check would "
                f"judge the {name} that run defined, not the code in the cell now.")
    first_line = (str(error).strip().splitlines() or [""])[0]
    return (f"Not yet. Run the exercise cell first: its last run raised "
            f"{type(error).__name__}: {first_line} The check would judge the {name} an "
            f"earlier run defined, not the code in the cell. Fix the error, run the exercise "
            f"cell, then this one.")


__all__ = ["CellRuns", "SESSION_VARIABLE", "install", "stale"]
