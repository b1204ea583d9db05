"""The README's tables of measured results are the committed benchmarks/results tables, verbatim."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).parent.parent


def _table(text: str) -> str:
    start = text.index("| claim | article |")
    return text[start : text.index("\n\n", start)]


def test_readme_claims_table_matches_the_committed_results():
    committed = _table((ROOT / "benchmarks" / "results" / "claims.md").read_text())
    assert committed.count("\n") >= 10  # header, rule and the nine claims
    assert _table((ROOT / "README.md").read_text()) == committed


def test_readme_scale_table_matches_the_committed_results():
    def table(text: str) -> str:
        start = text.index("| mode | env-steps/s (all replicas) |")
        return text[start : text.index("\n\n", start)]

    committed = table((ROOT / "benchmarks" / "results" / "scale.md").read_text())
    assert committed.count("\n") >= 9  # header, rule and the eight modes
    assert table((ROOT / "README.md").read_text()) == committed
