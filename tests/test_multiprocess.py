"""Multi-process runs: `jaxrl-fast launch --local 2 -- train ...` on 127.0.0.1, one CPU device
per process, under hard timeouts (a stuck peer fails the test; the launcher SIGKILLs all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import tiny_config

from jaxrl_fast.parallel import distributed
from jaxrl_fast.parallel.launch import launch_local


def _launch(tmp_path, *extra, timeout=240):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(tiny_config(total_env_steps=480, num_chunks=2).to_dict()))
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    launch = ["launch", "--local", "2", "--timeout", str(timeout - 30), "--", "train"]
    train = ["--config", str(config), "--no-progress", "--no-cache", *extra]
    cmd = [sys.executable, "-m", "jaxrl_fast.cli", *launch, *train]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("compression", ["none", "onebit"])
def test_two_processes_data_parallel(tmp_path, compression):
    out = tmp_path / "out"
    proc = _launch(
        tmp_path, "--parallel.data", "2", "--parallel.compression", compression, "--out", str(out)
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_devices"] == 2  # one per process
    assert summary["config"]["parallel"]["data"] == 2
    assert len(summary["seeds"]) == 2
    assert all(s["final_return"] is not None for s in summary["seeds"])
    # process 0 alone reports; the other's lines come prefixed
    assert proc.stdout.count("wrote ") == 1
    assert "[p1]" not in proc.stdout


def test_a_failing_process_stops_the_launch(tmp_path):
    proc = _launch(tmp_path, "--parallel.data", "3", timeout=120)  # 2 devices for 3 replicas
    assert proc.returncode != 0
    assert "needs 3 devices" in proc.stdout + proc.stderr


def test_launch_and_initialize_refuse_bad_input():
    with pytest.raises(ValueError, match=r"launch runs `train` commands"):
        launch_local(2, ["plot", "runs"])
    with pytest.raises(ValueError, match=r"launch sets --process-id itself"):
        launch_local(2, ["--", "train", "--process-id", "0"])
    with pytest.raises(ValueError, match=r"launch --local=0"):
        launch_local(0, ["train"])
    with pytest.raises(ValueError, match=r"go together"):
        distributed.initialize("127.0.0.1:1234", None, None)
    with pytest.raises(ValueError, match=r"--process-id=2: expected an int in \[0, 1\]"):
        distributed.initialize("127.0.0.1:1234", 2, 2)
    with pytest.raises(ValueError, match=r"expected HOST:PORT"):
        distributed.initialize("localhost", 2, 0)
