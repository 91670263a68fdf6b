"""Time the stages of ``make test`` and print them at the end.

    python3 scripts/stage_times.py run NAME -- COMMAND ...   run COMMAND as the stage NAME
    python3 scripts/stage_times.py report SINCE             the stages run since SINCE

``run`` appends one line to build/stage_times.tsv (start time, stage, seconds, exit status)
and exits with the command's status.  ``report`` prints the stages that started at or after
SINCE (seconds since the epoch: the Makefile passes the time it started), with their total,
so one `make test` shows where its time went, whichever stages it had to run; then the
machine's CPU (times compare across machines only as ratios) and, when pytest ran since SINCE,
its ten slowest units of work and each layer's CPU (build/test_units.tsv:
tests/support/unit_times.py; LAYERS below).  Standard
library only: it runs before the project's environment exists.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

LOG = Path(__file__).resolve().parents[1] / "build" / "stage_times.tsv"
UNITS = LOG.with_name("test_units.tsv")
SLOWEST_UNITS = 10
# The suite's layers, by the test units' paths (first match): each one's share of the CPU is
# the budget docs/setup-and-testing.md keeps.
LAYERS = [("notebooks run by nbval", ("notebooks/",)),
          ("JupyterLab and the JupyterLite site in Chromium", ("browser",)),
          ("the classroom on a JupyterHub", ("hub",)),
          ("TF2 tests (one child)", ("tf2",)),
          ("code exercises' checks", ("tests/emulator/code_exercises/",)),
          ("the emulator under TF1", ("tests/emulator/",)),
          ("the runner and Graphcore's layouts", ("tests/cli/",)),
          ("pure layers (simulator, views, widgets, exercises)",
           ("tests/sim/", "tests/views/", "tests/widgets/", "tests/exercises/", "tests/lessons/",
            "ipu_emulator/", "widgets/", "tests/test_pure_layers.py")),
          ("scripts, stored notebooks, kernel paths", ("tests/scripts/", "tests/notebooks/"))]


def run(name: str, command: list[str]) -> int:
    start = time.time()
    status = subprocess.call(command)
    LOG.parent.mkdir(exist_ok=True)
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{start:.3f}\t{name}\t{time.time() - start:.1f}\t{status}\n")
    return status


def stages_since(since: float) -> list[tuple[str, float, int]]:
    if not LOG.exists():
        return []
    stages = []
    for line in LOG.read_text(encoding="utf-8").splitlines():
        start, name, seconds, status = line.split("\t")
        if float(start) >= since:
            stages.append((name, float(seconds), int(status)))
    return stages


def report(since: float) -> str:
    stages = stages_since(since)
    lines = ["time per stage (wall clock):"]
    for name, seconds, status in stages:
        failed = "" if status == 0 else f"   (exit status {status})"
        lines.append(f"  {name:<34} {seconds / 60:5.1f} min  {seconds:7.1f} s{failed}")
    total = time.time() - since
    lines.append(f"  {'total, from the start of make':<34} {total / 60:5.1f} min  {total:7.1f} s")
    lines.append(f"CPU: {cpu_model()}")
    units = units_of_run(since)
    if units:
        slowest = units[:SLOWEST_UNITS]
        lines.append(f"the {len(slowest)} slowest test units (wall clock summed over their "
                     "tests; CPU of the test and of the processes it started):")
        lines += [f"  {seconds:7.1f} s  {cpu:7.1f} s CPU  {unit} ({tests} tests)"
                  for seconds, unit, tests, cpu in slowest]
        shares = layer_shares(units)
        total_cpu = sum(cpu for _, cpu in shares) or 1.0
        lines.append(f"CPU by layer ({total_cpu / 60:.1f} min measured; Chromium's "
                     "renderers read before each browser closed):")
        lines += [f"  {cpu:7.1f} s  {100 * cpu / total_cpu:3.0f} %  {layer}"
                  for layer, cpu in shares]
    return "\n".join(lines)


def layer_of(unit: str) -> str:
    return next((layer for layer, prefixes in LAYERS if unit.startswith(prefixes)), "other")


def layer_shares(units) -> list[tuple[str, float]]:
    """Each layer's CPU over ``units`` ((seconds, unit, tests, cpu) rows), largest first."""
    cpu = {}
    for _, unit, _, unit_cpu in units:
        layer = layer_of(unit)
        cpu[layer] = cpu.get(layer, 0.0) + unit_cpu
    return sorted(cpu.items(), key=lambda item: -item[1])


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name, its core count and its widest vector instructions (float
    results and kernel speeds differ between AVX-512 and AVX2-only hosts)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8")
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    fields = [line.split(":", 1) for line in text.splitlines() if ":" in line]
    model = next((value.strip() for key, value in fields if key.strip() == "model name"), "?")
    flags = next((value.split() for key, value in fields if key.strip() == "flags"), [])
    cores = sum(1 for key, _ in fields if key.strip() == "processor")
    vector = next((name for name in ("avx512f", "avx2", "avx") if name in flags), "no AVX")
    return f"{model}, {cores} cores, {vector.upper()}"


def units_of_run(since: float, log: Path | None = None) -> list[tuple[float, str, int, float]]:
    """Every unit (seconds, unit, tests, CPU seconds) of the pytest run that wrote ``log``
    after ``since``, slowest first; none when ``log`` is older (another run's)."""
    log = log or UNITS
    if not log.exists() or log.stat().st_mtime < since:
        return []
    units = []
    for line in log.read_text(encoding="utf-8").splitlines():
        seconds, unit, tests, cpu = line.split("\t")
        units.append((float(seconds), unit, int(tests), float(cpu)))
    return units


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="action", required=True)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("name")
    run_parser.add_argument("command", nargs=argparse.REMAINDER)
    report_parser = commands.add_parser("report")
    report_parser.add_argument("since", type=float)
    args = parser.parse_args(argv)
    if args.action == "run":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return run(args.name, command)
    print(report(args.since))
    return 0


if __name__ == "__main__":
    sys.exit(main())
