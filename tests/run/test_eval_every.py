"""Evaluation during training (`eval_every`), its rows and rliable export; eval_episodes=0."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.run.metrics import params_sha256
from jaxrl_fast.run.train import train


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny run with and without eval_every=400 (chunks end at 280, 480, 680, 880)."""
    path = tmp_path_factory.mktemp("eval") / "run"
    evaluated = train(tiny_config(eval_every=400, eval_episodes=2), progress=False, run_dir=path)
    plain = train(tiny_config(eval_episodes=2), progress=False)
    return evaluated, plain, path


@pytest.mark.slow
def test_chunks_reaching_a_multiple_and_the_last_are_evaluated(runs):
    evaluated, _, _ = runs
    got = [(h["env_steps"], "eval_return" in h) for h in evaluated.history]
    assert got == [(280, False), (480, True), (680, False), (880, True)]
    assert evaluated.evaluations == 2  # counted, though their time is inside run_time_s
    for h in evaluated.history:
        if "eval_return" in h:
            assert len(h["eval_return"]) == 2 and np.all(np.isfinite(h["eval_return"]))


def test_the_last_evaluation_is_the_final_return(runs):
    evaluated, plain, _ = runs
    np.testing.assert_array_equal(evaluated.history[-1]["eval_return"], evaluated.final_return)
    # same keys, same parameters: the final evaluation is the one a run without eval_every makes
    np.testing.assert_array_equal(evaluated.final_return, plain.final_return)


def test_evaluating_never_changes_training(runs):
    evaluated, plain, _ = runs
    a, b = evaluated.runner.seeds.agent.params, plain.runner.seeds.agent.params
    assert params_sha256(a) == params_sha256(b)
    for ha, hb in zip(evaluated.history, plain.history, strict=True):
        assert ha["loss"] == hb["loss"] and ha["episode_return"] == hb["episode_return"]


def test_rows_and_rliable_export_hold_the_evaluations(runs):
    evaluated, _, path = runs
    with open(path / "metrics.jsonl") as f:
        rows = [json.loads(line) for line in f]
    by_chunk = {(r["chunk"], r["seed_index"]): r["eval_return"] for r in rows}
    assert by_chunk[(0, 0)] is None and by_chunk[(2, 1)] is None
    assert by_chunk[(1, 1)] == evaluated.history[1]["eval_return"][1]
    npz = np.load(path / "rliable.npz")
    assert npz["final"].shape == (2, 1) and npz["curve"].shape == (2, 1, 2)
    np.testing.assert_array_equal(npz["final"][:, 0], evaluated.final_return)
    np.testing.assert_array_equal(npz["env_steps"], [480, 880])
    np.testing.assert_array_equal(npz["curve"][:, 0, 0], evaluated.history[1]["eval_return"])
    assert str(npz["task"]) == "probe-chain"
    with open(path / "metrics.csv") as f:
        assert "eval_return" in f.readline().strip().split(",")


@pytest.mark.slow
def test_no_evaluation_compiles_nothing_and_reports_none(tmp_path):
    result = train(tiny_config(eval_episodes=0), progress=False, run_dir=tmp_path / "r")
    assert result.final_return.shape == (2,) and np.all(np.isnan(result.final_return))
    assert result.eval_time_s < 0.05  # no compile waited on, nothing run
    assert [s["final_return"] for s in result.summary()["seeds"]] == [None, None]
    npz = np.load(tmp_path / "r" / "rliable.npz")
    assert np.all(np.isnan(npz["final"])) and npz["curve"].shape == (2, 1, 0)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"eval_every": 0}, r"TrainConfig\.eval_every=0 is not allowed; expected None or a pos"),
        ({"eval_every": 1.5}, r"TrainConfig\.eval_every=1\.5"),
        ({"eval_every": 100, "eval_episodes": 0}, r"eval_every=100 needs eval_episodes >= 1"),
    ],
)
def test_bad_eval_every_is_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**changes)
