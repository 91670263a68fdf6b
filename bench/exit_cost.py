"""What a Python that has loaded TensorFlow and the emulator spends on its way out, with and
without ``gc.freeze()`` at exit (the lab's kernels: jupyter/ipython_kernel_config.py; the
runner: ``python -m ipu_emulator run``; the test processes: conftest.py).

Each round starts two fresh Pythons, in alternating order; each imports TensorFlow, the
emulator's SDK modules and legacy Keras, prints its own CPU so far and exits, one of them with
``atexit.register(gc.freeze)``.  The CPU of its exit is the child's whole CPU (as its parent
reaps it) less what it printed.  Medians over the rounds, then the ratio.
Usage:  python bench/exit_cost.py [--rounds R]
"""
import subprocess
import sys

from _alternating import children_cpu, medians_from_command_line, print_two_settings

LOAD = ("import resource, tensorflow, tf_keras, ipu_emulator.ipu\n"
        "{exit}\n"
        "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(usage.ru_utime + usage.ru_stime)\n")
EXITS = {"plain exit": "", "gc.freeze() at exit": "import atexit, gc; atexit.register(gc.freeze)"}


def measure(setting):
    before = children_cpu()
    printed = subprocess.run([sys.executable, "-c", LOAD.format(exit=EXITS[setting])],
                             check=True, capture_output=True, text=True).stdout
    whole = children_cpu() - before
    return {"exit CPU s": whole - float(printed.split()[-1]), "whole CPU s": whole}


if __name__ == "__main__":
    print_two_settings(*medians_from_command_line(__doc__, measure, list(EXITS)),
                       "exit CPU s", "exit CPU, frozen / plain")
