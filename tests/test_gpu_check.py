"""`benchmarks/gpu_check.py --tiny` runs its sections (Pong's aside) on the CPU, each in its own
process under its own time limit, and writes a complete report; a section past its limit is
stopped and the check goes on."""

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
SECTIONS = ("envpool", "cartpole", "precision", "pong", "per", "l3")
RUN = tuple(s for s in SECTIONS if s != "pong")
# Timing keys that must be positive wherever they appear in a section's result.
POSITIVE = ("env_steps_per_s", "compile_s", "ms_per_update_median", "us_per_iter")


def _check(tmp_path, *args, timeout=600):
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--tiny", "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=child_env(),  # the CPU, and the session's XLA settings: tiny numbers, not results
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with open(tmp_path / "gpu-check-tiny.json") as f:
        return proc.stdout, json.load(f)


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


def _has(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@pytest.mark.slow
@pytest.mark.gpu_check  # outside the default run (the suite's 10 minutes): `--run-gpu-check`
def test_gpu_check_tiny_reports_every_section_within_its_budget(tmp_path):
    # Pong's section is left out here (the suite's time): its fused row is the cartpole
    # section's code on the atari-pong preset, which tests/envs and docs/atari.md run
    out, r = _check(tmp_path, "--sections", ",".join(RUN))
    # the plan comes first: each section's limit, adding up to the 360 s budget
    assert out.index("total") < out.index("[1/5] envpool")
    assert r["tiny"] is True and r["backend"] == "cpu" and r["budget_s"] == 360
    assert list(r["limits_s"]) == list(RUN)
    assert sum(r["limits_s"].values()) == pytest.approx(360)
    assert list(r["sections"]) == list(RUN)
    for name, rec in r["sections"].items():
        assert 0 < rec["wall_s"] <= rec["limit_s"], name
        if name == "envpool" and not _has("envpool"):
            assert rec["status"] == "skipped" and "envpool" in rec["reason"]
            continue
        assert rec["status"] == "ok", (name, rec.get("error"))
        for path, x in _numbers(rec["result"]):
            assert math.isfinite(x), f"{name}{path} = {x}"
            if path.rsplit(".", 1)[-1].endswith(POSITIVE):
                assert x > 0, f"{name}{path} = {x}"
    res = {n: rec.get("result") for n, rec in r["sections"].items()}
    rows = [(row["variant"], row["num_seeds"]) for row in res["cartpole"]["rows"]]
    assert rows == [("auto", 2)]  # tiny: one seed count, no comparison
    (table,) = res["precision"]["tables"]
    assert [row["compute"] for row in table["rows"]] == [
        "fp32 (highest)",
        "TF32 (fp32, default)",
        "bf16",
        "fp16",
    ]
    if res["envpool"] is not None:
        assert res["envpool"]["counts"].get("passed", 0) >= 2
        assert res["envpool"]["counts"].get("failed", 0) == 0
    (cell,) = res["per"]["cells"]
    assert "ours_sum_tree" in cell["methods"]
    if not _has("flashbax"):
        assert "flashbax" in cell["skipped"] and cell["flashbax_per_over_ours_sum_tree"] is None
    md = (tmp_path / "gpu-check-tiny.md").read_text()
    for name in RUN:
        assert f"## {name} (" in md


def test_a_section_past_its_limit_is_stopped_and_the_check_goes_on(tmp_path):
    out, r = _check(tmp_path, "--sections", "cartpole,per", "--budget", "2", timeout=120)
    assert [rec["status"] for rec in r["sections"].values()] == ["timeout", "timeout"]
    for rec in r["sections"].values():
        assert rec["wall_s"] < rec["limit_s"] + 10 and "stopped at its limit" in rec["error"]
    assert sum(r["limits_s"].values()) == pytest.approx(2)
    assert "per: timeout" in out
