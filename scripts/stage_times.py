"""Time the stages of ``make test`` and print them at the end.

    python3 scripts/stage_times.py run NAME -- COMMAND ...   run COMMAND as the stage NAME
    python3 scripts/stage_times.py report SINCE             the stages run since SINCE

``run`` appends one line to build/stage_times.tsv (start time, stage, seconds, exit status)
and exits with the command's status.  ``report`` prints the stages that started at or after
SINCE (seconds since the epoch: the Makefile passes the time it started), with their total,
so one `make test` shows where its time went, whichever stages it had to run.  Standard
library only: it runs before the project's environment exists.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

LOG = Path(__file__).resolve().parents[1] / "build" / "stage_times.tsv"


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
    return "\n".join(lines)


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
