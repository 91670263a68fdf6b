"""TF1 graph-mode and TF2 eager tests in one ``pytest`` run.

``disable_v2_behavior`` is process-wide and cannot be undone, and most of the suite needs it.
So test modules that set ``pytestmark = pytest.mark.tf2`` (TF2 eager tests, all in
tests/emulator/tf2/) run in one child ``pytest`` process in which tests/emulator/conftest.py
leaves TF2 behaviour on.  In the parent each of their tests is replaced by a proxy with the
same test id that reports the child's outcome and failure text, so selection (``-k``, node
ids), reporting and exit codes work as usual.

The child runs once, bounded by ``IPU_EMULATOR_TF2_TIMEOUT_S`` seconds (600 by default, several
times its usual run): if it hangs it is stopped with everything it started, the tests it
finished keep their outcomes and the others fail at once, so a hang costs minutes.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

import pytest

CHILD_ENV = "IPU_EMULATOR_TF2_TESTS"
_RESULTS_ENV = "IPU_EMULATOR_TF2_RESULTS"
_TIMEOUT_ENV = "IPU_EMULATOR_TF2_TIMEOUT_S"
_DEFAULT_TIMEOUT_S = 600


def in_tf2_child() -> bool:
    return os.environ.get(CHILD_ENV) == "1"


class TF2TestProxy(pytest.Item):
    """Stands in for a TF2 test in the graph-mode parent; the child process runs it."""

    def __init__(self, *, runner, **kwargs):
        super().__init__(**kwargs)
        self._runner = runner

    def runtest(self):
        outcome = self._runner.outcome(self.nodeid)
        if outcome is None:
            pytest.fail("the TF2 child process did not report this test:\n"
                        + self._runner.child_output[-4000:], pytrace=False)
        status, text = outcome
        if status == "skipped":
            pytest.skip(text)
        if status == "failed":
            pytest.fail("(ran in the TF2 child process)\n" + text, pytrace=False)

    def reportinfo(self):
        return self.path, None, self.nodeid + " [TF2 child process]"


class _ChildRun:
    """Runs every selected TF2 test in one child process, once, when the first is needed."""

    def __init__(self, rootpath, nodeids):
        self._rootpath = rootpath
        self._nodeids = nodeids
        self._results = None
        self.child_output = ""

    def outcome(self, nodeid):
        if self._results is None:
            self._results = self._run()
        return self._results.get(nodeid)

    def _run(self):
        timeout = float(os.environ.get(_TIMEOUT_ENV, _DEFAULT_TIMEOUT_S))
        with tempfile.TemporaryDirectory() as tmp:
            results_path = os.path.join(tmp, "results.jsonl")
            env = dict(os.environ, **{CHILD_ENV: "1", _RESULTS_ENV: results_path})
            # Output goes to a file, not a pipe: a hung grandchild holding a pipe open would
            # block the parent's read even after the child is killed.
            with open(os.path.join(tmp, "output.txt"), "w+", encoding="utf-8") as output:
                child = subprocess.Popen(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     "-p", "no:nbval", "-p", "no:xdist", *self._nodeids],
                    cwd=str(self._rootpath), env=env, stdout=output, stderr=subprocess.STDOUT,
                    start_new_session=True)  # its own process group, to stop it whole
                ending = ""
                try:
                    child.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                    ending = (f"\n[the TF2 child process was stopped after {timeout:g} s "
                              f"({_TIMEOUT_ENV}); the tests it had not finished fail]")
                output.seek(0)
                self.child_output = output.read() + ending
            results = {}
            if os.path.exists(results_path):
                with open(results_path, encoding="utf-8") as lines:
                    for line in lines:
                        _merge(results, json.loads(line))
            return results


def _merge(results, entry):
    nodeid, when, status, text = entry["nodeid"], entry["when"], entry["outcome"], entry["text"]
    previous = results.get(nodeid)
    if status == "failed":
        results[nodeid] = ("failed", ((previous[1] + "\n") if previous and previous[0] == "failed"
                                      else "") + "[%s] %s" % (when, text))
    elif status == "skipped" and previous is None:
        results[nodeid] = ("skipped", text)
    elif previous is None:
        results[nodeid] = ("passed", "")


def is_tf2_item(item) -> bool:
    return item.get_closest_marker("tf2") is not None


def replace_tf2_items(config, items):
    """In the parent: swap TF2 tests for proxies that report the child's outcomes."""
    if in_tf2_child():
        return
    tf2_items = [item for item in items if is_tf2_item(item)]
    if not tf2_items:
        return
    runner = _ChildRun(config.rootpath, [item.nodeid for item in tf2_items])
    replaced = []
    for item in items:
        if not is_tf2_item(item):
            replaced.append(item)
            continue
        proxy = TF2TestProxy.from_parent(item.parent, name=item.name, runner=runner)
        # Module markers (``tf2`` itself) come with the parent; copy the test's own.
        proxy.own_markers.extend(item.own_markers)
        replaced.append(proxy)
    items[:] = replaced


def report_to_parent(report):
    """In the child: append each phase's outcome for the parent to read."""
    path = os.environ.get(_RESULTS_ENV)
    if not path or not in_tf2_child():
        return
    if report.when != "call" and report.outcome == "passed":
        return
    if report.skipped and isinstance(report.longrepr, tuple):
        text = str(report.longrepr[2]).replace("Skipped: ", "", 1)
    else:
        text = report.longreprtext or ""
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"nodeid": report.nodeid, "when": report.when,
                              "outcome": report.outcome, "text": text}) + "\n")
