"""docs/other-tutorials.md lists the features of Graphcore's other TensorFlow tutorials with the
test that shows each: every test it names exists (a module, or a test function in it), and every
file it cites is in the repository, so the page cannot silently outlive a renamed test."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "other-tutorials.md").read_text(encoding="utf-8")


def cited_tests():
    """(module path, test name or None) for each test the page's tables cite.  A ``::name``
    after a bare ``::`` reference repeats the last module named in its cell."""
    cited = []
    for row in re.findall(r"^\|.*\|\s*$", PAGE, re.M):
        cell = row.rstrip(" |").rsplit("|", 1)[-1]
        module = None
        for path, name in re.findall(r"`([\w/]*test_\w+\.py)?(?:::(\w+))?`", cell):
            if path:
                module = path if "/" in path else next(
                    str(p.relative_to(ROOT)) for p in ROOT.glob(f"tests/**/{path}"))
            if module:
                cited.append((module, name or None))
    return cited


def test_every_test_the_page_cites_exists():
    cited = cited_tests()
    assert len(cited) >= 30, cited
    for module, name in cited:
        source = ROOT / module
        assert source.is_file(), module
        if name:
            functions = {node.name for node in ast.walk(ast.parse(source.read_text()))
                         if isinstance(node, ast.FunctionDef)}
            assert name in functions, f"{module}::{name}"


def test_every_file_the_page_cites_exists():
    paths = set(re.findall(r"`((?:bench|tests|docs)/[\w/.-]+?)(?:::\w+)?`", PAGE))
    paths |= {link for link in re.findall(r"\]\(\.\./([\w/.-]+)\)", PAGE)}
    paths |= {"docs/" + link.split("#")[0]
              for link in re.findall(r"\]\(([\w-]+\.md(?:#[\w-]*)?)\)", PAGE)}
    assert paths
    for path in paths:
        assert (ROOT / path).exists(), path
