"""Every notebook runs top to bottom on tiny settings (SMOKE=1), without Jupyter."""

from __future__ import annotations

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch, capsys):
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
    if path.name == "minatar_resume.ipynb":
        _check_resumed_run(namespace, capsys)


def _check_resumed_run(ns, capsys):
    """The notebook stopped its run half way, resumed it, plotted it and exported scores."""
    import os

    config, run_dir, result = ns["config"], ns["RUN_DIR"], ns["result"]
    out = capsys.readouterr()
    assert "runtime ended; on disk:" in out.out
    assert "resumed from the checkpoint after 1 of 4 chunks (640 env steps per seed)" in out.err
    assert [h["chunk"] for h in result.history] == list(range(config.chunks))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert [r["chunk"] for r in rows] == [c for c in range(config.chunks) for _ in range(2)]
    assert os.path.getsize(os.path.join(run_dir, "curves.png")) > 10_000
    assert ns["scores"]["curve"].shape == (2, 1, 3)  # evaluated at 640, 1280 and 1600 env steps
    assert len(ns["summary"]["seeds"][0]["params_sha256"]) == 64


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ holds no notebook"
