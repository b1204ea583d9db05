"""The runs `benchmarks/gpu_check.py`'s sections share: a preset shrunk to a budget, one fused
run's figures, the conventional loop's rows, Pong's config, whether flashbax is there, and the L3
tier's cost per read call."""

from __future__ import annotations

import importlib.util
import tempfile

import replay_loop as replay_loop_bench  # noqa: E402

from jaxrl_fast import presets  # noqa: E402
from jaxrl_fast.train import train  # noqa: E402


def short_config(name: str, seeds: int, prefill: int, train_steps: int):
    """`name`'s preset with `seeds` seeds, about `prefill` + `train_steps` env steps per seed
    (rounded to the preset's env batch and blocks) and no final evaluation."""
    cfg = presets.get(name)
    e, f = cfg.env.num_envs, cfg.train_frequency
    learning_starts = max(2 * e, prefill // e * e, -(-cfg.replay.batch_size // e) * e)
    return cfg.replace(
        num_seeds=seeds,
        learning_starts=learning_starts,
        total_env_steps=learning_starts + max(1, train_steps // f) * f,
        eval_episodes=0,
        num_chunks=None,
    )


def fused_row(cfg) -> dict:
    """One fused `train` run's figures (no final evaluation in `short_config`'s runs)."""
    r = train(cfg, progress=False)
    return {
        "num_seeds": cfg.num_seeds,
        "num_devices": r.num_devices,
        "env_steps_per_seed": r.env_steps,
        "compile_s": r.compile_time_s,
        "run_s": r.run_time_s,
        "env_steps_per_s": r.env_steps_per_s,
        "train_env_steps_per_s": r.train_env_steps_per_s,
    }


def pong_config(seeds: int, prefill: int, train_steps: int, replay_rows: int | None):
    """`atari-pong` shrunk as `short_config` does; `replay_rows` None keeps the preset's."""
    cfg = short_config("atari-pong", seeds, prefill, train_steps)
    if replay_rows is not None:
        cfg = cfg.replace(replay=dict(capacity=replay_rows))
    return cfg


def conventional_row(runs, learning_starts: int) -> dict:
    """Aggregate one-seed `train_unfused` runs in a row (the same run repeated, where its rate is
    taken as every seed's) as one S-seed row."""
    run_s = sum(r.run_time_s for r in runs)
    train_s = sum(r.run_time_s - r.prefill_time_s for r in runs)
    return {
        "num_seeds": len(runs),
        "num_devices": 1,
        "env_steps_per_seed": runs[0].env_steps,
        "compile_s": sum(r.compile_time_s for r in runs) / len(runs),  # per run
        "run_s": run_s,
        "env_steps_per_s": sum(r.env_steps for r in runs) / max(run_s, 1e-9),
        "train_env_steps_per_s": sum(r.env_steps - learning_starts for r in runs)
        / max(train_s, 1e-9),
    }


def flashbax_missing() -> str | None:
    """Why flashbax cannot be compared here (None when it can): it is the `bench` extra."""
    if importlib.util.find_spec("flashbax") is None:
        return "flashbax is not installed (pip install -e '.[bench]')"
    try:
        import flashbax  # noqa: F401
    except Exception as e:
        return f"flashbax cannot be imported: {type(e).__name__}: {e}"
    return None


def l3_cost(
    preset: str,
    env_steps: int,
    repeats: int,
    l2_rows: int,
    prefill: int | None,
    only: tuple[str, ...] | None = None,
) -> dict:
    """`replay_loop.l3_overhead` (L3 off / host / disk; `only` some), with the extra
    milliseconds per L3 read call that each variant's slowdown implies (spills included)."""
    with tempfile.TemporaryDirectory(prefix="jaxrl_fast-gpu-spill-") as spill_dir:
        t = replay_loop_bench.l3_overhead(
            preset,
            env_steps,
            repeats,
            spill_dir,
            capacity=l2_rows,
            learning_starts=prefill,
            only=only,
        )
    train_steps = env_steps - t["learning_starts"]
    off = next(r for r in t["rows"] if r["variant"] == "L3 off")
    off_s = train_steps / off["train_env_steps_per_s_median"]
    for row in t["rows"]:
        calls = row["replay_counters"].get("l3_read_calls")
        extra_s = train_steps / row["train_env_steps_per_s_median"] - off_s
        row["extra_ms_per_l3_read_call"] = 1e3 * extra_s / calls if calls else None
    return t
