"""Fixed-seed runs and their parameter hashes: the "numbers must not change" check of refactors.

Trains short fixed-seed runs that together touch every path of the fused loop (the feed-forward
and recurrent agents, MinAtar and Atari, demonstrations, a sweep, reward shaping, a curriculum,
the L3 spill tier, fp16 with loss scaling and the fp32 fallback, PER with n-step, the DQN
family's heads, losses and noisy layers, and a 2-device data-parallel run in a fresh process) and prints each run's per-seed `params_sha256`.

    python benchmarks/hashes.py                      # run all, write results/hashes/hashes.{json,md}
    python benchmarks/hashes.py --check              # run all, compare with the committed hashes
    python benchmarks/hashes.py --only cartpole,sweep      # (re)record only those runs

A refactor that claims "no behaviour change" must leave every hash bitwise equal on the same
machine (hashes depend on the CPU's vector width and on the jax version: compare on one machine).
Runs in about 4-6 minutes on 2 CPU cores; the Atari run is skipped without envpool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import common

HERE = common.HERE


def _configs() -> dict:
    """name -> (TrainConfig, train() keyword arguments)."""
    from jaxrl_fast import presets
    from jaxrl_fast.presets import dqn_family

    cartpole = presets.get("cartpole")
    short = dict(num_chunks=1, eval_episodes=2)
    family = cartpole.replace(total_env_steps=4_000, learning_starts=1_000, num_seeds=2, **short)
    return {
        "cartpole": (
            cartpole.replace(total_env_steps=12_000, learning_starts=2_000, num_seeds=2, **short),
            {},
        ),
        "minatar-breakout": (
            presets.get("minatar-breakout").replace(
                total_env_steps=6_000, learning_starts=2_000, replay={"capacity": 4_000}, **short
            ),
            {},
        ),
        "atari-pong": (
            presets.get("atari-pong").replace(
                env={"num_envs": 4},
                total_env_steps=1_200,
                learning_starts=400,
                replay={"capacity": 800, "batch_size": 8},
                num_seeds=2,
                **short,
            ),
            {},
        ),
        "memorychain-lstm": (
            presets.get("memorychain-lstm").replace(
                total_env_steps=4_000, learning_starts=800, num_seeds=2, **short
            ),
            {},
        ),
        "demo": (
            cartpole.replace(
                total_env_steps=6_000,
                learning_starts=1_000,
                demo={"source": "scripted", "steps": 2_000},
                **short,
            ),
            {},
        ),
        "sweep": (
            cartpole.replace(total_env_steps=6_000, learning_starts=1_000, **short),
            {"sweep": {"dqn.learning_rate": [1e-4, 1e-3]}, "seeds_per_point": 1},
        ),
        "shaped": (
            presets.get("mountaincar-shaped").replace(
                total_env_steps=6_000, learning_starts=1_000, **short
            ),
            {},
        ),
        "curriculum": (
            presets.get("mountaincar-curriculum").replace(
                total_env_steps=8_000, learning_starts=1_000, num_seeds=2, **short
            ),
            {},
        ),
        "variants": (
            presets.get("cartpole-poles").replace(
                total_env_steps=4_000, learning_starts=1_000, num_seeds=4, **short
            ),
            {},
        ),
        "l3-per-nstep": (
            cartpole.replace(
                total_env_steps=6_000,
                learning_starts=1_000,
                replay={
                    "capacity": 1_000,
                    "prioritised": True,
                    "n_step": 3,
                    "l3": "host",
                    "l3_capacity": 4_000,
                    "l3_share": 0.25,
                },
                num_seeds=2,
                **short,
            ),
            {},
        ),
        "fp16-fallback": (
            cartpole.replace(
                total_env_steps=6_000,
                learning_starts=1_000,
                precision={"compute": "fp16", "loss_scale": "dynamic", "fallback": True},
                **short,
            ),
            {},
        ),
        # the DQN family's heads, losses and noisy layers (their settings as the presets set
        # them: `dqn_family.apply`, so the same runs build before and after a config moves)
        **{
            name: (dqn_family.apply(name, family), {})
            for name in ("full-rainbow", "qr-dqn", "iqn", "hl-gauss", "m-dqn")
        },
    }


DATA_PARALLEL = """
import json, sys
from jaxrl_fast import parallel
parallel.use_cpu_cores(2)
from jaxrl_fast import presets
from jaxrl_fast.run.metrics import params_sha256
from jaxrl_fast.run.train import train
for name, par in (("data-parallel", {"data": 2}), ("data-parallel-onebit", {"data": 2, "compression": "onebit"}),
                  ("data-parallel-local-sgd", {"data": 2, "sync": "every:50"})):
    cfg = presets.get("cartpole").replace(total_env_steps=6_000, learning_starts=1_000, num_chunks=1,
                                          eval_episodes=2, parallel=par)
    r = train(cfg, progress=False)
    print("HASH", json.dumps({name: [params_sha256(r.runner.seeds.agent.params, s) for s in range(cfg.num_seeds)]}))
