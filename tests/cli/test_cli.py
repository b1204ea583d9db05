"""The `jaxrl-fast` command end to end on tiny runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jaxrl_fast.cli import main

TINY = [
    "--total-env-steps",
    "1200",
    "--learning-starts",
    "200",
    "--eval-episodes",
    "2",
    "--no-progress",
]


@pytest.mark.slow
def test_cli_train_writes_summary(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--seeds", "2", "--eval-epsilon", "0.5", "--seed-loop", "map", "--out", str(out)]
    code = main(["train", "--preset", "cartpole", *args, *TINY])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["eval_epsilon"] == 0.5 and summary["config"]["seed_loop"] == "map"
    assert summary["env"] == "CartPole-v1"
    assert summary["env_steps_per_seed"] == 1200
    assert len(summary["seeds"]) == 2
    for s in summary["seeds"]:
        # CartPole pays 1 per step and no policy drops the pole in under 8 steps; an episode
        # counted past its end (or never ended) would read 500
        assert s["final_return"] is not None and 8 <= s["final_return"] < 500
    for key in ("wall_time_s", "compile_time_s", "run_time_s", "env_steps_per_s"):
        assert summary[key] > 0
    history = json.loads((out / "history.json").read_text())
    assert history[-1]["env_steps"] == 1200
    printed = capsys.readouterr().out
    assert "final eval return" in printed and "env-steps/s" in printed


def test_cli_unknown_preset_suggests(capsys):
    assert main(["train", "--preset", "cartpol", *TINY]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'cartpole'" in err


def test_cli_unknown_env_lists_valid_names(capsys):
    assert main(["train", "--env", "CartPol-v1", *TINY]) == 2
    err = capsys.readouterr().err
    assert "CartPole-v1" in err and "Valid names" in err


def test_cli_envs_lists_discrete_and_continuous_apart(capsys):
    assert main(["envs"]) == 0
    discrete = capsys.readouterr().out.split()
    assert main(["envs", "--continuous"]) == 0
    continuous = capsys.readouterr().out.split()
    assert "CartPole-v1" in discrete and "Reacher-misc" not in discrete
    assert "Reacher-misc" in continuous and "Pendulum-v1" in continuous
    assert "CartPole-v1" not in continuous


def test_cli_envs_lists_the_suites_with_their_extras(capsys, monkeypatch):
    from jaxrl_fast.envs import suites

    monkeypatch.setattr(suites, "installed", lambda s: s.prefix != "craftax")
    assert main(["envs", "--suites"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines][:6] == [
        "craftax:", "navix:", "xminigrid:", "pgx:", "jumanji:", "brax:"]  # fmt: skip
    assert "pip install 'jaxrl-fast[craftax]'" in lines[0] and "(installed)" in lines[3]
    assert main(["envs"]) == 0  # the installed suites' envs are listed with the rest
    names = capsys.readouterr().out.split()
    assert "pgx:minatar-breakout" in names and "navix:Navix-Empty-5x5-v0" in names
    assert not any(n.startswith("craftax:") for n in names)


def test_cli_continuous_env_without_discretise_says_how(capsys):
    assert main(["train", "--env", "Pendulum-v1", *TINY]) == 2
    assert "set EnvConfig.discretise=N" in capsys.readouterr().err


def test_cli_bad_step_count_names_field(capsys):
    assert (
        main(["train", "--total-env-steps", "1205", "--learning-starts", "200", "--no-progress"])
        == 2
    )
    err = capsys.readouterr().err
    assert "TrainConfig.total_env_steps=1205" in err and "nearest valid: 1200" in err


@pytest.mark.slow
def test_cli_runs_as_a_module_and_lists(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl_fast.cli", "presets"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "cartpole-cleanrl" in proc.stdout and "minatar-breakout" in proc.stdout


@pytest.mark.slow
def test_cli_fills_compile_cache_in_a_fresh_process(tmp_path):
    # JAX fixes its cache directory once per process, so this runs the command in its own.
    env = {**os.environ, "JAXRL_FAST_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "jaxrl_fast.cli", "train", "--out", str(tmp_path / "a"), *TINY]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "a" / "summary.json").exists()
    assert any((tmp_path / "cache").iterdir()), "nothing was written to the compilation cache"


def test_compile_cache_rejects_unwritable_dir(tmp_path):
    import pytest

    from jaxrl_fast.run import compile_cache

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="cannot be created"):
        compile_cache.enable(str(blocker / "sub"))


# ---- jaxrl-fast plan (compiles nothing) ------------------------------------------------------

T4 = ["plan", "--preset", "minatar-breakout", "--capacity", "1000000", "--device-memory", "16GB"]
# Breakout-MinAtar: (10, 10, 4) float32 obs -> 1,614 bytes per L2 row; 16 envs.


def test_cli_plan_t4_fits_with_8_seeds(capsys):
    assert main([*T4, "--seeds", "8"]) == 0
    out = capsys.readouterr().out
    # 8 x (1,000,000 x 1,614 + 16 x 1,611) = 12.91 GB of 16 GB.
    assert "1,000,000" in out and "12.91 GB" in out and "16.00 GB available (given)" in out
    assert "fits (80.7% used)" in out and "does NOT fit" not in out


def test_cli_plan_t4_does_not_fit_with_16_seeds(capsys):
    assert main([*T4, "--seeds", "16"]) == 0
    out = capsys.readouterr().out
    assert "does NOT fit (9.82 GB short)" in out


def test_cli_plan_json_parses(capsys):
    code = main(["plan", "--capacity", "medium", "--device-memory", "1e6", "--json"])
    assert code == 0
    plan = json.loads(capsys.readouterr().out)
    # The default preset's CartPole, 3-step returns: L1 stages 3 steps x 10 envs x 27 bytes =
    # 810 bytes; L2 (500,000 - 810) / 30 bytes per row, rounded down to 10 envs.
    assert plan["n_step"] == 3 and plan["l1_rows"] == 30 and plan["l1_bytes"] == 810
    assert plan["share"] == 0.5 and plan["l2_rows"] == 16_630 and plan["row_bytes"] == 30
    assert plan["device_memory"] == 10**6 and plan["memory_source"] == "given"
    assert plan["fits"] is True and plan["device_bytes"] == 16_630 * 30 + 810


def test_cli_plan_refuses_the_rollout_learner(capsys):
    assert main(["plan", "--preset", "pqn-cartpole"]) == 2
    err = capsys.readouterr().err
    assert "learner='rollout' keeps no replay" in err and "train_frequency=2048 rows" in err


def test_cli_plan_replay_options(capsys, tmp_path):
    args = ["plan", "--capacity", "8000", "--seeds", "2", "--prioritised", "--n-step", "3"]
    args += ["--sampler", "cumsum"]
    args += ["--l3", "disk", "--l3-capacity", "16000", "--spill-dir", str(tmp_path)]
    assert main([*args, "--device-memory", "16GiB", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["device_memory"] == 16 * 2**30
    assert plan["sampler"] == "cumsum" and plan["bytes_per_transition"] == 34
    assert plan["l1_rows"] == 30 and plan["l3"] == "disk" and plan["l3_rows"] == 16_000
    assert plan["l3_bytes"] == 16_000 * 2 * 30 and plan["spill_block_slots"] == 200


def test_cli_plan_bad_device_memory(capsys):
    assert main(["plan", "--device-memory", "16XB"]) == 2
    err = capsys.readouterr().err
    assert "--device-memory: byte size '16XB' is not allowed" in err and "16GiB" in err


def test_cli_plan_share_too_small_names_field(capsys):
    assert main(["plan", "--capacity", "auto:0.3", "--device-memory", "1kB"]) == 2
    err = capsys.readouterr().err
    # the smallest window: 130 rows x 30 bytes + 810 bytes of 3-step L1 staging
    assert "ReplayConfig.capacity='auto:0.3'" in err and "4,710 bytes" in err


def test_cli_plan_bad_capacity_names_field(capsys):
    assert main(["plan", "--capacity", "huge", "--device-memory", "16GB"]) == 2
    assert "ReplayConfig.capacity='huge' is not allowed" in capsys.readouterr().err


def test_cli_plan_defaults_to_the_device(capsys):
    assert main(["plan", "--json"]) == 0  # CPU here: host RAM
    plan = json.loads(capsys.readouterr().out)
    assert plan["memory_source"] == "host RAM (MemAvailable)" and plan["device_memory"] > 0
    assert plan["l2_rows"] == 10_000 and plan["capacity"] == 10_000  # the cartpole preset's


@pytest.mark.slow
def test_cli_train_with_l3_disk_reports_and_cleans_up(tmp_path, capsys):
    spill = tmp_path / "spill"
    spill.mkdir()
    args = ["train", "--capacity", "200", "--batch-size", "32", "--n-step", "3", "--prioritised"]
    args += ["--l3", "disk", "--l3-capacity", "2000", "--l3-share", "0.25"]
    args += ["--spill-dir", str(spill), "--spill-block", "4096", "--out", str(tmp_path / "r")]
    assert main([*args, *TINY]) == 0
    printed = capsys.readouterr().out
    assert "replay: " in printed and "l2_hit_rate" in printed  # the buffer's own counters
    history = json.loads((tmp_path / "r" / "history.json").read_text())
    rec = history[-1]["replay"]
    assert rec["blocks_spilled"] > 0 and rec["l3_read_calls"] > 0
    assert rec["l2_hit_rate"][0] < 1.0  # some rows came from L3
    assert os.listdir(spill) == []  # the L3 files are gone after the run


def test_cli_train_l3_disk_missing_spill_dir_fails_before_compiling(tmp_path, capsys):
    missing = str(tmp_path / "nope")
    args = ["train", "--l3", "disk", "--l3-capacity", "10000", "--l3-share", "0.1"]
    assert main([*args, "--spill-dir", missing, *TINY]) == 2
    assert "ReplayConfig.spill_dir" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_train_with_bf16_prints_policy_and_records_scale(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--preset", "cartpole", "--precision", "bf16", "--out", str(out), *TINY]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "precision: compute bf16 (params fp32)" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["precision"]["compute"] == "bf16"
    assert summary["fp32_fallback_env_steps"] is None
    history = json.loads((out / "history.json").read_text())
    assert history[-1]["loss_scale"] == [1.0] and history[-1]["fp32_fallback"] == [False]


def test_cli_bad_seed_loop_names_field(capsys):
    assert main(["train", "--seed-loop", "pmap", *TINY]) == 2
    assert "TrainConfig.seed_loop='pmap'" in capsys.readouterr().err


def test_cli_bad_precision_names_field(capsys):
    assert main(["train", "--precision", "fp64", *TINY]) == 2
    assert "PrecisionConfig.compute='fp64'" in capsys.readouterr().err
    assert main(["train", "--loss-scale", "static:x", *TINY]) == 2
    assert "PrecisionConfig.loss_scale" in capsys.readouterr().err
