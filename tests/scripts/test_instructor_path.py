"""notebooks/README.md, the instructor's path, stays true to the notebooks: it places every
notebook in the learning order exactly once, and every error it quotes in "Mistakes learners
make" is one a stored notebook really shows."""
import json
import re
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
