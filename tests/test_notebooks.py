"""Every notebook runs top to bottom on tiny settings (SMOKE=1), without Jupyter."""

from __future__ import annotations

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("SMOKE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{path.name}: commit notebooks without outputs"
    namespace: dict = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)
    result = namespace["result"]
    assert result.final_return.shape == (namespace["config"].num_seeds,)
    assert len(namespace["steps"]) == len(result.history) > 0


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ holds no notebook"
