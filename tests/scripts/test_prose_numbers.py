"""Each measured figure the lessons' prose quotes agrees with an output beside it.

A figure is a number with a unit of measure in a markdown cell's prose (not its code blocks): a
ratio ("16x", "7 times"), a percentage, a time ("36 µs", "1.4 ms"), an amount of memory
("800 kB"), cycles, or a count of launches ("77 `sess.run` calls", "20 engine runs") or of
weight updates.  It must be one of:
- printed by a code cell of the same notebook, in the same kind of unit: the same value to
  the digits quoted ("400 µs" to the hundreds, "1.4 ms" to a tenth);
- asserted in a lesson-check cell (a collapsed cell that fails the notebook's test run when
  the computed value moves), or written in the code cell just above or below it (the example's
  own inputs, which the prose describes);
- a fact that comes from elsewhere, listed in ``FROM_ELSEWHERE`` with where it comes from.

Prose written from computed values (``display(Markdown(...))`` cells) is an output, so it
agrees by construction.  Only the stored notebooks are read (what a learner first sees); the
notebooks' refresh writes those outputs from a run.
"""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
LESSON_CHECK = "lesson-check"

# Unit -> (kind, factor to the kind's base unit).
UNITS = {
    "x": ("ratio", 1), "×": ("ratio", 1), "times": ("ratio", 1), "%": ("percent", 1),
    "ns": ("time", 1e-9), "µs": ("time", 1e-6), "us": ("time", 1e-6), "ms": ("time", 1e-3),
    "s": ("time", 1),
    "bytes": ("memory", 1), "kB": ("memory", 1e3), "KB": ("memory", 1e3),
    "KiB": ("memory", 2 ** 10), "MB": ("memory", 1e6), "MiB": ("memory", 2 ** 20),
    "GB": ("memory", 1e9), "GiB": ("memory", 2 ** 30), "cycles": ("cycles", 1),
    "engine runs": ("launches", 1), "launches": ("launches", 1), "sess.run calls": ("launches", 1),
    "`sess.run` calls": ("launches", 1), "weight updates": ("updates", 1),
}
# A ratio's "x" is written against its number ("16x"); "2 x 16" is a product.
FIGURE = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:(x|×)|[ \u00a0]?"
                    r"(%|ns|µs|us|ms|s|kB|KB|KiB|MB|MiB|GB|GiB|bytes|times|cycles|engine runs|launches|sess\.run calls|`sess\.run` calls|weight updates))(?![\w])")
FENCED_CODE = re.compile(r"^```.*?^```", re.M | re.S)
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")

# Figures the prose takes from elsewhere than this notebook's outputs: (notebook, figure as
# written) -> where it comes from; or (where, an expression this test evaluates in the figure's
# own unit, which must agree with it to the digits quoted).
FROM_ELSEWHERE = {
    ("00", "624 KiB"): "the IPU's hardware (Graphcore's IPU Programmer's Guide)",
    ("00", "897 MiB"): ("the IPU's hardware: 1,472 tiles of 624 KiB", "1472 * 624 / 1024"),
    ("00", "0.94 GB"): ("the IPU's hardware: 897 MiB in GB", "1472 * 624 * 1024 / 1e9"),
    ("00", "600 cycles"): ("the exercise's input", "primer.TILE_CYCLES[3]"),
    ("00", "1,500 cycles"): ("the exercise's solution", "max(primer.TILE_CYCLES)"),
    ("01", "23.8 s"): "Graphcore's published measurement (its tutorial 3)",
    ("01", "14.6 s"): "Graphcore's published measurement (its tutorial 3)",
    ("02", "23.8 s"): "Graphcore's published measurement (its tutorial 3)",
    ("02", "14.6 s"): "Graphcore's published measurement (its tutorial 3)",
    ("03", "1.63x"): ("Graphcore's published measurement (its tutorial 3)", "23.8 / 14.6"),
    ("01", "9,000 launches"): ("Graphcore's tutorial 3: 10,000 steps, 10 per run",
                               "10000 - 10000 / 10"),
    ("02", "9,000 launches"): ("Graphcore's tutorial 3: 10,000 steps, 10 per run",
                               "10000 - 10000 / 10"),
    ("01", "0.5 GB"): "the kernel memory notebooks/README.md plans per learner",
    ("02", "0.5 GB"): "the kernel memory notebooks/README.md plans per learner",
    ("09", "0.5 GB"): "the kernel memory notebooks/README.md plans per learner",
    ("12", "0.5 GB"): "the kernel memory notebooks/README.md plans per learner",
    ("03", "1.6x"): "a host-time measurement on our machine, said so in the prose",
    ("03", "2.4x"): "a host-time measurement on our machine, said so in the prose",
    ("03", "1.08x"): "a host-time measurement on our machine, said so in the prose",
    ("04", "49.9 %"): ("the exercise's solution", "100 * feeds.ideal_launch_share(29)"),
    ("08", "15.8 %"): ("the solution's arithmetic, 3 / (M + 3)", "100 * 3 / 19"),
    ("08", "11.1 %"): ("the solution's arithmetic, 3 / (M + 3)", "100 * 3 / 27"),
    ("08", "8.6 %"): ("the solution's arithmetic, 3 / (M + 3)", "100 * 3 / 35"),
    ("10", "11.1 %"): ("the solution's arithmetic, 3 / (8v + 3)", "100 * 3 / 27"),
    ("08", "60 %"): "Graphcore's trace of this split (its pipelining tutorial)",
    ("09", "100 kB"): ("a micro-batch of 32 MNIST images in float32", "32 * 28 * 28 * 4 / 1e3"),
    ("09", "5.9 %"): ("the prose's arithmetic, 1/17", "100 / 17"),
    ("12", "24 GB"): "the IPU-Links' bandwidth (Graphcore's IPU-M2000 datasheet), in GB/s",
    ("12", "5 %"): "the tolerance of the lesson check that compares the two",
    ("12", "900 MiB"): ("the IPU's hardware, rounded", "1472 * 624 / 1024"),
}


