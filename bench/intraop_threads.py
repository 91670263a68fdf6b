"""The tests' TensorFlow on its default intra-op threads and on one
(tests/support/intraop_threads.py), side by side.

Each round runs the check and estimator files that train the most (six files) on pytest's three
workers, as `make test` does on two cores, once with TF_NUM_INTRAOP_THREADS unset and once with
the suite's one thread, in alternating order.  It reports each run's CPU (pytest, its workers
and every process they waited for) and wall clock; medians over the rounds, then the ratio.
Usage:  python bench/intraop_threads.py [--rounds R]   (about two minutes a round)
"""
import os
import subprocess
import sys
import time
from pathlib import Path

from _alternating import children_cpu, medians_from_command_line, print_two_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support import intraop_threads  # noqa: E402

CHECKS = "tests/emulator/code_exercises/"
TESTS = [CHECKS + "test_more_attempts_nb09_nb11.py",
         CHECKS + "test_correct_alternatives_pipelines.py", CHECKS + "test_nb09_pipelining.py",
         CHECKS + "test_nb12_memory.py", CHECKS + "test_more_attempts_nb05_nb07.py",
         "tests/emulator/estimators/test_estimators.py"]
SETTINGS = ["TensorFlow's default", "one intra-op thread"]


def measure(setting):
    env = {key: value for key, value in os.environ.items() if key != intraop_threads.VARIABLE}
    env.update(IPU_EMULATOR_DATA="sample", IPU_LAB_SOLUTIONS="1", MPLBACKEND="Agg",
               PYTHONDONTWRITEBYTECODE="")
    if setting == SETTINGS[0]:
        env[intraop_threads.OPT_OUT] = "0"   # else the suite's conftest.py sets it
    else:
        env.pop(intraop_threads.OPT_OUT, None)
    before, started = children_cpu(), time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "3", "-p", "no:cacheprovider",
                    *TESTS], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return {"cpu s": children_cpu() - before, "wall s": time.monotonic() - started}


if __name__ == "__main__":
    rounds, medians = medians_from_command_line(__doc__, measure, SETTINGS)
    print_two_settings(rounds, medians, "cpu s", "CPU on one intra-op thread over the default")
