"""A check refuses to judge a function whose cell's latest run raised (the name still holds
an earlier run's function), and an error in the learner's code comes back folded: the
message's first line, the hint, and the learner's own line that raised it."""
import json
import os
import time

import pytest
from IPython.core.interactiveshell import InteractiveShell

from ipu_emulator.code_exercises import cell_runs, learner_error, nb06_accumulation
from ipu_emulator.exercises import progress
from tests.support.code_exercise_checks import outside_solutions_mode  # noqa: F401

STARTING = nb06_accumulation.STARTING_CODE


@pytest.fixture
def shell(monkeypatch):
    """An IPython shell whose cell runs the checks listen to, as in a kernel."""
    monkeypatch.delenv(progress.PROGRESS_VARIABLE, raising=False)
    shell = InteractiveShell.instance()
    shell.run_cell("import tensorflow.compat.v1 as tf\nfrom ipu_emulator import ipu",
                   cell_id="setup")
    cell_runs._RUNS = None   # pylint: disable=protected-access  (a listener of its own)
    runs = cell_runs.install(shell)
    yield shell
    shell.events.unregister("pre_run_cell", runs.pre_run_cell)
    shell.events.unregister("post_run_cell", runs.post_run_cell)
    cell_runs._RUNS = None   # pylint: disable=protected-access


def check_in(shell):
    shell.run_cell("from ipu_emulator.code_exercises import nb06_accumulation as ce\n"
                   "verdict = ce.check_accumulating_training(train)", cell_id="check")
    return shell.user_ns["verdict"]


def test_a_cell_whose_latest_run_raised_is_not_judged_by_its_earlier_function(shell):
    assert shell.run_cell(STARTING, cell_id="exercise").success
    verdict = check_in(shell)
    assert not verdict.ok and "Run the exercise cell first" not in verdict.text  # judged
    broken = "from tensorflow.python import ipu\n" + STARTING   # Graphcore's import line
    assert not shell.run_cell(broken, cell_id="exercise").success
    verdict = check_in(shell)
    assert verdict.text.startswith("Not yet. Run the exercise cell first: its last run "
                                   "raised ImportError"), verdict.text
    assert "earlier run defined" in verdict.text


def test_the_cell_run_again_without_the_error_is_judged_again(shell):
    assert not shell.run_cell("raise ValueError('typo')\n" + STARTING,
                              cell_id="exercise").success
    assert shell.run_cell(STARTING, cell_id="exercise").success
    verdict = check_in(shell)
    assert "Run the exercise cell first" not in verdict.text
    assert "once per mini-batch" in verdict.text   # the starting code's own verdict


def test_a_function_defined_in_another_cell_that_ran_well_is_judged(shell):
    assert shell.run_cell(STARTING, cell_id="mine").success
    assert not shell.run_cell("1 / 0", cell_id="exercise").success
    assert "Run the exercise cell first" not in check_in(shell).text


def saved_notebook(path, exercise_code, saved_at):
    """The notebook file as JupyterLab saves it: the exercise cell holding ``exercise_code``
    (its lines, as nbformat stores them), written at ``saved_at``."""
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"id": "exercise", "cell_type": "code", "metadata": {}, "outputs": [],
         "execution_count": 1, "source": exercise_code.splitlines(True)},
        {"id": "check", "cell_type": "code", "metadata": {}, "outputs": [],
         "execution_count": 2, "source": "ce.check_accumulating_training(train)"}]}))
    os.utime(path, (saved_at, saved_at))


def test_a_cell_changed_after_its_run_as_saved_is_not_judged(shell, tmp_path, monkeypatch):
    notebook = tmp_path / "06.ipynb"
    monkeypatch.setenv(cell_runs.SESSION_VARIABLE, str(notebook))
    assert shell.run_cell(STARTING, cell_id="exercise").success
    edited = STARTING.replace("repeat(20,", "repeat(32,")
    saved_notebook(notebook, edited, time.time() + 5)   # saved after the run, with the edit
    verdict = check_in(shell)
    assert verdict.text.startswith("Not yet. Run the exercise cell first: it was changed "
                                   "after its last run"), verdict.text
    assert shell.run_cell(edited, cell_id="exercise").success   # run again: judged
    assert "Run the exercise cell first" not in check_in(shell).text


