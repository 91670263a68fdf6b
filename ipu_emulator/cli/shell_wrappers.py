"""Shell wrappers (a profiling script, say) run through the runner.

``python -m ipu_emulator run wrapper.sh ARGS`` runs the shell script with ``python`` and
``python3`` shims first on its ``PATH``, so every ``python3 script.py`` inside it runs
through the runner with the same options.
"""
from __future__ import annotations

import os
import shlex
import stat
import sys
import tempfile


def is_python_script(path: str) -> bool:
    if path.endswith(".py"):
        return True
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
    except OSError:
        return True
    return not (first.startswith(b"#!") and b"python" not in first)


def python_shim_dir(runner_flags) -> str:
    """A directory with ``python`` and ``python3`` shims: ``python3 script.py ...`` runs the
    script through the runner with ``runner_flags``; anything else (``-c``, ``-m``...)
    goes to this interpreter unchanged."""
    directory = tempfile.mkdtemp(prefix="ipu_emulator_shim_")
    flags = " ".join(shlex.quote(f) for f in runner_flags)
    interpreter = shlex.quote(sys.executable)
    body = ("#!/bin/sh\n"
            "# ipu_emulator: route 'python3 script.py ...' through the runner\n"
            'case "$1" in\n'
            '  ""|-*) exec %s "$@" ;;\n'
            '  *) exec %s -m ipu_emulator run %s "$@" ;;\n'
            "esac\n" % (interpreter, interpreter, flags))
    for name in ("python", "python3"):
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(body)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def run_wrapper(script: str, args, runner_flags) -> int:
    """Run a shell wrapper with the python shims first on its ``PATH``."""
    import shutil
    import subprocess
    shims = python_shim_dir(runner_flags)
    try:
        environment = dict(os.environ)
        environment["PATH"] = shims + os.pathsep + environment.get("PATH", "")
        return subprocess.call(["bash", script] + list(args), env=environment)
    finally:
        shutil.rmtree(shims, ignore_errors=True)


__all__ = ["is_python_script", "python_shim_dir", "run_wrapper"]
