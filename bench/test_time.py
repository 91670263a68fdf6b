"""How long `make test` (or `make test-fast`) takes at two revisions, side by side on fresh
clones: the measure issue 39 sets (this machine's speed moves by a fifth within the hour, so
only runs made one right after the other compare).

Each round clones this repository twice into a temporary folder, checks out each revision and
runs the target there, the two revisions' order reversed every other round (base, head, head,
base...).  For `make test` the timed run is the clone's first (`make env`, the builds and
pytest, as on a fresh clone); for `make test-fast` the environment is made first and not timed,
and the target runs twice, the second timed (the first writes the bytecode).  Each run prints its
wall clock, the CPU of make and everything it waited for (user + sys, as /usr/bin/time gives), its
exit status and the stage report's pytest and total lines where it has them (its whole output,
and its unit table where it writes one, are kept in build/test_time/); then the medians and
head's ratios to base.  The shell's PYTHONDONTWRITEBYTECODE is passed on as it is (this
machine's shell and its CI set it; it slows a revision whose Makefile does not clear it).
Between runs, processes a run left behind in its clone (a TensorBoard) are stopped.
Usage:  python bench/test_time.py [--base REV] [--head REV] [--target test|test-fast]
                                  [--rounds R] [--head-pytest-args ARGS]
``--head-pytest-args`` passes PYTEST_ARGS to head's `make test`: for example the test files
added since base left out (``--ignore=FILE`` each), to time the behaviours base covered.
Defaults: base 31e2a70 (the revision issue 39 measured), head HEAD, target test, one round
(about 12 minutes on this machine: two runs of `make test`).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from _alternating import alternating_medians, children_cpu

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "build" / "test_time"     # each run's output, for a failure's details
# The stage report's lines ("  tests (pytest, 3 workers)   4.6 min   274.6 s", with "(exit 1)"
# after it when a stage failed).
STAGE_LINES = {"pytest s": r"tests \(pytest.*?([\d.]+) s\b",
               "builds s": r"builds:.*?([\d.]+) s\b",
               "total s": r"total, from the start of make.*?([\d.]+) s\b"}


def stop_left_behind(folder: Path):
    """Stop processes still running from ``folder`` (a test run's TensorBoard, say): they
    would take CPU from the next run.  (Where there is no /proc, nothing is looked for.)"""
    if not Path("/proc").is_dir():
        return
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in command:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def clone(revision: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", revision], check=True)
    return into


def timed_make(folder: Path, target: str, log: Path, make_args=()) -> dict:
    """Run ``make target`` (with ``make_args``, such as ``PYTEST_ARGS=...``) in ``folder``, its
    output (stdout and stderr as they came) to ``log``; its figures."""
    cpu, started = children_cpu(), time.monotonic()
    with open(log, "w") as output:
        returncode = subprocess.run(["make", "-C", str(folder), target, *make_args],
                                    stdout=output, stderr=subprocess.STDOUT).returncode
    figures = {"wall s": time.monotonic() - started, "CPU s": children_cpu() - cpu,
               "exit": returncode}
    printed = log.read_text(errors="replace")
    for name, pattern in STAGE_LINES.items():
        found = re.findall(pattern, printed, flags=re.MULTILINE)
        if found:
            figures[name] = float(found[-1])
    return figures


def readable_folder(parent=None) -> Path:
    """A new folder others may read: the classroom rehearsal's learners are other Unix users,
    whose servers run on the clone's .venv (a temporary folder is the owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="test-time-", dir=parent))
    folder.chmod(0o755)
    return folder


def measure(revision: str, target: str, scratch: Path, log: Path, make_args=()) -> dict:
    folder = clone(revision, readable_folder(scratch))
    try:
        if target == "test-fast":
            subprocess.run(["make", "-C", str(folder), "env"], check=True, capture_output=True)
            timed_make(folder, target, log)     # writes the bytecode, as a second run finds it
        figures = timed_make(folder, target, log, make_args)
        units = folder / "build" / "test_units.tsv"     # every unit's time, where it has them
        if units.exists():
            shutil.copyfile(units, log.with_suffix(".units.tsv"))
        return figures
    finally:
        stop_left_behind(folder)
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="31e2a70")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--target", choices=("test", "test-fast"), default="test")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--head-pytest-args", default="",
                        help="PYTEST_ARGS for head's `make test` (for example --ignore=FILE ...)")
    options = parser.parse_args()
    revisions = {}
    for name in ("base", "head"):
        revision = getattr(options, name)
        revisions[name] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", revision],
                                         check=True, capture_output=True, text=True).stdout.strip()
    print(f"make {options.target}: base {revisions['base']}, head {revisions['head']}, "
          f"{options.rounds} round(s); PYTHONDONTWRITEBYTECODE="
          f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}"
          + (f"; head's PYTEST_ARGS={options.head_pytest_args}" if options.head_pytest_args
             else ""), flush=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    scratch = readable_folder()

    def timed(name):
        log = LOGS / f"{name}-{revisions[name]}-{time.strftime('%H%M%S')}.log"
        make_args = ([f"PYTEST_ARGS={options.head_pytest_args}"]
                     if name == "head" and options.head_pytest_args else [])
        figures = measure(revisions[name], options.target, scratch, log, make_args)
        print(f"  {time.strftime('%H:%M')} {name} " + "  ".join(
            f"{key} {value:.1f}" if isinstance(value, float) else f"{key} {value}"
            for key, value in figures.items()) + f"  ({log.relative_to(ROOT)})", flush=True)
        return {key: figures[key] for key in ("wall s", "CPU s")}

    try:
        medians = alternating_medians(timed, ["base", "head"], options.rounds)
    finally:
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    for key in ("wall s", "CPU s"):
        print(f"{key}: base {medians['base'][key]:.1f}, head {medians['head'][key]:.1f}, "
              f"head / base {medians['head'][key] / medians['base'][key]:.2f} "
              f"(medians of {options.rounds})")


if __name__ == "__main__":
    main()
