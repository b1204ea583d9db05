"""The launcher's device per process, without a GPU: `CUDA_VISIBLE_DEVICES` and a stand-in
`nvidia-smi` on PATH give the GPUs a machine would show."""

from __future__ import annotations

import os
import stat

import pytest

from jaxrl_fast.parallel.launch import launch_local, process_envs, visible_gpus


def _fake_smi(tmp_path, indices) -> dict:
    """An environment whose PATH holds an `nvidia-smi` listing GPUs `indices`."""
    smi = tmp_path / "nvidia-smi"
    lines = "\n".join(str(i) for i in indices)
    smi.write_text(f"#!/bin/sh\nprintf '{lines}\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env = {
        k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "JAX_PLATFORMS")
    }
    return {**env, "PATH": f"{tmp_path}{os.pathsep}{env.get('PATH', '')}"}


def test_each_process_gets_its_own_gpu(tmp_path):
    env = _fake_smi(tmp_path, [0, 1, 2, 3])
    assert visible_gpus(env) == ["0", "1", "2", "3"]
    envs = process_envs(2, env)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1"]
    assert all("JAX_PLATFORMS" not in e for e in envs)
    # CUDA_VISIBLE_DEVICES, where set, is what the processes may use (in its order)
    envs = process_envs(2, {**env, "CUDA_VISIBLE_DEVICES": "3,1"})
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["3", "1"]


def test_fewer_gpus_than_processes_is_refused_naming_the_fixes(tmp_path):
    env = _fake_smi(tmp_path, [0])
    with pytest.raises(ValueError, match=r"shows 1 GPU\(s\) \(0\).*Use --local 1.*--cpu"):
        process_envs(2, env)
    with pytest.raises(ValueError, match="--local 1"):  # before any process starts
        launch_local(2, ["train"], env=env)
    # --cpu: every process on the CPU, whatever the GPUs
    envs = process_envs(2, env, cpu=True)
    assert [e["JAX_PLATFORMS"] for e in envs] == ["cpu", "cpu"]
    assert all("CUDA_VISIBLE_DEVICES" not in e for e in envs)


def test_no_gpu_leaves_the_environment_as_it_is(tmp_path):
    env = _fake_smi(tmp_path, [])
    assert visible_gpus(env) == []
    assert process_envs(3, env) == [env, env, env]
    gpus = _fake_smi(tmp_path, [0, 1])
    assert visible_gpus({**gpus, "JAX_PLATFORMS": "cpu"}) == []  # the CPU was asked for
    assert visible_gpus({**gpus, "CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_gpus({**gpus, "CUDA_VISIBLE_DEVICES": "-1"}) == []
    no_smi = {k: v for k, v in env.items() if k != "PATH"} | {"PATH": str(tmp_path / "none")}
    assert visible_gpus(no_smi) == []
