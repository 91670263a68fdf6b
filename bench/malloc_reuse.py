"""The tests' processes with and without glibc's malloc keeping freed memory for reuse
(tests/support/malloc_reuse.py), side by side.

Each round runs pytest (one process, no workers) on the estimators' and configuration tests,
whose children run Graphcore-style layouts that feed datasets as graph constants, and on a
file of pipeline checks, once with GLIBC_TUNABLES unset and once with the suite's settings, in
alternating order.  It reports each run's CPU (pytest and every process it waited for: the
fork server and its children), system CPU and page faults; medians over the rounds, then the
ratio.  Usage:  python bench/malloc_reuse.py [--rounds R]   (about a minute a round)
"""
import os
import resource
import subprocess
import sys
from pathlib import Path

from _alternating import medians_from_command_line, print_two_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support import malloc_reuse  # noqa: E402

TESTS = ["tests/emulator/estimators", "tests/emulator/configuration",
         "tests/emulator/code_exercises/test_correct_alternatives_pipelines.py"]
SETTINGS = {"glibc's defaults": None, "the suite's settings": malloc_reuse.SETTINGS}


def measure(setting):
    env = {key: value for key, value in os.environ.items() if key != malloc_reuse.VARIABLE}
    env.update(IPU_EMULATOR_DATA="sample", IPU_LAB_SOLUTIONS="1", MPLBACKEND="Agg")
    # The setting is given to pytest itself (``-p no:xdist`` keeps everything in its tree);
    # without it, IPU_LAB_MALLOC_REUSE=0 stops the suite's conftest.py setting it.
    if SETTINGS[setting]:
        env[malloc_reuse.VARIABLE] = SETTINGS[setting]
    else:
        env["IPU_LAB_MALLOC_REUSE"] = "0"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p",
                    "no:cacheprovider", *TESTS], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "system s": after.ru_stime - before.ru_stime,
            "faults M": (after.ru_minflt - before.ru_minflt) / 1e6}


if __name__ == "__main__":
    rounds, medians = medians_from_command_line(__doc__, measure, list(SETTINGS))
    print_two_settings(rounds, medians, "cpu s", "CPU with the suite's settings over glibc's "
                                                 "defaults")
