"""What a long vector's length costs in CPU, through NumPy's BLAS (``np.linalg.norm``) and
summed by NumPy itself (``code_exercises.reference._length``), side by side.

A check compares the learner's weights with the reference's by three lengths of vectors of
about 240,000 numbers (notebook 09's MLP).  ``np.linalg.norm`` of such a vector is a BLAS dot
product, which NumPy's OpenBLAS splits over its worker threads; after each call those threads
spin, waiting for more work, before they sleep, and that spinning is CPU the process pays for.
Each setting runs in a fresh Python (the threads' state is the process's): 20 calls, each
followed by some Python work as a check's graph building follows its comparisons; their
process CPU (every thread) and wall clock, medians over alternating rounds.  On this machine
(2026-11-30): 0.83 s of CPU through BLAS against 0.43 s, the same wall clock: OpenBLAS's
thread spun through the Python work after each call.
Usage:  python bench/blas_spin.py [--rounds R]
"""
import os

from _alternating import child_json, medians_from_command_line, print_two_settings

CHILD = r"""
import json, sys, time
import numpy as np
from ipu_emulator.code_exercises.reference import _length
length = np.linalg.norm if sys.argv[1] == "np.linalg.norm" else _length
vector = np.random.default_rng(0).standard_normal(240_000)
cpu, wall = time.process_time(), time.monotonic()
for _ in range(20):
    length(vector)
    sum(range(2_000_000))        # Python work between two comparisons (about 30 ms here)
print(json.dumps({"CPU s": time.process_time() - cpu, "wall s": time.monotonic() - wall}))
"""


def measure(setting):
    return child_json(CHILD, setting, env=dict(os.environ))


if __name__ == "__main__":
    rounds, medians = medians_from_command_line(__doc__, measure,
                                                ["np.linalg.norm", "_length"])
    print_two_settings(rounds, medians, "CPU s", "CPU, summed by NumPy over BLAS")
