"""benchmarks/README.md indexes every benchmark script (issue 31): a new script needs a row."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
HELPERS = {"_machine.py", "_gpu_markdown.py", "reference_loop.py"}


def test_every_benchmark_script_has_a_row_in_the_index():
    index = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")} - HELPERS
    missing = sorted(s for s in scripts if f"| `{s}` |" not in index)
    assert not missing, f"benchmarks/README.md has no row for {missing}"
    for helper in HELPERS:
        assert f"`{helper}`" in index