def evaluated(expression: str) -> float:
    from ipu_emulator.exercises import nb00_primer, nb04_feeds
    return float(eval(expression, {"primer": nb00_primer, "feeds": nb04_feeds}))  # noqa: S307


def text_of(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def output_text(cell) -> str:
    texts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            texts.append(text_of(output["text"]))
        for kind, value in output.get("data", {}).items():
            if kind.startswith("text/"):
                texts.append(text_of(value))
    return "\n".join(texts)


def value_of(whole: str, fraction) -> float:
    return float(whole.replace(",", "") + (fraction or ""))


def figures(text: str):
    """(as written, the number, its kind of unit, the unit's size in the kind's base unit,
    half the last digit quoted)."""
    for found in FIGURE.finditer(text):
        whole, fraction, ratio, unit = found.groups()
        unit = ratio or unit
        kind, factor = UNITS[unit]
        digits = len((fraction or "")[1:])
        if not fraction:   # "400": quoted to the hundreds; "36": to the units
            digits = -(len(whole.replace(",", "")) - len(whole.replace(",", "").rstrip("0")))
        yield (found.group(0).replace("\u00a0", " "), value_of(whole, fraction), kind, factor,
               0.5 * 10 ** -digits)


def agrees(value, rounding, printed) -> bool:
    return abs(printed - value) <= rounding * (1 + 1e-9)


def unbacked_figures(notebook: Path):
    """(cell index, figure) of each figure of the prose that nothing backs."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    printed = [(kind, number * factor) for cell in cells if cell["cell_type"] == "code"
               for _, number, kind, factor, _ in figures(output_text(cell))]
    checked = {value_of(*number.groups()) for cell in cells
               if LESSON_CHECK in cell.get("metadata", {}).get("tags", [])
               for number in NUMBER.finditer(text_of(cell["source"]))}
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        beside = {value_of(*number.groups())
                  for near in cells[max(0, index - 1):index + 2] if near["cell_type"] == "code"
                  for number in NUMBER.finditer(text_of(near["source"]))}
        prose = FENCED_CODE.sub("", text_of(cell["source"]))   # a solution's code is code
        for written, number, kind, factor, rounding in figures(prose):
            if any(kind == printed_kind and agrees(number * factor, rounding * factor,
                                                   printed_value)
                   for printed_kind, printed_value in printed):
                continue
            if number in checked or number in beside:
                continue
            elsewhere = FROM_ELSEWHERE.get((notebook.name[:2], written))
            if isinstance(elsewhere, str) or (elsewhere is not None and agrees(
                    number, rounding, evaluated(elsewhere[1]))):
                continue
            yield index, written


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_each_figure_the_prose_quotes_is_backed(notebook):
    found = [f"cell {index}: {figure!r}" for index, figure in unbacked_figures(notebook)]
    assert not found, (f"{notebook.name}: figures in the prose that no output, lesson check "
                       f"or neighbouring code backs:\n" + "\n".join(found))


def test_a_figure_the_outputs_do_not_back_is_found(tmp_path):
    notebook = tmp_path / "99_example.ipynb"
    notebook.write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": "print(speedup)", "metadata": {},
         "outputs": [{"output_type": "stream", "name": "stdout",
                      "text": "speed-up: 16.0x, one step 36.2 µs, 77 sess.run calls\n"}]},
        {"cell_type": "markdown", "metadata": {},
         "source": "The loop is 16x faster, about 17 times shorter per epoch, and a step "
                   "takes about 36 µs, not 36 ms, of 36.3 µs; the loop saves 124 `sess.run` "
                   "calls, or 77 sess.run calls."}]}))
    assert list(unbacked_figures(notebook)) == [(1, "17 times"), (1, "36 ms"),
                                                (1, "36.3 µs"), (1, "124 `sess.run` calls")]


def test_a_worked_figure_that_no_longer_agrees_is_found(tmp_path, monkeypatch):
    notebook = tmp_path / "08_example.ipynb"
    notebook.write_text(json.dumps({"cells": [{"cell_type": "markdown", "metadata": {},
                                               "source": "16 gives 15.8 %."}]}))
    assert list(unbacked_figures(notebook)) == []
    monkeypatch.setitem(FROM_ELSEWHERE, ("08", "15.8 %"), ("arithmetic", "100 * 3 / 18"))
    assert list(unbacked_figures(notebook)) == [(0, "15.8 %")]


def test_the_figures_from_elsewhere_are_still_quoted():
    prose = {notebook.name[:2]: "\n".join(
        text_of(cell["source"]) for cell in json.loads(notebook.read_text("utf-8"))["cells"]
        if cell["cell_type"] == "markdown") for notebook in NOTEBOOKS}
    assert [key for key in FROM_ELSEWHERE if key[1] not in prose.get(key[0], "")] == []
