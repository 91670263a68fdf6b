"""How long a learner needs for each notebook: a model reader who reads every word, reads the
code they run, looks at every output, runs every cell and does every exercise.

    .venv/bin/python scripts/reading_time.py            # a table of every notebook
    .venv/bin/python scripts/reading_time.py --json     # the same as JSON
    .venv/bin/python scripts/reading_time.py --write    # set each notebook's "Time to allow"

No person was timed.  The reader's pace is stated here, so an instructor can scale it:

* prose (markdown, comments in code, and the markdown a code cell renders from its run's
  values): 150 words a minute, a careful pace for technical text (light reading runs at
  200-250);
* code (what a learner sees of it: cells whose source is hidden are not read): 10 lines a
  minute;
* outputs: 20 lines of printed text a minute, and 30 seconds for each figure;
* running: the seconds each cell took when the stored outputs were made (the timestamps
  Jupyter keeps in each cell's metadata), on this project's two-core machine;
* a code exercise: 3 minutes to read its tasks and plan, 30 seconds for each line that differs
  between the starting code and the solution, and 2 minutes for one wrong attempt (run, read the
  hint, fix); a numeric exercise (a "your turn" cell calling `exercises.check_...`): 2 minutes.

The notebooks' "Time to allow" and notebooks/README.md's plans are this total rounded to five
minutes; tests/scripts/test_instructor_path.py keeps them so (after changing a notebook, run
``--write``, then fix any plan in notebooks/README.md whose sums the test says moved).
"""
from __future__ import annotations

import difflib
import json
import re
import sys
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROSE_WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 10
OUTPUT_LINES_PER_MINUTE = 20
MINUTES_PER_FIGURE = 0.5
CODE_EXERCISE_PLANNING_MINUTES = 3.0
MINUTES_PER_CHANGED_LINE = 0.5
WRONG_ATTEMPT_MINUTES = 2.0
NUMERIC_EXERCISE_MINUTES = 2.0
FIGURE_TYPES = ("image/png", "image/svg+xml")
NUMERIC_CHECK = re.compile(r"\bexercises\.check_\w+\(")  # code_exercises.check_ does not match
FENCED = re.compile(r"```(?:python)?\n(.*?)```", re.S)


@dataclass
class Minutes:
    notebook: str
    prose: float
    code: float
    outputs: float
    running: float
    exercises: float

    @property
    def total(self) -> float:
        return self.prose + self.code + self.outputs + self.running + self.exercises

    @property
    def allowed(self) -> int:
        """The total rounded to five minutes, as the notebooks and the plans state it."""
        return max(5, 5 * round(self.total / 5))


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9][\w'.,%-]*", text))


def _hidden(cell) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def _seconds_running(cell) -> float:
    stamps = cell.get("metadata", {}).get("execution", {})
    start, end = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = lambda stamp: datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return max(0.0, (parse(end) - parse(start)).total_seconds())


def _changed_lines(starting: str, solution: str) -> int:
    diff = difflib.ndiff(starting.strip().splitlines(), solution.strip().splitlines())
    return sum(1 for line in diff if line[:1] in "+-" and line[2:].strip())


def _rendered_prose(cell) -> str:
    """Prose a code cell renders (``display(Markdown(...))``: written from the run's values),
    read as the notebook's other prose is."""
    return " ".join(_text(output.get("data", {}).get("text/markdown"))
                    for output in cell.get("outputs", []))


def _output_cost(cell) -> float:
    lines, figures = 0, 0
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if any(kind in data for kind in FIGURE_TYPES) or "application/vnd.jupyter.widget-view+json" in data:
            figures += 1
        elif "text/markdown" in data:
            continue   # prose: counted by _rendered_prose
        else:
            lines += len((_text(output.get("text")) or _text(data.get("text/plain"))).splitlines())
    return lines / OUTPUT_LINES_PER_MINUTE + figures * MINUTES_PER_FIGURE


def minutes_for(path: Path) -> Minutes:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    prose_words = code_lines = 0
    outputs = running = exercises = 0.0
    for index, cell in enumerate(cells):
        source = _text(cell["source"])
        if cell["cell_type"] == "markdown":
            # A solution inside <details> is read by those who open it: counted with the exercise.
            if "<details>" not in source:
                prose_words += _words(source)
            continue
        running += _seconds_running(cell) / 60
        outputs += _output_cost(cell)
        prose_words += _words(_rendered_prose(cell))
        if "code-exercise" in cell.get("metadata", {}).get("tags", []):
            solution_cell = cells[index + 2] if index + 2 < len(cells) else {"source": ""}
            solutions = FENCED.findall(_text(solution_cell["source"]))
            changed = _changed_lines(source, max(solutions, key=len) if solutions else source)
            exercises += (CODE_EXERCISE_PLANNING_MINUTES + changed * MINUTES_PER_CHANGED_LINE
                          + WRONG_ATTEMPT_MINUTES)
        elif NUMERIC_CHECK.search(source):
            exercises += NUMERIC_EXERCISE_MINUTES
        if _hidden(cell):
            continue
        for line in source.splitlines():
            stripped = line.strip()
            if stripped.startswith("#"):
                prose_words += _words(stripped)
            elif stripped:
                code_lines += 1
    return Minutes(path.stem, prose_words / PROSE_WORDS_PER_MINUTE,
                   code_lines / CODE_LINES_PER_MINUTE, outputs, running, exercises)


def every_notebook():
    return [minutes_for(path) for path in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))]


TIME_TO_ALLOW = re.compile(r"(\*\*Time to allow\*\*:? about )(\d+)( min)")


def write_times_to_allow(rows) -> None:
    """Set the "Time to allow" each notebook states to the model reader's figure."""
    for row in rows:
        path = ROOT / "notebooks" / f"{row.notebook}.ipynb"
        text = path.read_text(encoding="utf-8")
        new = TIME_TO_ALLOW.sub(lambda m: f"{m.group(1)}{row.allowed}{m.group(3)}", text, count=1)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"{row.notebook}: about {row.allowed} min")


def main(argv) -> None:
    rows = every_notebook()
    if "--write" in argv:
        write_times_to_allow(rows)
        return
    if "--json" in argv:
        print(json.dumps([dict(asdict(r), total=r.total, allowed=r.allowed) for r in rows],
                         indent=1))
        return
    print(f"{'notebook':<40}{'prose':>7}{'code':>7}{'output':>8}{'run':>6}{'exerc.':>8}"
          f"{'total':>7}{'allow':>7}")
    for r in rows:
        print(f"{r.notebook:<40}{r.prose:7.1f}{r.code:7.1f}{r.outputs:8.1f}{r.running:6.1f}"
              f"{r.exercises:8.1f}{r.total:7.1f}{r.allowed:7d}")
    print(f"{'all':<40}{sum(r.total for r in rows):53.1f}{sum(r.allowed for r in rows):7d}")


if __name__ == "__main__":
    main(sys.argv[1:])
