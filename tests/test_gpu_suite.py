"""`benchmarks/gpu_suite.py --tiny` runs every section on CPU and writes a complete report."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest
from conftest import child_env

ROOT = os.path.join(os.path.dirname(__file__), "..")
SECTIONS = ("cartpole", "minatar", "pong", "precision", "per", "l3")
# The seed counts of `--tiny` (a seed sweep on cartpole; one count elsewhere: each compiles).
TINY_SEEDS = {"cartpole": [1, 2], "minatar": [2], "pong": [2]}
# Timing keys that must be positive wherever they appear in a section's result.
POSITIVE = ("env_steps_per_s", "compile_s", "ms_per_update_median", "us_per_iter")


def _importable(name: str) -> bool:
    if importlib.util.find_spec(name) is None:
        return False
    try:
        importlib.import_module(name)
    except Exception:
        return False
    return True


def _numbers(tree, path=""):
    """Every (path, number) leaf of a JSON tree (bools excluded)."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield path, tree


@pytest.mark.slow
def test_gpu_suite_tiny_reports_every_section(tmp_path):
    stem = str(tmp_path / "gpu-tiny")  # --out is the folder; --tiny names the files
    # the session's XLA settings (most optimisations off: the tiny numbers are not results)
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_suite.py", "--tiny", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=child_env(),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with open(stem + ".json") as f:
        r = json.load(f)
    assert r["tiny"] is True
    assert r["backend"] == "cpu" and r["device_kind"] and r["jax"]
    assert list(r["sections"]) == list(SECTIONS)
    for name, rec in r["sections"].items():
        assert rec["wall_s"] > 0, name
        if name == "pong" and not _importable("envpool"):
            assert rec["status"] == "skipped" and "envpool" in rec["reason"]
            continue
        assert rec["status"] == "ok", (name, rec.get("error"))
        for path, x in _numbers(rec["result"]):
            assert math.isfinite(x), f"{name}{path} = {x}"
            if path.rsplit(".", 1)[-1].endswith(POSITIVE):
                assert x > 0, f"{name}{path} = {x}"
    res = {n: rec.get("result") for n, rec in r["sections"].items()}
    for name in ("cartpole", "minatar"):
        assert [row["num_seeds"] for row in res[name]["rows"]] == TINY_SEEDS[name], name
    if res["pong"] is not None:
        for loop in ("fused", "conventional"):
            seeds = [row["num_seeds"] for row in res["pong"]["rows"] if row["loop"] == loop]
            assert seeds == TINY_SEEDS["pong"], loop
    assert [t["batch"] for t in res["precision"]["tables"]] == [8]
    assert [row["compute"] for row in res["precision"]["tables"][0]["rows"]] == [
        "fp32",
        "bf16",
        "fp16",
    ]
    methods = res["per"]["cells"][0]["methods"]
    assert {"ours_sum_tree", "ours_cumsum"} <= set(methods)
    if _importable("flashbax"):  # the `bench` extra
        assert {"flashbax_per", "flashbax_uniform"} <= set(methods)
        assert res["per"]["flashbax_device"] == "cpu" and res["per"]["flashbax_missing"] is None
    else:
        assert not any(k.startswith("flashbax") for k in methods), methods
        assert "flashbax" in res["per"]["flashbax_missing"]
    assert {row["variant"] for row in res["l3"]["rows"]} >= {"L3 off", "L3 host, 4 MB blocks"}
    assert any(row["replay_counters"].get("l3_read_calls") for row in res["l3"]["rows"])
    with open(stem + ".md") as f:
        md = f.read()
    for name in SECTIONS:
        assert f"## {name} (" in md, name
