"""Child Pythons with TensorFlow already imported: a fork server for the tests' TF children.

Every ``python -m ipu_emulator run ...`` (or ``python -c ...``) child the tests start imports
TensorFlow first, about 2.5 s of CPU each, and `make test` starts about sixty of them.  So each
test process keeps one server process (started on first use) that has imported TensorFlow and
nothing of ours, and forks it for each child: the fork runs the command as a fresh interpreter
would (its own ``sys.argv``, environment, working directory, standard streams, exit code,
``atexit`` handlers), only without paying for the import again.

What a fork cannot give a fresh interpreter, it must not be asked for: a child whose
environment differs from the server's in anything read while Python or TensorFlow start
(``STARTUP_VARIABLES``: ``TF_*``, ``PYTHON*`` but ``PYTHONPATH``, thread and library settings)
runs as a real new process instead (``child_python`` decides), and so does a test that checks
what a fresh interpreter imports (it calls ``run_python``, which never forks; ``run_code``
forks as ``run_emulator`` does).  ``PYTHONPATH`` is applied as Python applies it at
start-up: its entries after ``sys.path[0]``.

The server speaks JSON lines on its standard input and output: a request names the command
(``module`` or ``code``, and ``args``), ``cwd``, ``env`` and the files for the child's output;
the answer gives the child's ``pid`` at once, then its ``returncode`` and CPU seconds when it
ends.  It runs one child at a time.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading

STARTUP_PREFIXES = ("TF_", "PYTHON", "OMP_", "KMP_", "MKL", "LD_", "CUDA", "MALLOC")
ALLOWED_STARTUP = ("PYTHONPATH",)


def startup_settings(env: dict) -> dict:
    """The variables of ``env`` read while Python and TensorFlow start."""
    return {key: value for key, value in env.items()
            if key.startswith(STARTUP_PREFIXES) and key not in ALLOWED_STARTUP}


# ---- the server (runs in its own process: ``python -c SERVER``) ---------------------------

def serve() -> None:  # pragma: no cover - runs in the server process
    import gc

    # As ipu_emulator/tensorflow_import.py does it, which this server must not import: without
    # the collector's full passes while TensorFlow loads, then frozen.  TensorFlow's objects
    # outlive every child: frozen, a child's full collections and its exit skip them, and leave
    # their memory shared with the server rather than copied.  Three children (two tutorial
    # layouts under the runner, one short TF program), alternating: 2.40-2.47 s of CPU against
    # 2.78-3.22 s unfrozen.
    gc.disable()
    import tensorflow  # noqa: F401  (what the children would each import: the point)
    gc.enable()
    gc.freeze()

    requests, answers = sys.stdin, sys.stdout
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(request)   # never returns
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, status, usage = os.wait4(pid, 0)
        answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                                  "cpu_seconds": usage.ru_utime + usage.ru_stime}) + "\n")
        answers.flush()
    # Its tests are over: the interpreter's teardown of TensorFlow's objects would only cost
    # 1.3 s of CPU (bench/exit_cost.py).
    os._exit(0)


def _run_child(request) -> None:  # pragma: no cover - runs in a forked child
    import atexit
    import runpy
    import traceback
    import types

    code = 1
    try:
        os.setsid()   # its own process group, so a timeout stops it and all it started
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
            os.close(source)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # sys.path as `python -m` (or -c) builds it: the working directory (-c: ''),
        # PYTHONPATH, the rest.
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        rest = [p for p in sys.path if p and p not in extra]   # '' (the server's -c) left out
        sys.path[:] = ["" if "code" in request else os.getcwd(), *extra, *rest]
        try:
            if "code" in request:          # python -c code args
                sys.argv = ["-c", *request["args"]]
                main = types.ModuleType("__main__")
                sys.modules["__main__"] = main
                exec(compile(request["code"], "<string>", "exec"), main.__dict__)
            else:                          # python -m module args
                sys.argv = [request["module"], *request["args"]]
                runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as ended:
            code = ended.code if isinstance(ended.code, int) else (0 if ended.code is None
                                                                   else 1)
            if not isinstance(ended.code, (int, type(None))):
                print(ended.code, file=sys.stderr)
        except BaseException:  # pylint: disable=broad-except
            traceback.print_exc()
            code = 1
        # What a fresh interpreter does on its way out: wait for its threads, run atexit.
        threading._shutdown()  # pylint: disable=protected-access
        atexit._run_exitfuncs()  # pylint: disable=protected-access
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # pylint: disable=broad-except
                pass
        os._exit(code)


# The repository on sys.path only to import this module: a child's sys.path is the server's.
SERVER = ("import sys; sys.path.insert(0, {root!r}); "
          "from tests.support.preloaded_python import serve; del sys.path[0]; serve()")


# ---- the client (in the test process) --------------------------------------------------------

def _answer(line: str) -> dict:
    if not line:   # the server ended (killed, or out of memory): say so, not a JSON error
        raise RuntimeError("the preloaded Python's fork server ended; IPU_LAB_TEST_FORKS=0 "
                           "runs the children as new processes")
    return json.loads(line)


class PreloadedPython:
    """One fork server, started on first use, for one test process."""

    def __init__(self, root: str, env: dict):
        self._root = root
        self._env = dict(env)
        self._process = None
        self._one_at_a_time = threading.Lock()
        self.cpu_seconds = 0.0   # the children's CPU, which this process never waits for

    def can_run(self, env: dict) -> bool:
        return startup_settings(env) == startup_settings(self._env)

    def _server(self):
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-c", SERVER.format(root=self._root)], env=self._env,
                cwd=self._root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, bufsize=1)
        return self._process

    def run_module(self, module: str, args, cwd, env: dict, timeout: float):
        """``python -m module args`` in a fork: (returncode, stdout, stderr), or
        ``subprocess.TimeoutExpired`` after ``timeout`` seconds (the child is stopped)."""
        return self._run({"module": module}, [module, *args], args, cwd, env, timeout)

    def run_code(self, code: str, args, cwd, env: dict, timeout: float):
        """``python -c code args`` in a fork, as ``run_module``."""
        return self._run({"code": code}, ["-c", code, *args], args, cwd, env, timeout)

    def _run(self, command: dict, shown, args, cwd, env: dict, timeout: float):
        # One child at a time: the server answers requests in order, on one pipe.
        server = self._server()
        with self._one_at_a_time, tempfile.TemporaryDirectory() as folder:
            out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
            server.stdin.write(json.dumps({**command, "args": list(map(str, args)),
                                           "cwd": os.path.abspath(cwd or os.getcwd()),
                                           "env": env, "stdout": out, "stderr": err}) + "\n")
            server.stdin.flush()
            started = _answer(server.stdout.readline())
            ended = self._wait(server, started["pid"], timeout)
            if ended.get("timed_out"):
                raise subprocess.TimeoutExpired(shown, timeout)
            ended = _answer(ended.get("line", ""))
            self.cpu_seconds += ended["cpu_seconds"]
            with open(out, encoding="utf-8", errors="replace") as o, \
                    open(err, encoding="utf-8", errors="replace") as e:
                return ended["returncode"], o.read(), e.read()

    @staticmethod
    def _wait(server, pid, timeout):
        answer = {}
        reader = threading.Thread(target=lambda: answer.update(line=server.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            reader.join()
            answer["timed_out"] = True
        return answer

    def close(self):
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=30)
