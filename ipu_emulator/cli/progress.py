"""Who is where, and who is stuck: the class's exercise progress, read from the learners' homes.

    python -m ipu_emulator progress [HOMES] [--watch SECONDS] [--json]

On a class's hub (``make hub``; ``make progress`` runs this) each learner's checks are noted in
``<home>/.ipu-lab/progress.jsonl`` (``ipu_emulator.exercises.progress``).  HOMES is the folder of
the learners' homes (default: $IPU_HUB_HOMES, else build/hub-homes).  One line a learner, stuck
learners first: "stuck" is three "Not yet" in a row at one exercise, "quiet" is no check for
15 minutes.  Reads files only: no network, nothing written.
"""
import argparse
import json
import os
import sys
import time
from typing import List

from ipu_emulator.exercises import course, progress

def course_exercises() -> List[str]:
    """Every exercise's name, in the order of the course (``exercises.course``)."""
    return list(course.COURSE)


def _ago(seconds) -> str:
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago"


def table(homes: str, now=None) -> str:
    course = course_exercises()
    rows = progress.class_progress(homes, now, course)
    lines = [f"{len(rows)} learner(s) in {homes}, {len(course)} exercises in the course, "
             f"{time.strftime('%H:%M:%S', time.localtime(now))}",
             f"{'learner':16} {'status':11} {'right':>6}  {'at exercise':32} {'misses':>6}  "
             f"{'last check':12} last feedback"]
    for p in rows:
        lines.append(f"{p.learner[:16]:16} {p.status:11} {len(p.right):>3}/{len(course):<2}  "
                     f"{p.current[:32] or '-':32} {p.misses_in_a_row:>6}  {_ago(p.idle_s):12} "
                     f"{p.last_said[:70]}")
    if not rows:
        lines.append("(no learner has a home there yet)")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("homes", nargs="?",
                        default=os.environ.get("IPU_HUB_HOMES", os.path.join("build", "hub-homes")),
                        help="the folder of the learners' homes (default: $IPU_HUB_HOMES, "
                             "else build/hub-homes)")
    parser.add_argument("--watch", type=float, default=0, metavar="SECONDS",
                        help="print the table again every SECONDS until Ctrl-C")
    parser.add_argument("--json", action="store_true", help="one JSON object per learner")


def run(options) -> int:
    if not os.path.isdir(options.homes):
        print(f"ipu_emulator: no such folder of learners' homes: {options.homes} "
              "(start the class's hub with `make hub` first, or name the folder)",
              file=sys.stderr)
        return 1
    if options.json:
        course = course_exercises()
        for p in progress.class_progress(options.homes, course=course):
            print(json.dumps({"learner": p.learner, "status": p.status, "right": list(p.right),
                              "exercises": len(course), "current": p.current,
                              "misses_in_a_row": p.misses_in_a_row, "idle_s": p.idle_s,
                              "last_said": p.last_said}))
        return 0
    try:
        while True:
            if options.watch:
                print("\033[2J\033[H", end="")  # clear the terminal, as `watch` does
            print(table(options.homes), flush=True)
            if not options.watch:
                return 0
            time.sleep(options.watch)
    except KeyboardInterrupt:
        return 0
