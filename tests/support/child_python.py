"""Child Python processes for the tests: how they are started and with what environment.

Some behaviour can only be seen in a fresh interpreter (what a module imports, what a start-up
hook does, what ``python -m ipu_emulator`` prints and returns), so tests start ``python -c`` or
``python -m ipu_emulator`` children.  A child that imports TensorFlow costs seconds, so a test
module starts one child per scenario and asserts everything on it (module-scoped fixtures);
several small checks that need the same isolation go into one child, which reports each
result with ``report(name, value)`` (see ``REPORTER``) for ``ChildRun.results``.

* ``child_env(**changes)``: the environment every child gets (``CHILD_ENV`` set, ``DROPPED``
  removed), with ``changes`` on top (a value of ``None`` removes the variable).
* ``run_python(code, *args, cwd=None, env=None, timeout=300)``: ``python -c code args...``,
  always a new interpreter.
* ``run_emulator(*args, cwd=None, env=None, timeout=300)``: ``python -m ipu_emulator args...``,
  forked from a Python that has TensorFlow imported already (``preloaded_python.py``: 2.5 s
  of CPU less per child), or a new process when the environment asks for what only a new
  process gives.  ``run_code(code, *args, ...)``: ``python -c`` the same way.  A test of
  what a fresh interpreter imports uses ``run_python``.

Both return a ``ChildRun``: ``returncode``, ``stdout``, ``stderr``, ``cwd`` (the directory the
child ran in, where it wrote its files), ``check()`` (fails the test, with the end of stderr,
unless the child exited with 0), ``results`` and ``read_json(name)``.
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Every child: the bundled data sample (offline and small), a matplotlib that draws no
# windows, and no TensorFlow C++ start-up logs in stderr.
CHILD_ENV = {"IPU_EMULATOR_DATA": "sample", "MPLBACKEND": "Agg", "TF_CPP_MIN_LOG_LEVEL": "2"}
# Settings from the shell the tests were started in that would change what a child does:
# profiling reports written into the working directory, synthetic data, warnings as errors.
# A test that wants one passes it to ``child_env``/``env=``.
DROPPED = ("POPLAR_ENGINE_OPTIONS", "TF_POPLAR_FLAGS", "PYTHONWARNINGS")

# Put at the top of a child's code: ``report(name, value)`` prints one JSON line that
# ``ChildRun.results`` reads back as ``results[name] == value``.
RESULT_PREFIX = "@child-result "
REPORTER = (
    "def report(name, value):\n"
    "    import json as _json\n"
    f"    print({RESULT_PREFIX!r} + _json.dumps([name, value]), flush=True)\n"
)


def child_env(**changes) -> dict:
    """``os.environ`` without ``DROPPED``, with ``CHILD_ENV``, then ``changes`` (None removes)."""
    env = {key: value for key, value in os.environ.items() if key not in DROPPED}
    env.update(CHILD_ENV)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


@dataclasses.dataclass
class ChildRun:
    """A finished child: its exit code, its output and the directory it ran in."""

    args: list
    returncode: int
    stdout: str
    stderr: str
    cwd: Path | None

    def check(self) -> "ChildRun":
        """Fail unless the child exited with 0, showing the end of its stderr."""
        assert self.returncode == 0, (
            f"child exited with {self.returncode}:\n{self.stderr[-3000:]}")
        return self

    @property
    def results(self) -> dict:
        """What the child reported with ``report(name, value)`` (``REPORTER``), by name."""
        found = {}
        for line in self.stdout.splitlines():
            if line.startswith(RESULT_PREFIX):
                name, value = json.loads(line[len(RESULT_PREFIX):])
                found[name] = value
        return found

    def read_json(self, name) -> object:
        """A JSON file the child wrote, relative to the directory it ran in."""
        return json.loads((Path(self.cwd or ".") / name).read_text())

    def busy_lanes(self, trace="trace.json") -> dict:
        """The Chrome trace the child wrote (``--trace``): each lane that ran a forward or a
        backward phase, with the set of those it ran (``{"IPU0": {"forward", "backward"}}``)."""
        events = self.read_json(trace)["traceEvents"]
        lanes = {e["tid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e["name"] == "thread_name"}
        busy = {}
        for event in events:
            if event.get("ph") == "X" and event["args"].get("kind") in ("forward", "backward"):
                busy.setdefault(lanes[event["tid"]], set()).add(event["args"]["kind"])
        return busy


def _run(command, cwd, env, timeout) -> ChildRun:
    done = subprocess.run(command, cwd=cwd, env=child_env() if env is None else env,
                          capture_output=True, text=True, timeout=timeout)
    return ChildRun(args=list(command), returncode=done.returncode, stdout=done.stdout,
                    stderr=done.stderr, cwd=Path(cwd) if cwd is not None else None)


def run_python(code, *args, cwd=None, env=None, timeout=300) -> ChildRun:
    """``python -c code args...`` in this interpreter; ``env`` defaults to ``child_env()``."""
    return _run([sys.executable, "-c", code, *map(str, args)], cwd, env, timeout)


def run_emulator(*args, cwd=None, env=None, timeout=300) -> ChildRun:
    """``python -m ipu_emulator args...``; ``env`` defaults to ``child_env()``.  Forked from a
    Python that has imported TensorFlow already (``preloaded_python``) where the environment
    allows, else a new process; ``IPU_LAB_TEST_FORKS=0`` makes it a new process always."""
    return _run_preloaded([sys.executable, "-m", "ipu_emulator", *map(str, args)], cwd, env,
                          timeout)


def run_code(code, *args, cwd=None, env=None, timeout=300) -> ChildRun:
    """``python -c code args...``, forked where the environment allows, as ``run_emulator``
    (for a child that does TensorFlow work, not one that tests what a new interpreter imports:
    ``run_python``).  One child at a time per test process."""
    return _run_preloaded([sys.executable, "-c", code, *map(str, args)], cwd, env, timeout)


def _run_preloaded(command, cwd, env, timeout) -> ChildRun:
    """``command`` (``python -m module ...`` or ``python -c code ...``) forked, or anew."""
    env = child_env() if env is None else env
    server = _preloaded()
    if server is None or not server.can_run(env):
        return _run(command, cwd, env, timeout)
    _, flag, target, *args = command
    fork = server.run_module if flag == "-m" else server.run_code
    returncode, stdout, stderr = fork(target, args, cwd, env, timeout)
    return ChildRun(args=command, returncode=returncode, stdout=stdout, stderr=stderr,
                    cwd=Path(cwd) if cwd is not None else None)


_SERVER = []


def _preloaded():
    """This process's fork server, started on first use (None when turned off)."""
    if os.environ.get("IPU_LAB_TEST_FORKS") == "0":
        return None
    if not _SERVER:
        from tests.support.preloaded_python import PreloadedPython
        _SERVER.append(PreloadedPython(str(ROOT), child_env()))
        atexit.register(_SERVER[0].close)
    return _SERVER[0]


def forked_cpu_seconds() -> float:
    """The CPU the forked children used (they are the server's children, not ours)."""
    return _SERVER[0].cpu_seconds if _SERVER else 0.0


__all__ = ["CHILD_ENV", "DROPPED", "REPORTER", "ROOT", "ChildRun", "child_env", "run_code",
           "run_emulator", "run_python"]
