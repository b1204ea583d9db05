"""`benchmarks/claims.py` on tiny settings: every article claim gets a row with a verdict, and
the JSON and Markdown are written (in-process runs of a probe env, so it takes seconds)."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

import claims  # noqa: E402

# probe-chain, 4 envs, 100 blocks in 4 chunks: compiles and runs in a few seconds per loop
TINY_SETS = (
    ("env.name", "probe-chain"),
    ("env.num_envs", 4),
    ("network.hidden_sizes", (32,)),
    ("replay.capacity", 400),
    ("replay.batch_size", 16),
    ("replay.n_step", 1),
    ("dqn.target_period", 80),
    ("dqn.gamma", 0.9),
    ("learning_starts", 80),
    ("train_frequency", 8),
    ("num_chunks", 4),
    ("eval_episodes", 2),
)
TINY = claims.Settings(
    name="tiny",
    preset="cartpole",
    overrides=TINY_SETS,
    env_steps=880,
    seeds=2,
    threshold=0.0,
    pong_train_steps=None,
    xla_preset="cartpole",
    xla_overrides=TINY_SETS,
    xla_env_steps=880,
    l3_preset="cartpole",
    l3_overrides=TINY_SETS,
    l3_env_steps=880,
    l3_shares=(0.125,),
    subprocess=False,
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("claims")
    return claims.run(TINY, out_dir=str(out)), out


@pytest.mark.slow  # the shared tiny run: about 30 s
def test_every_claim_has_a_row_with_an_allowed_verdict(tiny_run):
    result, _ = tiny_run
    rows = result["rows"]
    assert [r["id"] for r in rows] == list(claims.ARTICLE)
    for r in rows:
        assert r["verdict"] in claims.VERDICTS, r
        assert r["article"] == claims.ARTICLE[r["id"]]["figure"]
        for field in ("ours", "by", "method", "hardware", "source"):
            assert isinstance(r[field], str) and r[field], (r["id"], field)


@pytest.mark.slow  # the shared tiny run: about 30 s
def test_results_written_as_json_and_markdown(tiny_run):
    result, out = tiny_run
    with open(out / "claims-tiny.json") as f:
        saved = json.load(f)
    assert [r["verdict"] for r in saved["rows"]] == [r["verdict"] for r in result["rows"]]
    text = (out / "claims-tiny.md").read_text()
    for r in result["rows"]:
        assert f"| {r['claim']} | {r['article']} |" in text
    assert "Pong: not run in the tiny settings" in text


@pytest.mark.slow  # the shared tiny run: about 30 s
def test_conventional_curve_has_the_fused_chunks(tiny_run):
    result, _ = tiny_run
    for seed in result["training"]["seeds"]:
        fused = [c["env_steps"] for c in seed["fused"]["curve"]]
        conventional = [c["env_steps"] for c in seed["conventional"]["curve"]]
        assert fused == conventional == [280, 480, 680, 880]
        times = [c["t_s"] for c in seed["conventional"]["curve"]]
        assert times == sorted(times) and times[0] > 0
        assert 0 < seed["conventional"]["host_replay_share"] < 1


def test_verdict_rules():
    assert claims.ratio_verdict(30, 8.3)[0] == "holds"
    assert claims.ratio_verdict(8.0, 26.7)[0] == "holds in part"
    assert claims.ratio_verdict(1.2, 10_000)[0] == "does not hold"
    assert claims.ratio_verdict(1.0, 4.1)[0] == "does not hold"
    assert claims.ratio_verdict(None, 4.1)[0] == "does not hold"
    assert claims.combine(["holds", "does not hold"]) == "holds in part"
    assert claims.combine(["holds", "holds"]) == "holds"


@pytest.mark.slow  # the shared tiny run: about 30 s
def test_render_rebuilds_rows_and_markdown_from_the_json(tiny_run, tmp_path):
    result, out = tiny_run
    path = tmp_path / "claims-copy.json"
    path.write_text((out / "claims-tiny.json").read_text())
    claims.main(["--render", str(path)])
    again = json.loads(path.read_text())
    assert [r["ours"] for r in again["rows"]] == [r["ours"] for r in result["rows"]]
    assert (tmp_path / "claims-copy.md").read_text() == (out / "claims-tiny.md").read_text()
