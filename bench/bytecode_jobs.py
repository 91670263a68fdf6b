"""The builds stage of `make test` (`make -j4 lite hub-tools`) as on a fresh clone, with the
environments' bytecode compiled by one compileall process (COMPILE_JOBS=1, what `make test`
passes) or by a pool of one process per core (COMPILE_JOBS=0, `make hub`'s default), side by
side: wall clock and CPU (make and everything it waited for), medians over alternating rounds.

Before each run the builds' outputs (their folders in build/) and the lab environment's
bytecode are removed, so each run builds the site, the bare site, the hub's venv and proxy and
compiles the lab's bytecode anew, as the first `make test` of a fresh clone does (packages come
from uv's and npm's caches).  The hub's state and the learners' homes in build/ stay.  `make env`
must have run.  Usage:  python bench/bytecode_jobs.py [--rounds R]   (about a minute a round)
"""
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _alternating import children_cpu, medians_from_command_line, print_two_settings

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"


# What the builds stage makes in build/ (the site, the bare site and their tools and downloads,
# the hub's venvs and proxy); never the hub's state and the learners' homes, nor other logs.
BUILT = ["lite", "lite-bare", "lite-venv", "lite-work", "hub-venv", "hub-singleuser-venv",
         "hub-node"]


def as_on_a_fresh_clone():
    """Remove what the builds stage makes: its folders in build/ and the lab environment's
    bytecode."""
    for folder in BUILT:
        shutil.rmtree(ROOT / "build" / folder, ignore_errors=True)
    (VENV / ".bytecode-stamp").unlink(missing_ok=True)
    for cache in list(VENV.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def measure(setting):
    as_on_a_fresh_clone()
    jobs = setting.split("=")[1]
    cpu, started = children_cpu(), time.monotonic()
    subprocess.run(["make", "--no-print-directory", "-j4", f"COMPILE_JOBS={jobs}", "lite",
                    "hub-tools"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return {"wall s": time.monotonic() - started, "CPU s": children_cpu() - cpu}


if __name__ == "__main__":
    if not (VENV / "bin" / "python").exists():
        sys.exit("run `make env` first")
    rounds, medians = medians_from_command_line(__doc__, measure,
                                                ["COMPILE_JOBS=0", "COMPILE_JOBS=1"])
    print_two_settings(rounds, medians, "CPU s", "CPU, one process over a pool")
    first, second = (figures["wall s"] for figures in medians.values())
    print(f"wall clock, one process over a pool: {second / first:.2f}")
