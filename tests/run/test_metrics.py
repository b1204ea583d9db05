"""Run directories: config.json with versions, metrics rows per chunk and seed, summary hashes."""

from __future__ import annotations

import csv
import json
import os

import jax
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast.run.metrics import SEED_FIELDS, params_sha256
from jaxrl_fast.run.train import train


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "dir"  # created by the run
    cfg = tiny_config(schedule={"epsilon_fraction": 0.5, "epsilon_end": 0.1})
    return train(cfg, progress=False, run_dir=path), path


def _jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_config_json_holds_config_and_versions(run):
    result, path = run
    with open(path / "config.json") as f:
        saved = json.load(f)
    assert saved["config"] == json.loads(json.dumps(result.config.to_dict()))
    assert saved["versions"]["jax"] == jax.__version__
    assert saved["versions"]["jaxrl-fast"] is not None
    assert set(saved["versions"]) >= {"jaxlib", "flax", "optax", "orbax-checkpoint", "gymnax"}


def test_metrics_have_a_row_per_chunk_per_seed(run):
    result, path = run
    cfg = result.config
    rows = _jsonl(path / "metrics.jsonl")
    assert len(rows) == cfg.chunks * cfg.num_seeds == 8
    assert [(r["chunk"], r["seed_index"]) for r in rows] == [
        (c, s) for c in range(cfg.chunks) for s in range(cfg.num_seeds)
    ]
    steps = [r["env_steps"] for r in rows[:: cfg.num_seeds]]
    assert steps == [h["env_steps"] for h in result.history] and steps[-1] == 880
    for r in rows:
        h = result.history[r["chunk"]]
        for field in SEED_FIELDS:
            want = h[field][r["seed_index"]]
            if isinstance(want, float) and np.isnan(want):
                assert r[field] is None, field
            else:
                assert r[field] == want, field
    # epsilon 1 -> 0.1 over the first 440 env steps, then 0.1
    eps = {r["env_steps"]: r["epsilon"] for r in rows}
    assert eps[880] == pytest.approx(0.1)
    first = min(eps)
    assert eps[first] == pytest.approx(1.0 - 0.9 * first / 440, abs=1e-6)
    assert all(r["learning_rate"] == pytest.approx(1e-3) for r in rows)  # constant schedule
    with open(path / "metrics.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows)
    assert [float(t["loss"]) for t in table] == pytest.approx([r["loss"] for r in rows])
    assert table[0].keys() >= {"chunk", "seed_index", "env_steps", "epsilon", *SEED_FIELDS}


def test_summary_hashes_each_seeds_parameters(run):
    result, path = run
    with open(path / "summary.json") as f:
        summary = json.load(f)
    params = result.runner.seeds.agent.params
    hashes = [s["params_sha256"] for s in summary["seeds"]]
    assert hashes == [params_sha256(params, i) for i in range(2)]
    assert hashes[0] != hashes[1] and all(len(h) == 64 for h in hashes)
    assert summary["env_steps_per_seed"] == 880


@pytest.mark.slow
def test_same_run_same_hashes_and_any_changed_bit_shows(run, tmp_path):
    result, path = run
    again = train(result.config, progress=False, run_dir=tmp_path / "again")
    with open(path / "summary.json") as f, open(tmp_path / "again" / "summary.json") as g:
        a, b = json.load(f)["seeds"], json.load(g)["seeds"]
    assert [s["params_sha256"] for s in a] == [s["params_sha256"] for s in b]
    params = jax.tree.map(np.array, again.runner.seeds.agent.params)
    leaf = jax.tree.leaves(params)[0]
    leaf.view(np.uint32).flat[0] ^= 1  # one bit of seed 0's first parameter
    assert params_sha256(params, 0) != a[0]["params_sha256"]
    assert params_sha256(params, 1) == a[1]["params_sha256"]


def test_bad_run_dirs_are_refused_before_compiling(run, tmp_path):
    _, path = run
    file = tmp_path / "a_file"
    file.write_text("")
    with pytest.raises(ValueError, match=r"run_dir=.*a_file' is an existing file"):
        train(tiny_config(), progress=False, run_dir=file)
    with pytest.raises(ValueError, match=r"already holds a run \(metrics.jsonl\)"):
        train(tiny_config(), progress=False, run_dir=path)
    assert os.listdir(tmp_path) == ["a_file"]


def test_cli_run_dir_naming_a_file_is_a_one_line_error(tmp_path, capsys):
    from jaxrl_fast.cli import main

    file = tmp_path / "f"
    file.write_text("")
    assert main(["train", "--run-dir", str(file), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "is an existing file" in err and "Traceback" not in err


def test_cli_out_naming_a_file_is_a_one_line_error(tmp_path, capsys):
    from jaxrl_fast.cli import main

    file = tmp_path / "f"
    file.write_text("")
    assert main(["train", "--out", str(file), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "is an existing file" in err and "Traceback" not in err


def test_a_config_saved_before_new_fields_existed_still_matches():
    """Fields missing from a saved config.json (an older version) count as their defaults."""
    from jaxrl_fast.config import TrainConfig
    from jaxrl_fast.run.metrics import config_differences, plain_value, with_defaults

    new = plain_value(TrainConfig().to_dict())
    old = {k: v for k, v in new.items() if k != "demo"}
    old["network"] = {k: v for k, v in new["network"].items() if k != "lstm"}
    assert config_differences(old, new) != []  # compared as saved, they differ
    assert config_differences(with_defaults(old, new), new) == []
    changed = plain_value(TrainConfig().replace(demo={"source": "scripted"}).to_dict())
    assert config_differences(with_defaults(old, new), changed) == ["demo.source"]
