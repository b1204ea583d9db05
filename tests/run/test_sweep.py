"""Sweeps as one compiled program: the plan, refusals, compile once whatever the values, each
point trained with its own values and keys, the result's statistics, files and CLI."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast import cli
from jaxrl_fast.run import sweep
from jaxrl_fast.run.train import train

SPEC = {"dqn.learning_rate": [1e-3, 1e-2], ("dqn.tau", "dqn.gamma"): [(1.0, 0.9), (0.5, 0.8)]}


def test_plan_lays_out_grid_and_zipped_axes():
    plan = sweep.plan(tiny_config(), SPEC, seeds_per_point=2)
    assert plan.fields == ("dqn.learning_rate", "dqn.tau", "dqn.gamma")
    assert plan.axes == (("dqn.learning_rate",), ("dqn.tau", "dqn.gamma"))
    assert [tuple(p.values()) for p in plan.points] == [
        (1e-3, 1.0, 0.9),
        (1e-3, 0.5, 0.8),
        (1e-2, 1.0, 0.9),
        (1e-2, 0.5, 0.8),
    ]
    assert plan.config.num_seeds == 8
    hp = plan.hparams
    np.testing.assert_allclose(hp.learning_rate, [1e-3] * 4 + [1e-2] * 4, rtol=1e-7)
    np.testing.assert_array_equal(hp.tau, [1.0, 1.0, 0.5, 0.5] * 2)
    np.testing.assert_allclose(hp.gamma_values[:, 0], [0.9, 0.9, 0.8, 0.8] * 2, rtol=1e-7)
    np.testing.assert_array_equal(plan.key_index, [0, 1] * 4)


@pytest.mark.parametrize(
    "spec, match",
    [
        (
            {"replay.batch_size": [8, 16]},
            r"'replay\.batch_size' cannot be swept.*dqn\.learning_rate",
        ),
        ({"network.hidden_sizes": [(8,), (16,)]}, r"'network\.hidden_sizes' cannot be swept"),
        ({"dqn.double_q": [True, False]}, r"'dqn\.double_q' cannot be swept.*code path"),
        ({"dqn.learnig_rate": [1e-3]}, r"Did you mean dqn\.learning_rate"),
        ({"dqn.gamma": [0.9, 1.5]}, r"sweep point \{'dqn\.gamma': 1\.5\}: DQNConfig\.gamma=1\.5"),
        ({("dqn.tau", "dqn.gamma"): [(1.0,)]}, r"not a tuple of 2 values"),
        ({"dqn.gamma": []}, r"non-empty list"),
        ({"dqn.learning_rate": [1e-3], "dqn.learning-rate": [1e-2]}, r"appears twice"),
        ({}, r"non-empty dict"),
    ],
)
def test_bad_sweeps_are_refused_before_compiling(spec, match):
    with pytest.raises(ValueError, match=match):
        train(tiny_config(), sweep=spec, progress=False)


def test_bad_seeds_per_point_is_refused():
    for k in (0, 1.5, True):
        with pytest.raises(ValueError, match="seeds_per_point"):
            sweep.plan(tiny_config(), {"dqn.gamma": [0.9]}, seeds_per_point=k)


@pytest.fixture
def compiles(monkeypatch):
    """The programs the shell compiles: the text of each `Lowered` compiled."""
    texts: list[str] = []
    original = jax.stages.Lowered.compile

    def counting(self, *args, **kwargs):
        texts.append(self.as_text())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", counting)
    return texts


@pytest.mark.slow
def test_a_sweep_compiles_once_whatever_the_values(compiles):
    cfg = tiny_config(total_env_steps=240, num_chunks=2, eval_episodes=2)
    first = train(cfg, sweep={"dqn.learning_rate": [1e-3, 3e-3, 1e-2]}, progress=False)
    programs_a = list(compiles)
    compiles.clear()
    other = {"dqn.learning_rate": [5e-4, 2e-3, 4e-3]}
    second = train(cfg, sweep=other, progress=False)
    # init, run_chunk, evaluate: once each for all points, and the same programs for other values
    assert len(programs_a) == 3
    assert compiles == programs_a
    assert len(first.points) == len(second.points) == 3


@pytest.fixture(scope="module")
def lr_sweep():
    cfg = tiny_config(num_seeds=2, eval_episodes=2)
    return cfg, train(
        cfg, sweep={"dqn.learning_rate": [1e-3, 3e-3]}, seeds_per_point=2, progress=False
    )


def _params(result, seeds):
    return jax.tree.map(lambda x: np.asarray(x)[seeds], result.runner.seeds.agent.params)


@pytest.mark.slow
def test_a_one_point_sweep_is_the_plain_run_bitwise(lr_sweep):
    cfg, _ = lr_sweep
    plain = train(cfg, progress=False)  # learning_rate 1e-3, 2 seeds
    one = train(cfg, sweep={"dqn.learning_rate": [1e-3]}, seeds_per_point=2, progress=False)
    jax.tree.map(np.testing.assert_array_equal, _params(one.result, [0, 1]), _params(plain, [0, 1]))
    np.testing.assert_array_equal(one.points[0].final_returns, plain.final_return)


@pytest.mark.slow
def test_each_point_trains_with_its_own_values_and_the_shared_keys(lr_sweep):
    cfg, swept = lr_sweep
    plain = train(cfg.replace(dqn={"learning_rate": 3e-3}), progress=False)
    # point 1 (seeds 2, 3) is the plain run at 3e-3: the same keys and values, in a program of 4
    # seeds instead of 2 (float rounding may differ)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4),
        _params(swept.result, [2, 3]),
        _params(plain, [0, 1]),
    )
    lr = swept.result.runner.seeds.agent.hparams.learning_rate
    np.testing.assert_allclose(lr, [1e-3, 1e-3, 3e-3, 3e-3], rtol=1e-7)
    # the two points differ: 3x the step size moves the parameters elsewhere
    diff = jax.tree.map(
        lambda a, b: np.abs(a - b).max(), _params(swept.result, [0]), _params(swept.result, [2])
    )
    assert max(jax.tree.leaves(diff)) > 1e-2


@pytest.mark.slow
def test_sweep_result_points_and_files(lr_sweep, tmp_path):
    _, swept = lr_sweep
    finals = np.asarray(swept.result.final_return)
    for p, point in enumerate(swept.points):
        assert point.seed_indices == [2 * p, 2 * p + 1]
        np.testing.assert_allclose(point.final_returns, finals[2 * p : 2 * p + 2])
        assert point.mean == pytest.approx(finals[2 * p : 2 * p + 2].mean())
        lo, hi = point.ci95
        half = 12.706 * np.std(finals[2 * p : 2 * p + 2], ddof=1) / np.sqrt(2)
        assert (lo, hi) == pytest.approx((point.mean - half, point.mean + half), abs=1e-5)
    assert swept.best().mean == max(p.mean for p in swept.points)
    paths = swept.write(tmp_path)
    assert {os.path.basename(p) for p in paths} >= {"sweep.json", "sweep.md"}
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert [r["values"] for r in saved["results"]] == [
        {"dqn.learning_rate": 1e-3},
        {"dqn.learning_rate": 3e-3},
    ]
    table = (tmp_path / "sweep.md").read_text()
    assert "| dqn.learning_rate | mean final return |" in table
    # 2 seeds per point: each interval is marked, with the caveat under the table
    assert table.count(" (n=2)*") == 2 and "fewer than 3 seeds" in table


def test_three_seeds_per_point_are_not_marked():
    plan = sweep.plan(tiny_config(), {"dqn.gamma": [0.9, 0.8]}, seeds_per_point=3)
    points = [
        sweep.SweepPoint({"dqn.gamma": g}, [3 * i, 3 * i + 1, 3 * i + 2], [1.0, 2.0, 3.0], 2.0,
                         sweep.confidence_interval([1.0, 2.0, 3.0]))
        for i, g in enumerate([0.9, 0.8])
    ]  # fmt: skip
    table = sweep.SweepResult(plan, points, None).table()
    assert "(n=" not in table and "fewer than" not in table and " .. " in table


def test_confidence_interval_by_hand():
    # mean 2, sd 1, n = 3: t(2) = 4.303, half-width 4.303 / sqrt(3)
    lo, hi = sweep.confidence_interval([1.0, 2.0, 3.0])
    assert (lo, hi) == pytest.approx((2 - 4.303 / 3**0.5, 2 + 4.303 / 3**0.5), abs=1e-5)
    assert sweep.confidence_interval([1.0]) is None


@pytest.mark.slow
def test_resume_with_another_sweep_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    cfg = tiny_config(total_env_steps=240, num_chunks=2)
    train(cfg, sweep={"dqn.learning_rate": [1e-3, 2e-3]}, run_dir=run_dir, progress=False)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    lr = {r["seed_index"]: r["learning_rate"] for r in rows}  # each seed's own schedule
    assert lr == pytest.approx({0: 1e-3, 1: 2e-3})
    assert (run_dir / "sweep.json").exists() and (run_dir / "summary.json").exists()
    with pytest.raises(
        ValueError, match=r"holds another sweep \(\['dqn\.learning_rate'\], 2 points"
    ):
        train(
            cfg,
            sweep={"dqn.learning_rate": [1e-3, 5e-3]},
            run_dir=run_dir,
            resume=True,
            progress=False,
        )


@pytest.mark.slow
def test_cli_sweep_writes_points(tmp_path, capsys):
    cfg_file = tmp_path / "tiny.json"
    cfg_file.write_text(json.dumps(tiny_config(total_env_steps=240, num_chunks=2).to_dict()))
    out = tmp_path / "out"
    argv = [
        "sweep", "--config", str(cfg_file), "--sweep", "dqn.learning_rate=1e-3,1e-2",
        "--zip", "dqn.tau=1.0,0.5", "--zip", "schedule.epsilon_schedule=linear,factor",
        "--seeds-per-point", "1", "--out", str(out), "--no-progress", "--no-cache",
    ]  # fmt: skip
    assert cli.main(argv) == 0
    saved = json.loads((out / "sweep.json").read_text())
    assert len(saved["results"]) == 4
    assert saved["results"][1]["values"] == {
        "dqn.learning_rate": 1e-3,
        "dqn.tau": 0.5,
        "schedule.epsilon_schedule": "factor",
    }
    assert "once for all points" in capsys.readouterr().out


def test_cli_sweep_errors_name_the_problem(tmp_path, capsys):
    assert cli.main(["sweep", "--sweep", "replay.capacity=100,200", "--no-cache"]) == 2
    assert "'replay.capacity' cannot be swept" in capsys.readouterr().err
    assert (
        cli.main(["sweep", "--zip", "dqn.tau=1,0.5", "--zip", "dqn.gamma=0.9", "--no-cache"]) == 2
    )
    assert "as many values" in capsys.readouterr().err


def test_the_article_recipe_differs_from_its_preset_only_in_sweepable_fields(monkeypatch):
    from jaxrl_fast import presets
    from jaxrl_fast.config import options
    from jaxrl_fast.config.hparams import SWEEPABLE

    base, recipe = presets.get("cartpole"), presets.get("article-recipe")
    changed = options.differences(base, recipe)
    assert set(changed) <= set(SWEEPABLE)  # so preset vs recipe is one sweep program
    assert recipe.dqn.learning_rate == 3e-4 and recipe.dqn.max_grad_norm == 1.0
    s = recipe.schedule
    assert (s.lr_schedule, s.lr_period_fraction) == ("cosine_restarts", 0.1)
    assert s.gamma_schedule == "0.99:0.3,0.95:0.7,0.9"
    assert (s.epsilon_schedule, s.epsilon_factor, s.epsilon_every, s.epsilon_end) == (
        "factor",
        0.995,
        1000,
        0.01,
    )
    # the benchmark's comparison: preset, recipe, recipe with a constant gamma, zipped
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[2] / "benchmarks" / "article_recipe.py"
    monkeypatch.syspath_prepend(str(path.parent))  # as `python benchmarks/article_recipe.py`
    spec = importlib.util.spec_from_file_location("article_recipe", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    axis = bench.comparison_spec(base, recipe)
    plan = sweep.plan(base, axis, seeds_per_point=1)
    assert len(plan.points) == 3
    gammas = plan.hparams.gamma_values
    np.testing.assert_allclose(gammas[0], [0.99] * 4, rtol=1e-7)
    np.testing.assert_allclose(gammas[1], [0.99, 0.95, 0.9, 0.9], rtol=1e-7)
    np.testing.assert_allclose(gammas[2], [0.99] * 4, rtol=1e-7)
    np.testing.assert_allclose(plan.hparams.learning_rate, [1e-3, 3e-4, 3e-4], rtol=1e-7)


def test_loss_scale_settings_are_sweepable_values():
    cfg = tiny_config(precision={"compute": "fp16"})
    plan = sweep.plan(
        cfg,
        {
            ("precision.initial_scale", "precision.growth_interval"): [
                (1024.0, 100),
                (65536.0, 2000),
            ]
        },
    )
    np.testing.assert_array_equal(plan.hparams.initial_scale, [1024.0, 65536.0])
    np.testing.assert_array_equal(plan.hparams.growth_interval, [100, 2000])
    with pytest.raises(ValueError, match=r"PrecisionConfig\.min_scale"):
        sweep.plan(cfg, {"precision.min_scale": [1e9]})  # above initial_scale
