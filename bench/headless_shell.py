"""The browser tests (tests/lite/ and tests/browser/: the JupyterLite site's three Pyodides,
JupyterLab's twenty tests) on Debian's chromium against its chromium-headless-shell, side by
side.  Why `make test` drives the headless shell where it is installed.

    .venv/bin/python bench/headless_shell.py [--rounds 3]

Each round runs the two folders in one pytest child per binary (IPU_LAB_CHROMIUM), alternating,
and takes the child's wall clock and the CPU of everything it waited for: pytest, the servers,
Playwright and the browser's processes.  The site's own figures (the bare floor's kernel-ready
time, notebook 08's first trace) come from build/lite_numbers.json after each run.  Both
binaries are Chromium of one version (Debian's packages chromium and chromium-headless-shell):
the same Blink and V8, without or with the browser's windowing layer.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _alternating import children_cpu, medians_from_command_line, print_two_settings

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support.lab_driver import FULL_CHROMIUM, HEADLESS_SHELL  # noqa: E402

BINARIES = {"chromium": FULL_CHROMIUM, "headless-shell": HEADLESS_SHELL}


def measure(setting):
    env = dict(os.environ, IPU_LAB_CHROMIUM=BINARIES[setting], IPU_EMULATOR_DATA="sample",
               IPU_LAB_SOLUTIONS="1", MPLBACKEND="Agg")
    cpu, started = children_cpu(), time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "no:nbval", "-p", "no:xdist", "tests/lite", "tests/browser"],
                   cwd=REPO, env=env, check=True, capture_output=True)
    figures = {"wall_s": time.monotonic() - started, "cpu_s": children_cpu() - cpu}
    numbers = json.loads((REPO / "build" / "lite_numbers.json").read_text())
    figures["floor_s"] = numbers["bare"]["kernel_ready_s"]
    figures["first_trace_s"] = numbers["cold"]["first_trace_s"]
    return figures


def main():
    missing = [path for path in BINARIES.values() if not os.access(path, os.X_OK)]
    if missing:   # nothing to compare (bench/run_all.py goes on with the others)
        print(f"headless_shell: missing {', '.join(missing)}; Debian: apt-get install "
              "chromium chromium-headless-shell")
        return
    rounds, medians = medians_from_command_line(__doc__, measure, list(BINARIES))
    print_two_settings(rounds, medians, "cpu_s", "CPU of the browser tests, headless shell / chromium")


if __name__ == "__main__":
    main()
