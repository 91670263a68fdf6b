"""Each learner's exercise progress, kept on disk for the instructor (the classroom's view).

On a class's JupyterHub (``make hub``) every answer a learner's check judges appends one line to
their own progress file, named by ``IPU_LAB_PROGRESS_FILE`` (the hub sets it to
``<home>/.ipu-lab/progress.jsonl``); a check run with ``...`` still in place is no attempt::

    {"time": 1764222000.5, "exercise": "07.pipeline-the-model", "ok": false, "said": "Not yet. ..."}

Nothing is recorded when the variable is unset (``make lab`` on a laptop, the zero-install
site).  The file lives beside the learner's notebooks, not in their kernel, so it survives a
kernel killed mid-cell, a server restart and a hub restart; a line torn by a kill is skipped
when read.  ``python -m ipu_emulator progress`` reads every learner's file and says who is
stuck (``summarise`` below).

Recording never fails a check: a file that cannot be written is left alone.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "progress.jsonl")
    >>> os.environ[PROGRESS_VARIABLE] = path
    >>> record("doc.demo", False, "Not yet. Hint: count the IPUs", now=100.0)
    >>> record("doc.demo", True, "Right: four it is", now=160.0)
    >>> [(a.exercise, a.ok) for a in read(path)]
    [('doc.demo', False), ('doc.demo', True)]
    >>> del os.environ[PROGRESS_VARIABLE]
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence

PROGRESS_VARIABLE = "IPU_LAB_PROGRESS_FILE"

# What counts as stuck: this many "Not yet" in a row at one exercise with no "Right" since.
STUCK_AFTER = 3
# A learner with no check for this long is shown as quiet (reading, or lost: go and look).
QUIET_AFTER_S = 15 * 60
# The feedback kept per attempt: enough for the instructor to see which hint they got.
SAID_CHARACTERS = 200


@dataclass(frozen=True)
class Attempt:
    """One run of a check: when, which exercise, whether it passed, what it said."""

    time: float
    exercise: str
    ok: bool
    said: str = ""


def record(exercise: str, ok: bool, said: str, now: Optional[float] = None) -> None:
    """Append one attempt to the file ``IPU_LAB_PROGRESS_FILE`` names (nothing when unset).

    An unwritable file is ignored: progress is for the instructor, and a learner's check
    must work whatever happens to it."""
    path = os.environ.get(PROGRESS_VARIABLE, "")
    if not path:
        return
    line = json.dumps({"time": round(time.time() if now is None else now, 1),
                       "exercise": exercise, "ok": bool(ok), "said": said[:SAID_CHARACTERS]})
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # One write of one line in append mode: lines from two kernels do not interleave.  A
        # kernel killed mid-write leaves a line with no end: the next line starts on its own.
        with open(path, "a+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(size - 1)
            ended = size == 0 or f.read(1) == b"\n"
            f.write((line if ended else "\n" + line).encode("utf-8") + b"\n")
    except OSError:
        pass


def read(path: str) -> List[Attempt]:
    """The attempts in one progress file, oldest first; a line a killed kernel left half
    written (or anything else that is not an attempt) is skipped.

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "p.jsonl")
    >>> with open(path, "w") as f:
    ...     _ = f.write('{"time": 1, "exercise": "02.loop-on-device", "ok": true}\\n{"time": 2, "exer')
    >>> read(path)
    [Attempt(time=1.0, exercise='02.loop-on-device', ok=True, said='')]
    >>> read(path + ".missing")
    []
    """
    attempts = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError:
        return []
    for line in lines:
        try:
            entry = json.loads(line)
            attempts.append(Attempt(float(entry["time"]), str(entry["exercise"]),
                                    bool(entry["ok"]), str(entry.get("said", ""))))
        except (ValueError, KeyError, TypeError):
            continue
    return attempts


@dataclass(frozen=True)
class LearnerProgress:
    """What the instructor's view shows for one learner."""

    learner: str
    right: Sequence[str]          # exercises passed at least once, in course order
    current: str                  # the exercise of their latest attempt ("" before any)
    misses_in_a_row: int          # "Not yet" at ``current`` since their last "Right" there
    last_said: str                # the feedback of their latest attempt
    idle_s: Optional[float]       # seconds since their latest attempt (None before any)

    @property
    def status(self) -> str:
        """``stuck``, ``quiet``, ``working`` or ``not started``."""
        if self.idle_s is None:
            return "not started"
        if self.misses_in_a_row >= STUCK_AFTER:
            return "stuck"
        if self.idle_s >= QUIET_AFTER_S:
            return "quiet"
        return "working"


def summarise(learner: str, attempts: Iterable[Attempt], now: float,
              course: Sequence[str] = ()) -> LearnerProgress:
    """One learner's progress from their attempts.

    >>> tries = [Attempt(10, "05.replicate", False), Attempt(20, "05.replicate", True),
    ...          Attempt(30, "06.accumulate", False), Attempt(40, "06.accumulate", False),
    ...          Attempt(50, "06.accumulate", False)]
    >>> p = summarise("ada", tries, now=110)
    >>> p.right, p.current, p.misses_in_a_row, p.idle_s, p.status
    (['05.replicate'], '06.accumulate', 3, 60.0, 'stuck')
    >>> summarise("bob", [], now=0).status
    'not started'
    """
    attempts = sorted(attempts, key=lambda a: a.time)
    passed = {a.exercise for a in attempts if a.ok}
    order = {name: i for i, name in enumerate(course)}
    right = sorted(passed, key=lambda name: (order.get(name, len(order)), name))
    if not attempts:
        return LearnerProgress(learner, right, "", 0, "", None)
    latest = attempts[-1]
    misses = 0
    for attempt in reversed(attempts):
        if attempt.exercise != latest.exercise:
            continue
        if attempt.ok:
            break
        misses += 1
    return LearnerProgress(learner, right, latest.exercise, misses, latest.said,
                           round(max(0.0, float(now) - latest.time), 1))


def class_progress(homes: str, now: Optional[float] = None,
                   course: Sequence[str] = ()) -> List[LearnerProgress]:
    """Every learner under ``homes`` (one folder each, as ``make hub`` keeps them), stuck
    learners first, then the quietest."""
    now = time.time() if now is None else now
    rows = []
    for learner in sorted(os.listdir(homes)) if os.path.isdir(homes) else []:
        if os.path.isdir(os.path.join(homes, learner)):
            rows.append(summarise(learner, read(progress_file(os.path.join(homes, learner))),
                                  now, course))
    rank = {"stuck": 0, "quiet": 1, "working": 2, "not started": 3}
    return sorted(rows, key=lambda p: (rank[p.status], -(p.idle_s or 0), p.learner))


def progress_file(home: str) -> str:
    """Where a learner whose home is ``home`` keeps their progress (the hub's setting)."""
    return os.path.join(home, ".ipu-lab", "progress.jsonl")


__all__ = ["PROGRESS_VARIABLE", "STUCK_AFTER", "QUIET_AFTER_S", "Attempt", "record", "read",
           "LearnerProgress", "summarise", "class_progress", "progress_file"]

