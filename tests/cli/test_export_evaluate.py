"""`jaxrl-fast export RUN_DIR` and `jaxrl-fast evaluate FILE`: a run directory's trained policy
out to a file, and its greedy returns."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxrl_fast.cli import main
from jaxrl_fast.run.metrics import params_sha256
from jaxrl_fast.trained.policy import Policy

TINY = ["--env", "probe-chain", "--env.num-envs", "4", "--network.hidden-sizes", "32"]
TINY += ["--replay.capacity", "400", "--replay.batch-size", "16", "--dqn.gamma", "0.9"]
TINY += ["--dqn.learning-rate", "1e-3", "--dqn.target-period", "40", "--learning-starts", "80"]
TINY += ["--total-env-steps", "8080", "--train-frequency", "4", "--num-seeds", "2"]
TINY += ["--eval-episodes", "2", "--num-chunks", "2", "--no-progress"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("export") / "run"
    assert main(["train", *TINY, "--run-dir", str(run)]) == 0
    return run


@pytest.mark.slow
def test_export_writes_each_seeds_final_parameters(run_dir, tmp_path, capsys):
    summary = json.loads((run_dir / "summary.json").read_text())
    for seed in (0, 1):
        out = tmp_path / f"seed{seed}.npz"
        assert main(["export", str(run_dir), "--seed", str(seed), "--out", str(out)]) == 0
        assert f"seed {seed} of {run_dir}" in capsys.readouterr().out
        policy = Policy.load(out)
        # bitwise the run's final parameters of that seed
        assert params_sha256(policy.params) == summary["seeds"][seed]["params_sha256"]
        assert policy.spec.name == "probe-chain" and policy.env.name == "probe-chain"


@pytest.mark.slow
def test_evaluate_prints_the_greedy_return(run_dir, tmp_path, capsys):
    out = tmp_path / "p.npz"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--episodes", "3", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    # probe-chain learned (8,080 steps): every greedy episode returns 1
    assert shown["env"] == "probe-chain" and shown["episodes"] == 3
    np.testing.assert_allclose(shown["returns"], [1.0, 1.0, 1.0])
    assert main(["evaluate", str(out), "--episodes", "2"]) == 0
    assert "probe-chain: greedy return 1.00 over 2 episodes" in capsys.readouterr().out


def test_export_and_evaluate_refuse_bad_input(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--out", str(tmp_path / "x.npz")]) == 2
    assert "has no config.json" in capsys.readouterr().err
    bad = tmp_path / "bad.npz"
    bad.write_text("not a policy")
    assert main(["evaluate", str(bad)]) == 2
    assert "not a readable jaxrl_fast policy file" in capsys.readouterr().err
