"""Shared by the benchmarks that compare settings side by side: each setting's measure runs in
a fresh Python, the settings alternating round after round (so machine noise falls on all of
them alike), and each figure is the median over the rounds."""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def children_cpu() -> float:
    """User and system CPU of the child processes this one has waited for, in seconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_json(code, *args, env, as_file=False):
    """Run ``python -c code args`` and return the JSON object its last line prints.
    ``as_file``: run the code from a script file instead, for code whose functions must have
    their source (AutoGraph converts nothing run by ``python -c``)."""
    with tempfile.TemporaryDirectory() as folder:
        if as_file:
            script = Path(folder) / "child.py"
            script.write_text(code)
            command = [sys.executable, str(script), *args]
        else:
            command = [sys.executable, "-c", code, *args]
        out = subprocess.run(command, env=env, check=True, capture_output=True,
                             text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def alternating_medians(measure, settings, rounds):
    """``{setting: {figure: median}}`` of ``measure(setting)`` (a dict of figures) over
    ``rounds`` rounds, the settings' order reversed every other round."""
    results = {setting: [] for setting in settings}
    for index in range(rounds):
        for setting in (settings if index % 2 == 0 else settings[::-1]):
            results[setting].append(measure(setting))
    return {setting: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            for setting, runs in results.items()}


def medians_from_command_line(doc, measure, settings):
    """``(rounds, alternating_medians(measure, settings, rounds))`` with the rounds the command
    line asks for (``--rounds R``, 3 by default); ``doc``: the benchmark's docstring, whose
    first line ``--help`` shows."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    return rounds, alternating_medians(measure, settings, rounds)


def print_two_settings(rounds, medians, figure, label):
    """Each setting's medians on a line, then ``label``: the second setting's ``figure`` over
    the first's."""
    width = max(map(len, medians)) + 1
    for setting, figures in medians.items():
        print(f"{setting:{width}s} " + "  ".join(f"{key} {value:5.2f}"
                                                for key, value in figures.items()))
    first, second = (figures[figure] for figures in medians.values())
    print(f"{label}: {second / first:.2f} (medians of {rounds} rounds)")
