"""notebooks/README.md, the instructor's path, stays true to the notebooks: it places every
notebook in the learning order exactly once, every error it quotes in "Mistakes learners make"
is one a stored notebook really shows, its times to allow are scripts/reading_time.py's (as is
each notebook's own), and its workshop plans add up."""
import importlib.util
import json
import re
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
GUIDE = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    return GUIDE.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def stored_outputs() -> str:
    texts = []
    for notebook in NOTEBOOKS.glob("*.ipynb"):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                value = output.get("text") or output.get("data", {}).get("text/plain", "")
                texts.append("".join(value) if isinstance(value, list) else value)
                texts.append(" ".join(output.get("traceback", [])))
    return "\n".join(texts)


def test_every_notebook_is_in_the_learning_order_once():
    order = re.findall(r"^\| \d+ \| `(\w+)` \|", section("The learning order"), re.M)
    assert sorted(order) == sorted(n.stem for n in NOTEBOOKS.glob("*.ipynb"))


def test_every_quoted_error_is_one_a_notebook_shows():
    rows = re.findall(r"^\| [^|]+ \| (`+)(.+?)\1 ", section("Mistakes learners make"), re.M)
    outputs = stored_outputs()
    assert len(rows) >= 8
    for _, quoted in rows:
        for piece in quoted.split("..."):
            piece = piece.strip()
            if piece:
                assert piece in outputs, f"no stored notebook shows {piece!r}"


def reading_minutes():
    """Each notebook's "time to allow" by scripts/reading_time.py's model reader."""
    spec = importlib.util.spec_from_file_location(
        "reading_time", NOTEBOOKS.parent / "scripts" / "reading_time.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module       # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return {row.notebook: row.allowed for row in module.every_notebook()}


def test_the_times_to_allow_are_the_model_readers():
    allowed = reading_minutes()
    table = dict(re.findall(r"^\| \d+ \| `(\w+)` \| [^|]+ \| (\d+) min \|",
                            section("The learning order"), re.M))
    assert {name: int(minutes) for name, minutes in table.items()} == allowed
    total = re.search(r"The whole course takes (\d+) minutes", section("The learning order"))
    assert total and int(total.group(1)) == sum(allowed.values())
    for notebook in NOTEBOOKS.glob("*.ipynb"):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        opening = " ".join("".join(c["source"]) for c in cells[:4] if c["cell_type"] == "markdown")
        stated = re.search(r"\*\*Time to allow\*\*:? about (\d+) min", opening)
        assert stated and int(stated.group(1)) == allowed[notebook.stem], notebook.name


def test_each_workshop_plan_adds_up_and_fits_its_time():
    """A slot that names notebooks lasts as long as their times to allow; a session of the
    two-hour plan ends by 120 minutes, every other session by 240."""
    allowed = {name[:2]: minutes for name, minutes in reading_minutes().items()}
    plans = section("Workshop plans").split("\n\n**")
    tables = 0
    for plan in plans:
        rows = re.findall(r"^\| (\d+)-(\d+) \| (.+?) \|$", plan, re.M)
        if not rows:
            continue
        tables += 1
        limit = 120 if plan.lstrip("*").startswith("Two hours") else 240
        day_end = 0
        for start, end, what in rows:
            start, end = int(start), int(end)
            if start == 0:
                day_end = 0
            assert start == day_end, f"slot {start}-{end} does not follow {day_end}"
            named = re.findall(r"`(\d\d)`", what)
            if named:
                assert end - start == sum(allowed[n] for n in named), (what, end - start)
            day_end = end
            assert end <= limit, f"{what} ends at {end}, after {limit} minutes"
    assert tables >= 3
