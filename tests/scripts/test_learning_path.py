"""Every notebook is a stop on one path a learner can follow (issue 24): the files are numbered
in the learning order of notebooks/README.md; each opens with what it teaches, the time to
allow, what to have done before, the Graphcore tutorial it follows, the docs page behind it and
the glossary; each closes with a recap and a link to the next notebook (a TensorFlow notebook
also asks the learner to shut its kernel down first); every link goes somewhere that exists."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
GUIDE = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
GLOSSARY = ROOT / "docs" / "glossary.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
FRAME_LABELS = ("**What you will learn**", "**Time to allow**", "**Before this**",
                "**Follows**", "**Background**", "**Words**")


def cells(notebook: Path):
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


def text_of(cell) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def markdown(notebook: Path):
    return [text_of(c) for c in cells(notebook) if c["cell_type"] == "markdown"]


def uses_tensorflow(notebook: Path) -> bool:
    return any("import tensorflow" in text_of(c) for c in cells(notebook)
               if c["cell_type"] == "code")


def learning_order():
    section = GUIDE.split("## The learning order", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| (\d+) \| `(\w+)` \|", section, re.M)


def test_files_are_numbered_in_the_learning_order():
    order = learning_order()
    assert [name for _, name in order] == [n.stem for n in NOTEBOOKS]
    assert [int(name[:2]) for _, name in order] == list(range(len(NOTEBOOKS)))
    for notebook in NOTEBOOKS:
        title = text_of(cells(notebook)[0]).splitlines()[0]
        assert title.startswith(f"# {int(notebook.name[:2])} · "), (notebook.name, title)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_each_notebook_opens_with_its_frame(notebook):
    opening = "\n".join(markdown(notebook)[:3])
    missing = [label for label in FRAME_LABELS if label not in opening]
    assert not missing, f"{notebook.name} opens without {missing}"
    assert "../docs/glossary.md" in opening
    background = re.search(r"\*\*Background\*\*.*?\]\((\.\./docs/[\w-]+\.md)", opening, re.S)
    assert background, f"{notebook.name}: Background links no docs/ page"
    minutes = re.search(r"\*\*Time to allow\*\*:? about (\d+) min", opening)
    assert minutes, f"{notebook.name}: 'Time to allow: about N min'"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_each_notebook_closes_with_a_recap_and_the_next_stop(notebook):
    texts = markdown(notebook)
    recap = [i for i, t in enumerate(texts) if t.lstrip().startswith("## Recap")]
    nexts = [i for i, t in enumerate(texts) if t.lstrip().startswith("## What's next")]
    assert recap and nexts and recap[-1] < nexts[-1], f"{notebook.name}: Recap, then What's next"
    closing = texts[nexts[-1]]
    position = NOTEBOOKS.index(notebook)
    if position + 1 < len(NOTEBOOKS):
        following = NOTEBOOKS[position + 1].name
        assert f"]({following})" in closing, f"{notebook.name} should send learners to {following}"
    if uses_tensorflow(notebook):
        assert "Shut Down Kernel" in closing, (
            f"{notebook.name}: a TensorFlow notebook asks for its kernel to be shut down")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.name for n in NOTEBOOKS])
def test_every_relative_link_in_a_notebook_resolves(notebook):
    for text in markdown(notebook):
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            path = target.split("#", 1)[0]
            assert (notebook.parent / path).exists(), f"{notebook.name} links {target}"


def test_the_glossary_defines_the_words_the_traces_use():
    glossary = GLOSSARY.read_text(encoding="utf-8")
    terms = {m.lower() for m in re.findall(r"^\*\*(.+?)\*\*", glossary, re.M)}
    for word in ("tile", "compute", "sync", "exchange", "stream copy", "engine run",
                 "infeed", "outfeed", "replica", "micro-batch", "mini-batch",
                 "gradient accumulation", "shard", "stage", "bubble", "simulated clock"):
        assert any(word in term for term in terms), f"the glossary lacks {word!r}"
