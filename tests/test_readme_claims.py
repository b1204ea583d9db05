"""The README's and docs' tables of measured results are the committed benchmarks/results tables,
verbatim; every guide is linked from the README and the docs index."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess

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


def test_the_data_parallel_example_quotes_its_committed_runs():
    md = (ROOT / "benchmarks/results/data_parallel_example/data_parallel_example.md").read_text()
    summary = next(line for line in md.splitlines() if line.startswith("**"))
    table = md[md.index("| seed |") : md.index("\n\n", md.index("| seed |"))]
    assert "runs solved CartPole" in summary and table.count("\n") >= 6  # 5 runs at least
    assert summary in (ROOT / "README.md").read_text()
    results = (ROOT / "docs" / "results.md").read_text()
    assert summary in results and table in results


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


_ROOTS = ("jaxrl_fast/", "tests/", "benchmarks/", "docs/", "notebooks/", ".ci/", "../shared/")
_PLACEHOLDER = re.compile(r"[\[\]{}<>*]|(^|/)[A-Z_]{3,}(/|$|\.)")


def _cited_paths(text: str) -> list[str]:
    """The repository paths a Markdown text cites in backticks: starting with a top-level
    folder, or a guide's or notebook's file name (`presets.md`, `quickstart.ipynb`); a run's
    files (`config.json`) and placeholders (`results/NAME.md`, `x[-quick].json`, `{json,md}`)
    are not repository paths."""
    out = []
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.split("::")[0].rstrip(".,:;")
        if _PLACEHOLDER.search(token) or token.startswith(("http", "-", "$")):
            continue
        if token.startswith(_ROOTS) or re.fullmatch(r"[\w.-]+\.(md|ipynb)", token):
            out.append(token)
    return out


def _in_a_clean_clone(path: pathlib.Path) -> bool:
    """Whether `path` exists and git does not ignore it: a file a script wrote into an
    ignored folder here (the GPU kit's wheels) is absent from the clean clone CI tests."""
    if not path.exists():
        return False
    try:
        rel = path.resolve().relative_to(ROOT.resolve())
    except ValueError:  # ../shared/: outside the repository
        return True
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(rel)], cwd=ROOT, capture_output=True, timeout=30
    )
    return ignored.returncode != 0  # 0: ignored; 1: not ignored; 128: no git here


def test_every_file_path_the_readme_and_docs_cite_exists():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing, checked = [], 0
    for doc in docs:
        for path in _cited_paths(doc.read_text()):
            checked += 1
            places = [ROOT / path, doc.parent / path, ROOT / "benchmarks" / path]
            if "/" not in path:  # a bare guide or notebook name: in the repository's folders
                folders = ("docs", "notebooks", "benchmarks")
                places += [p for d in folders for p in (ROOT / d).rglob(path)]
            if not any(_in_a_clean_clone(p) for p in places):
                missing.append(f"{doc.name}: {path}")
    assert checked >= 50
    assert not missing, missing
