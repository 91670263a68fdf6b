"""Which notebook cell defined the learner's function, and how that cell's latest run ended.

A check is given a function (``check_port(train)``).  If the exercise cell's latest run raised
(an import error at its top, a typo), the name still holds the function an earlier run
defined, and judging it would print a verdict under the red traceback about code that is no
longer the cell's.  IPython's ``pre_run_cell``/``post_run_cell`` events tell which cell ran
(``cell_id``, which JupyterLab, Notebook 7, VS Code and nbclient send) and how it ended; the
functions a run bound in the user's namespace are noted against that cell.

A cell edited and not run again is the other stale case.  The kernel does not see the editor,
so it learns of edits two ways:

- From the lab itself: the lab's JupyterLab extension (jupyter/lab/extensions/ipu-lab-cell-edits)
  answers the comm this module opens (``EDITS_TARGET``) and, each time a cell is about to run,
  sends the code of every cell edited since it last reported.  The report travels on the shell
  channel ahead of the run's own request, so the check cell sees the exercise cell as it is in
  the editor now, saved or not.  A page reloaded while the kernel runs finds the comm again
  (the extension asks the kernel for it) and opens its own.
- From the notebook file, where that extension is absent: Jupyter Server names the file to the
  kernel (``JPY_SESSION_NAME``), and JupyterLab saves it (Ctrl-S, or its autosave: every 15 s in
  this lab, jupyter/lab/overrides.json).  When the file was saved after the cell's latest run
  and holds other code for that cell than the run did, the cell was changed since it ran.  An
  edit not saved yet is not seen; a file saved before the run says nothing.

Either way a cell run after its edit is never refused.
"""
from __future__ import annotations

import json
import os
import time
import weakref
from typing import Dict, Optional, Tuple

SESSION_VARIABLE = "JPY_SESSION_NAME"
EDITS_TARGET = "ipu_lab_cell_edits"   # the comm target of the lab's extension (see above)


class CellRuns:
    """The latest outcome of each cell run, and the cell each function was defined by."""

    def __init__(self, shell):
        self.shell = shell
        self.latest_error: Dict[str, Optional[BaseException]] = {}
        self.defined_by: Dict[int, Tuple[weakref.ref, str]] = {}
        self.latest_run: Dict[str, Tuple[str, float]] = {}   # cell -> (its code, when)
        self.in_editor: Dict[str, str] = {}   # cell -> its code as the lab last reported it
        self._before: Dict[str, int] = {}

    def editor_report(self, message) -> None:
        """Note the code of the cells the lab's extension reports (a comm message's data:
        ``{"cells": {cell id: code}}``); anything else in it is ignored."""
        content = message.get("content") if isinstance(message, dict) else None
        data = content.get("data") if isinstance(content, dict) else None
        cells = data.get("cells") if isinstance(data, dict) else None
        if isinstance(cells, dict):
            self.in_editor.update((cell, code) for cell, code in cells.items()
                                  if isinstance(cell, str) and isinstance(code, str))

    def listen_to_the_editor(self) -> None:
        """Open the comm the lab's extension answers, and take the one it opens after a page
        reload.  Outside a kernel (or without the ``comm`` package) there is nothing to hear."""
        try:
            import comm   # pylint: disable=import-outside-toplevel  (only inside a kernel)
        except ImportError:
            return

        def opened_by_the_lab(channel, open_message):
            channel.on_msg(self.editor_report)
            self.editor_report(open_message)

        comm.get_comm_manager().register_target(EDITS_TARGET, opened_by_the_lab)
        comm.create_comm(target_name=EDITS_TARGET, data={}).on_msg(self.editor_report)

    def pre_run_cell(self, info) -> None:
        self._before = {name: id(value) for name, value in self.shell.user_ns.items()
                        if callable(value)}

    def post_run_cell(self, result) -> None:
        cell = getattr(result.info, "cell_id", None)
        if cell is None:
            return
        self.latest_error[cell] = result.error_before_exec or result.error_in_exec
        self.latest_run[cell] = (result.info.raw_cell, time.time())
        self.in_editor.pop(cell, None)   # what ran is what the editor held
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

    def edited_since(self, function) -> Optional[str]:
        """Where the cell that defined ``function`` was seen holding other code than its
        latest run did: "editor" (the lab reported it), "saved" (the notebook file, saved
        after the run), or None."""
        cell = self.cell_of(function)
        if cell is None or cell not in self.latest_run:
            return None
        code, ran_at = self.latest_run[cell]
        if cell in self.in_editor:
            return "editor" if self.in_editor[cell] != code else None
        path = os.environ.get(SESSION_VARIABLE, "")
        if not path.endswith(".ipynb"):
            return None
        try:
            if os.path.getmtime(path) <= ran_at:
                return None
            with open(path, encoding="utf-8") as file:
                cells = json.load(file).get("cells", [])
        except (OSError, ValueError, AttributeError):
            return None   # no notebook to read: nothing to say
        saved = [entry.get("source", "") for entry in cells
                 if isinstance(entry, dict) and entry.get("id") == cell]
        if not saved:
            return None
        source = saved[0]
        return "saved" if ("".join(source) if isinstance(source, list) else source) != code \
            else None


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
    _RUNS.listen_to_the_editor()
    return _RUNS


def stale(function) -> Optional[str]:
    """Why ``function`` must not be judged (its cell's latest run raised, or the cell was
    changed after it, as saved), or None."""
    if _RUNS is None:
        return None
    name = getattr(function, "__name__", "your function")
    error = _RUNS.raised_since(function)
    if error is None:
        seen = _RUNS.edited_since(function)
        if seen is None:
            return None
        where = ("the cell holds other code now" if seen == "editor"
                 else "the notebook, as last saved, holds other code for it")
        return (f"Not yet. Run the exercise cell first: it was changed after its last run "
                f"({where}). The check would judge the {name} that run defined, not the code "
                f"in the cell now.")
    first_line = (str(error).strip().splitlines() or [""])[0]
    return (f"Not yet. Run the exercise cell first: its last run raised "
            f"{type(error).__name__}: {first_line} The check would judge the {name} an "
            f"earlier run defined, not the code in the cell. Fix the error, run the exercise "
            f"cell, then this one.")


__all__ = ["CellRuns", "EDITS_TARGET", "SESSION_VARIABLE", "install", "stale"]
