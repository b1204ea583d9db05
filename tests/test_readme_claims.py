"""The README's and docs' tables of measured results are the committed benchmarks/results tables,
verbatim; every guide is linked from the README and the docs index."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).parent.parent


def _table(text: str) -> str:
    start = text.index("| claim | article |")
    return text[start : text.index("\n\n", start)]


def test_readme_claims_table_matches_the_committed_results():
    committed = _table((ROOT / "benchmarks" / "results" / "claims" / "claims.md").read_text())
    assert committed.count("\n") >= 10  # header, rule and the nine claims
    assert _table((ROOT / "README.md").read_text()) == committed


def test_docs_scale_table_matches_the_committed_results():
    def table(text: str) -> str:
        start = text.index("| mode | env-steps/s (all replicas) |")
        return text[start : text.index("\n\n", start)]

    committed = table((ROOT / "benchmarks" / "results" / "scale" / "scale.md").read_text())
    assert committed.count("\n") >= 9  # header, rule and the eight modes
    assert table((ROOT / "docs" / "results.md").read_text()) == committed


def test_every_guide_is_linked_and_every_link_resolves():
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "README.md").read_text()
    guides = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert len(guides) >= 19
    for name in guides:
        assert f"(docs/{name})" in readme and f"({name})" in index, name

    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name}: broken link {target}"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_every_python_example_in_the_docs_parses_and_its_imports_exist():
    """Examples are not run here (they train for minutes), but each must be valid Python whose
    `jaxrl_fast` imports name things that exist, so a renamed API breaks this test."""
    import importlib

    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [(d.name, b) for d in docs for b in _python_blocks(d.read_text())]
    assert len(blocks) >= 8
    for name, block in blocks:
        tree = ast.parse(block, filename=name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxrl_fast"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name) or importlib.util.find_spec(
                        f"{node.module}.{alias.name}"
                    ), f"{name}: {node.module} has no {alias.name}"
