"""What a Python spends importing the emulator, TensorFlow, legacy Keras and the IPU API, with
TensorFlow's first import run without the garbage collector and then frozen
(``ipu_emulator/tensorflow_import.py``, what ``import ipu_emulator`` does) and without it.

Each round starts two fresh Pythons, in alternating order; each imports the four and prints
its CPU so far and its time in full collections, then leaves at once (``os._exit``: the exit
is ``bench/exit_cost.py``'s subject).  Medians over the rounds, then the ratio.
Usage:  python bench/tensorflow_import.py [--rounds R]
"""
import subprocess
import sys

from _alternating import medians_from_command_line, print_two_settings

IMPORT = ("import gc, os, resource, time\n"
          "full = [0.0, 0.0]\n"
          "def timed(phase, info):\n"
          "    if info['generation'] == 2:\n"
          "        full[phase == 'stop'] = time.process_time()\n"
          "        if phase == 'stop': full.append(full[1] - full[0])\n"
          "gc.callbacks.append(timed)\n"
          "import ipu_emulator\n"
          "{setting}\n"
          "import tensorflow, tf_keras\n"
          "from ipu_emulator import ipu\n"
          "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
          "print(usage.ru_utime + usage.ru_stime, sum(full[2:]))\n"
          "os._exit(0)\n")
SETTINGS = {"collector on": "ipu_emulator.tensorflow_import.uninstall()",
            "off, then frozen": ""}


def measure(setting):
    printed = subprocess.run([sys.executable, "-c", IMPORT.format(setting=SETTINGS[setting])],
                             check=True, capture_output=True, text=True).stdout.split()
    return {"import CPU s": float(printed[-2]), "full collections s": float(printed[-1])}


if __name__ == "__main__":
    print_two_settings(*medians_from_command_line(__doc__, measure, list(SETTINGS)),
                       "import CPU s", "import CPU, off then frozen / on")