"""


def _run_all(only: set | None) -> dict:
    import jax

    from jaxrl_fast.run.metrics import params_sha256
    from jaxrl_fast.run.train import train

    out = {}
    for name, (cfg, kwargs) in _configs().items():
        if only and name not in only:
            continue
        if name == "atari-pong":
            try:
                import envpool  # noqa: F401
            except ImportError:
                print(f"{name}: skipped (envpool not installed)", flush=True)
                continue
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            if cfg.replay.l3 == "disk":
                cfg = cfg.replace(replay={"spill_dir": d})
            r = train(cfg, progress=False, **kwargs)
        result = getattr(r, "result", r)  # a sweep's TrainResult
        params = result.runner.seeds.agent.params
        seeds = jax.tree.leaves(params)[0].shape[0]
        out[name] = [params_sha256(params, s) for s in range(seeds)]
        print(
            f"{name}: {out[name][0][:16]}... ({seeds} seeds, {time.perf_counter() - t:.1f}s)",
            flush=True,
        )
    if not only or only & {"data-parallel", "data-parallel-onebit", "data-parallel-local-sgd"}:
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", DATA_PARALLEL], capture_output=True, text=True, timeout=900
        )
        if proc.returncode:
            raise RuntimeError(f"data-parallel run failed:\n{proc.stderr[-3000:]}")
        for line in proc.stdout.splitlines():
            if line.startswith("HASH "):
                out.update(json.loads(line[5:]))
        print(
            f"data-parallel: {out['data-parallel'][0][:16]}... ({time.perf_counter() - t:.1f}s)",
            flush=True,
        )
    return out


def render(result: dict) -> str:
    lines = [
        "# Fixed-seed parameter hashes",
        "",
        f"`python benchmarks/hashes.py` at commit {result['commit']}. {result['machine_line']}.",
        "",
        "| run | seed | params_sha256 |",
        "|---|---|---|",
    ]
    for name, hashes in result["hashes"].items():
        for s, h in enumerate(hashes):
            lines.append(f"| {name} | {s} | `{h}` |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = common.parser(__doc__, __file__)
    ap.add_argument("--only", default="", help="comma-separated run names")
    ap.add_argument("--check", action="store_true", help="compare with OUT/hashes.json")
    args = ap.parse_args()
    out = args.out

    only = {x for x in args.only.split(",") if x} or None
    hashes = _run_all(only)
    if args.check:
        with open(os.path.join(out, "hashes.json")) as f:
            want = json.load(f)["hashes"]
        bad = [n for n in hashes if n in want and hashes[n] != want[n]]
        missing = [n for n in want if n not in hashes and (not only or n in only)]
        for n in hashes:
            print(
                f"{n}: {'SAME' if n not in bad else 'DIFFERENT'}" + ("" if n in want else " (new)")
            )
        if missing:
            print("not run:", ", ".join(missing))
        return 1 if bad else 0
    if only and os.path.exists(os.path.join(out, "hashes.json")):  # update those runs only
        with open(os.path.join(out, "hashes.json")) as f:
            hashes = {**json.load(f)["hashes"], **hashes}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    )
    m = common.machine()
    result = {
        "commit": commit.stdout.strip(),
        "machine": m,
        "machine_line": common.machine_line(m),
        "hashes": hashes,
    }
    common.write_results(os.path.join(out, "hashes"), result, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
