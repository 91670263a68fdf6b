"""Which notebook cell defined the learner's function, and how that cell's latest run ended.

A check is given a function (``check_port(train)``).  If the exercise cell's latest run raised
(an import error at its top, a typo), the name still holds the function an earlier run
defined, and judging it would print a verdict under the red traceback about code that is no
longer the cell's.  IPython's ``pre_run_cell``/``post_run_cell`` events tell which cell ran
(``cell_id``, which JupyterLab, Notebook 7, VS Code and nbclient send) and how it ended; the
functions a run bound in the user's namespace are noted against that cell.

A kernel cannot know that a cell was edited and not run again (the editor keeps that), so
that case is not caught here.
"""
from __future__ import annotations

import weakref
from typing import Dict, Optional, Tuple


class CellRuns:
    """The latest outcome of each cell run, and the cell each function was defined by."""

    def __init__(self, shell):
        self.shell = shell
        self.latest_error: Dict[str, Optional[BaseException]] = {}
        self.defined_by: Dict[int, Tuple[weakref.ref, str]] = {}
        self._before: Dict[str, int] = {}

    def pre_run_cell(self, info) -> None:
        self._before = {name: id(value) for name, value in self.shell.user_ns.items()
                        if callable(value)}

    def post_run_cell(self, result) -> None:
        cell = getattr(result.info, "cell_id", None)
        if cell is None:
            return
        self.latest_error[cell] = result.error_before_exec or result.error_in_exec
        for name, value in list(self.shell.user_ns.items()):
            if callable(value) and hasattr(value, "__code__") \
                    and self._before.get(name) != id(value):
                self.defined_by[id(value)] = (weakref.ref(value), cell)

    def raised_since(self, function) -> Optional[BaseException]:
        """The error of the latest run of the cell that defined ``function``, if that run
        raised; None when it did not, or when the cell is unknown."""
        found = self.defined_by.get(id(function))
        if found is None or found[0]() is not function:
            return None
        return self.latest_error.get(found[1])


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
    """Why ``function`` must not be judged (its cell's latest run raised), or None."""
    if _RUNS is None:
        return None
    error = _RUNS.raised_since(function)
    if error is None:
        return None
    first_line = (str(error).strip().splitlines() or [""])[0]
    name = getattr(function, "__name__", "your function")
    return (f"Not yet. Run the exercise cell first: its last run raised "
            f"{type(error).__name__}: {first_line} The check would judge the {name} an "
            f"earlier run defined, not the code in the cell. Fix the error, run the exercise "
            f"cell, then this one.")


__all__ = ["CellRuns", "install", "stale"]
