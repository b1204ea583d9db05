"""Measure (e) of `xla_report`: the host work of the conventional loop (`baseline.train_unfused`)
per env step, counted from its code and the config, against the fused loop's."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrl_fast.config import TrainConfig


def unfused_totals(config: TrainConfig, spec: Any, blocks: int) -> dict[str, int]:
    """The host work `baseline.train_unfused` does in its loop (prefill + `blocks` blocks),
    counted from its code: compiled calls, blocking device->host reads, bytes each way.

    A gymnax env: each collect step calls the compiled `act` and `env.step` (2 dispatches, the
    collect index an int32 sent to the device) and makes one `jax.device_get` of action,
    next_obs, reward, done, terminated, reset and episode_return (a host sync); each update
    sends a host-sampled `Batch` (obs, next_obs, and five 4-byte fields per row) with one
    compiled call; a target update is one more call. An envpool env steps on the host instead:
    `np.asarray(action)` (a sync), the observations sent back with the next `act`.
    """
    e, b = config.env.num_envs, config.replay.batch_size
    obs = int(np.prod(spec.obs_shape)) * np.dtype(spec.obs_dtype).itemsize
    steps = config.prefill_steps + blocks * config.collect_steps_per_block
    updates = blocks * config.updates_per_block
    targets = blocks // config.target_period_blocks
    pool = not spec.seed_vmappable  # one pool of host-stepped envs (envpool)
    return {
        "collect_steps": steps,
        "updates": updates,
        "target_updates": targets,
        "compiled_calls": steps * (1 if pool else 2) + updates + targets,
        "host_syncs": steps * (2 if pool else 1),
        "device_to_host_bytes": steps * e * (8 if pool else 4 + obs + 4 + 3 + 4),
        "host_to_device_transfers": steps * (2 if pool else 1) + updates,
        "host_to_device_bytes": steps * (4 + (e * obs if pool else 0))
        + updates * b * (2 * obs + 20),
        "host_replay_copy_bytes": steps * e * (2 * obs + 9) + updates * b * (2 * obs + 9),
    }


def unfused_report(config: TrainConfig, spec: Any, metrics_bytes: int) -> dict[str, Any]:
    """(e) per env step: the conventional loop (steady state, one block) vs the fused one."""
    period = config.target_period_blocks  # blocks with exactly one target update
    some, none = unfused_totals(config, spec, period), unfused_totals(config, spec, 0)
    per_step = {k: (some[k] - none[k]) / (period * config.train_frequency) for k in some}
    chunk_steps = config.blocks_per_chunk * config.train_frequency
    fused = {
        "compiled_calls": 1 / chunk_steps,  # one run_chunk per chunk
        "host_syncs": 1 / chunk_steps,  # the shell's jax.device_get of ChunkMetrics
        "device_to_host_bytes": metrics_bytes / chunk_steps,
        "host_to_device_transfers": 0.0,
        "host_to_device_bytes": 0.0,
        "host_replay_copy_bytes": 0.0,
    }
    keys = list(fused)
    return {
        "per_env_step": {"unfused": {k: per_step[k] for k in keys}, "fused": fused},
        "ratio_unfused_to_fused": {k: (per_step[k] / fused[k] if fused[k] else None) for k in keys},
        "method": "counted from baseline/'s code and the config "
        "(tests/xla_report/test_xla_report.py checks the counts against an instrumented "
        "train_unfused run); fused: one run_chunk call and one device_get of ChunkMetrics "
        "per chunk of blocks_per_chunk blocks",
    }
