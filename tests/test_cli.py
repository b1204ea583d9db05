"""The `jaxrl-fast` command end to end on tiny runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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


def test_cli_train_writes_summary(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--preset", "cartpole", "--seeds", "2", "--out", str(out), *TINY])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "CartPole-v1"
    assert summary["env_steps_per_seed"] == 1200
    assert len(summary["seeds"]) == 2
    for s in summary["seeds"]:
        assert s["final_return"] is not None and s["final_return"] > 0
    for key in ("wall_time_s", "compile_time_s", "run_time_s", "env_steps_per_s"):
        assert summary[key] > 0
    history = json.loads((out / "history.json").read_text())
    assert history[-1]["env_steps"] == 1200
    printed = capsys.readouterr().out
    assert "final greedy return" in printed and "env-steps/s" in printed


def test_cli_unknown_preset_suggests(capsys):
    assert main(["train", "--preset", "cartpol", *TINY]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'cartpole'" in err


def test_cli_unknown_env_lists_valid_names(capsys):
    assert main(["train", "--env", "CartPol-v1", *TINY]) == 2
    err = capsys.readouterr().err
    assert "CartPole-v1" in err and "Valid names" in err


def test_cli_bad_step_count_names_field(capsys):
    assert (
        main(["train", "--total-env-steps", "1205", "--learning-starts", "200", "--no-progress"])
        == 2
    )
    err = capsys.readouterr().err
    assert "TrainConfig.total_env_steps=1205" in err and "nearest valid: 1200" in err


def test_cli_runs_as_a_module_and_lists(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl_fast.cli", "presets"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "cartpole-cleanrl" in proc.stdout and "minatar-breakout" in proc.stdout


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

    from jaxrl_fast import compile_cache

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="cannot be created"):
        compile_cache.enable(str(blocker / "sub"))