def test_a_cell_saved_before_its_run_or_unchanged_is_judged(shell, tmp_path, monkeypatch):
    notebook = tmp_path / "06.ipynb"
    monkeypatch.setenv(cell_runs.SESSION_VARIABLE, str(notebook))
    saved_notebook(notebook, "# an older version", time.time() - 60)   # edited, then run
    assert shell.run_cell(STARTING, cell_id="exercise").success
    assert "Run the exercise cell first" not in check_in(shell).text
    saved_notebook(notebook, STARTING, time.time() + 5)   # saved after the run, as it ran
    assert "Run the exercise cell first" not in check_in(shell).text
    notebook.write_text("{not json")   # a file being written: nothing to say
    os.utime(notebook, (time.time() + 6, time.time() + 6))
    assert "Run the exercise cell first" not in check_in(shell).text


def test_an_error_is_folded_to_its_first_line_with_the_learners_line():
    def train():
        values = [1, 2]
        first, second, third = values   # the learner's mistake
        return first, second, third
    try:
        train()
    except ValueError as error:
        text = learner_error(error, {}).text
    assert text.startswith("Not yet. Your code raised ValueError: not enough values to "
                           "unpack (expected 3, got 2) Hint: "), text
    assert text.endswith("It came from your line "
                         f"{train.__code__.co_firstlineno + 2}: "
                         "`first, second, third = values   # the learner's mistake`."), text


def test_a_long_message_keeps_its_first_line_only():
    error = RuntimeError("Attempting to use uninitialized value dense/kernel\n\t [[node "
                         "dense/kernel/read]]\nOriginal stack trace for 'dense/kernel':\n"
                         + "  File \"x.py\", line 1\n" * 200)
    text = learner_error(error, {}).text
    assert "Original stack trace" not in text and len(text) < 300, text
    assert "uninitialized value dense/kernel" in text


def test_a_variables_values_are_left_out_of_any_exercises_error():
    """An eager variable's repr prints its values; the folded message names the variable."""
    error = ValueError("Trying to use <tf.Variable 'dense/kernel:0' shape=(784, 10) "
                       "dtype=float32, numpy=\narray([[0.1, 0.2],\n       [0.3, 0.4]], "
                       "dtype=float32)> outside the strategy scope")
    text = learner_error(error, {}).text
    assert "<tf.Variable 'dense/kernel:0' shape=(784, 10) dtype=float32> outside" in text, text
    assert "numpy=" not in text and "0.1" not in text


def lab_reports(cells):
    """The lab's extension reporting the code its cells hold now (a comm message)."""
    runs = cell_runs._RUNS  # pylint: disable=protected-access  (the shell fixture's listener)
    runs.editor_report({"content": {"data": {"cells": cells}}})


def test_a_cell_edited_in_the_lab_and_not_run_is_not_judged(shell, tmp_path, monkeypatch):
    """The lab's report wins over the file: unsaved edits are seen, a saved edit since undone
    in the editor is not held against the learner, and running the cell clears it."""
    notebook = tmp_path / "06.ipynb"
    monkeypatch.setenv(cell_runs.SESSION_VARIABLE, str(notebook))
    assert shell.run_cell(STARTING, cell_id="exercise").success
    edited = STARTING.replace("repeat(20,", "repeat(32,")
    lab_reports({"exercise": edited, "check": "ce.check(train)"})
    verdict = check_in(shell)
    assert verdict.text.startswith("Not yet. Run the exercise cell first: it was changed "
                                   "after its last run (the cell holds other code now)"), \
        verdict.text
    saved_notebook(notebook, edited, time.time() + 5)   # saved with the edit, then undone
    lab_reports({"exercise": STARTING})
    assert "Run the exercise cell first" not in check_in(shell).text
    lab_reports({"exercise": edited})
    assert shell.run_cell(edited, cell_id="exercise").success   # run as it is now: judged
    assert "Run the exercise cell first" not in check_in(shell).text


@pytest.mark.parametrize("message", [None, "x", {}, {"content": None}, {"content": {}},
                                     {"content": {"data": "x"}},
                                     {"content": {"data": {"cells": ["exercise"]}}},
                                     {"content": {"data": {"cells": {"exercise": 3}}}}])
def test_a_malformed_report_changes_nothing(shell, message):
    assert shell.run_cell(STARTING, cell_id="exercise").success
    cell_runs._RUNS.editor_report(message)  # pylint: disable=protected-access
    assert cell_runs._RUNS.in_editor == {}  # pylint: disable=protected-access
    assert "Run the exercise cell first" not in check_in(shell).text
