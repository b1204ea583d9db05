"""The device check: what a short GPU slot should measure, in order of value, inside a budget.

    benchmarks/gpu_check.sh --out DIR                  # a fresh venv with CUDA jax, then this
    python benchmarks/gpu_check.py --out DIR           # where CUDA jax is installed already
    python benchmarks/gpu_check.py --budget 600 --sections cartpole,pong
    python benchmarks/gpu_check.py --tiny --out DIR    # CPU smoke sizes (tests/test_gpu_check.py)

Each section runs in its own process under its own time limit: its share of the budget (default
360 s after the install) plus whatever the sections before it left unused, so the whole check
ends within the budget even when a section hangs (envpool's GPU path, a host callback). The
plan, each section's limit and their sum, is printed first. `DIR/gpu_check.json` and `.md` are
written again after every section, so a check cut short keeps what it finished. Default DIR:
`benchmarks/results/gpu_check/` (`gpu-check-tiny.*` for `--tiny`).

Sections, most valuable first:

1. `envpool`: the envpool XLA tests (`tests/envs/test_envpool.py`) on this machine's default
   backend: whether envpool's XLA step runs inside the fused loop on a GPU at all.
2. `cartpole`: the `cartpole` preset's fused loop at 1, 64 and 1,024 seeds with
   `compute="auto"` (fp32 for its MLP; TF32 matmuls on Ampere+), and at 1,024 seeds with strict
   fp32 (`matmul_precision="highest"`) and bf16 (the old auto): env-steps/s and compile seconds.
3. `precision`: the Nature-CNN update step in fp32 (highest), TF32 (fp32 at "default"), bf16
   and fp16 at batch 32 and 256, no fallback (`benchmarks/precision.py`).
4. `pong`: `atari-pong` fused at 1 and 8 seeds vs the conventional loop at 1 seed, run twice
   (its S-seed rate is its 1-seed rate by construction: S runs in a row).
5. `per`: PER sample + priority update at 1e6 rows, ours vs flashbax, for CartPole and Atari
   rows; each buffer is freed before the next is made, and a cell is skipped, with the reason,
   when the device has not the memory for it.
6. `l3`: the L3 host tier's cost per read call inside the fused loop
   (`benchmarks/replay_loop.py`).

Speed runs skip the final evaluation. A section that cannot run here (no envpool, no flashbax)
says so and the others go on.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import re
import subprocess
import sys
import time

import common  # noqa: E402

HERE = common.HERE
ROOT = os.path.dirname(HERE)

# name -> (share of the budget in seconds at the default 360 s, what it measures)
PLAN = {
    "envpool": (45, "envpool's XLA tests on this backend"),
    "cartpole": (80, "CartPole DQN at 1 / 64 / 1,024 seeds: auto vs fp32-highest vs bf16"),
    "precision": (45, "Nature-CNN update: fp32 / TF32 / bf16 / fp16 at batch 32 and 256"),
    "pong": (100, "Pong fused at 1 and 8 seeds vs conventional at 1 seed, twice"),
    "per": (50, "PER at 1e6 rows, ours vs flashbax, buffers freed between cells"),
    "l3": (40, "L3 read cost inside the fused loop"),
}
DEFAULT_BUDGET_S = sum(share for share, _ in PLAN.values())  # 360


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sizes:
    cartpole_seeds: tuple[int, ...] = (1, 64, 1024)
    cartpole_prefill: int = 1_000
    cartpole_train: int = 20_000
    cartpole_compare: tuple[str, ...] = ("fp32 highest", "bf16")  # at the most seeds
    pong_seeds: tuple[int, ...] = (1, 8)
    pong_prefill: int = 2_048
    pong_train: int = 4_096
    pong_replay_rows: int | None = None
    pong_conventional_runs: int = 2  # the spread of one program's rate
    precision_batches: tuple[int, ...] = (32, 256)
    precision_steps: int = 20
    precision_repeats: int = 5
    per_obs: tuple[str, ...] = ("cartpole", "atari")
    per_rows: int = 1_000_000
    per_iters: int = 100
    per_repeats: int = 5
    l3_preset: str = "cartpole-cleanrl"
    l3_env_steps: int = 50_000
    l3_prefill: int | None = None
    l3_l2_rows: int = 10_000
    l3_repeats: int = 1
    l3_only: tuple[str, ...] | None = None  # None: every variant of replay_loop.l3_overhead
    precision_model: str = "Nature CNN"  # a prefix of a key of precision.MODELS
    # the XLA step's tests (rollouts, frame stacks, dedup), not the fused runs `pong` measures
    envpool_pytest: tuple[str, ...] = (
        "-k", "not fused and not resumed and not conventional and not host_pool",
    )  # fmt: skip


TINY = Sizes(
    cartpole_seeds=(2,),
    cartpole_compare=(),  # the precision section compiles bf16 already
    cartpole_prefill=200,
    cartpole_train=1_000,
    pong_seeds=(2,),
    pong_prefill=64,
    pong_train=128,
    pong_replay_rows=2_048,
    pong_conventional_runs=1,
    precision_batches=(8,),
    precision_steps=2,
    precision_repeats=1,
    per_obs=("cartpole",),
    per_rows=10_000,
    per_iters=5,
    per_repeats=2,
    l3_env_steps=2_400,
    l3_prefill=600,
    l3_l2_rows=1_000,
    l3_only=("L3 host, 4 MB blocks",),
    precision_model="MinAtar CNN",  # a smaller compile
    envpool_pytest=("-m", "not slow", "-k", "reset_steps_follow or wrong_size"),
)


class Skipped(Exception):
    """A section that cannot run here (its reason is recorded)."""


# ---- the sections (each runs in a child process: `--section NAME`) ----------------------------
def envpool(z: Sizes) -> dict:
    import importlib.util

    if importlib.util.find_spec("envpool") is None:
        raise Skipped("envpool is not installed (`pip install -e '.[atari]'`)")
    import contextlib
    import io

    import pytest

    args = ["-q", "-p", "no:cacheprovider", "-x", "tests/envs/test_envpool.py", *z.envpool_pytest]
    t, out = time.perf_counter(), io.StringIO()
    os.chdir(ROOT)  # this process is the section's own: pytest runs in it
    with contextlib.redirect_stdout(out):
        code = int(pytest.main(args))
    tail = out.getvalue().strip().splitlines()
    last = tail[-1] if tail else ""
    counts = {
        w: int(n) for n, w in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", last)
    }
    if code not in (0, 5):  # 5: nothing collected
        raise RuntimeError(f"pytest exited {code}: {' | '.join(tail[-5:])}")
    return {"returncode": code, "counts": counts, "wall_s": time.perf_counter() - t}


def cartpole(z: Sizes) -> dict:
    import gpu_sections

    rows = []
    variants = [("auto", {}, s) for s in z.cartpole_seeds]
    top = max(z.cartpole_seeds)
    compare = {
        "fp32 highest": {"compute": "fp32", "matmul_precision": "highest"},
        "bf16": {"compute": "bf16"},
    }
    variants += [(name, compare[name], top) for name in z.cartpole_compare]
    for name, precision, seeds in variants:
        print(f"  cartpole {name}, {seeds} seeds", flush=True)
        cfg = gpu_sections.short_config("cartpole", seeds, z.cartpole_prefill, z.cartpole_train)
        row = gpu_sections.fused_row(cfg.replace(precision=precision))
        rows.append({"variant": name, **row})
    return {
        "preset": "cartpole",
        "env": "CartPole-v1",
        "seeds": list(z.cartpole_seeds),
        "rows": rows,
    }


def precision(z: Sizes) -> dict:
    import precision as precision_bench

    model = next(m for m in precision_bench.MODELS if m.startswith(z.precision_model))
    variants = {
        "fp32 (highest)": {"compute": "fp32", "matmul_precision": "highest", "fallback": False},
        "TF32 (fp32, default)": {"compute": "fp32", "fallback": False},
        "bf16": {"compute": "bf16", "fallback": False},
        "fp16": {"compute": "fp16", "fallback": False},
    }
    tables = []
    for b in z.precision_batches:
        print(f"  {model}, batch {b}", flush=True)
        t = precision_bench.update_step(
            model, z.precision_steps, z.precision_repeats, batch=b, variants=variants
        )
        tables.append({**t, "batch": b, "model": model.rsplit(", batch", 1)[0]})
    return {"batches": list(z.precision_batches), "tables": tables}


def pong(z: Sizes) -> dict:
    import gpu_sections

    try:
        import envpool  # noqa: F401
    except Exception as e:
        raise Skipped(f"envpool cannot be imported: {type(e).__name__}: {e}") from e
    from jaxrl_fast.baseline import train_unfused

    def config(seeds):
        return gpu_sections.pong_config(seeds, z.pong_prefill, z.pong_train, z.pong_replay_rows)

    rows = []
    for s in z.pong_seeds:
        print(f"  atari-pong fused, {s} seeds", flush=True)
        rows.append({"loop": "fused", **gpu_sections.fused_row(config(s))})
    one = config(1)
    runs = []
    for k in range(z.pong_conventional_runs):
        print(f"  atari-pong conventional, 1 seed, run {k + 1}", flush=True)
        runs.append(train_unfused(one))
        gc.collect()
    for r in runs:
        row = gpu_sections.conventional_row([r], one.learning_starts)
        rows.append({"loop": "conventional", **row})
    conv = sorted(r["train_env_steps_per_s"] for r in rows if r["loop"] == "conventional")
    for row in rows:  # against the conventional loop's mean 1-seed rate
        row["train_speed_vs_conventional"] = row["train_env_steps_per_s"] / (sum(conv) / len(conv))
    return {"preset": "atari-pong", "seeds": list(z.pong_seeds), "rows": rows}


def per(z: Sizes) -> dict:
    import jax
    import numpy as np
    import replay as replay_bench
    from gpu_sections import flashbax_missing

    from jaxrl_fast.replay.memory import available_memory

    device = "gpu" if jax.default_backend() == "gpu" else "cpu"
    missing = flashbax_missing()
    cells = []
    for obs_name in z.per_obs:
        shape, dtype = replay_bench.OBS[obs_name]
        # obs and next obs per row, with room to spare: what a cell must find free
        need = 3 * z.per_rows * int(np.prod(shape)) * np.dtype(dtype).itemsize
        methods, fill_s, skipped = {}, {}, {}
        for impl in ("ours", "flashbax"):
            if impl == "flashbax" and missing:
                skipped[impl] = missing
                continue
            free, source = available_memory(jax.devices()[0])
            if free < need:
                skipped[impl] = (
                    f"needs about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free ({source})"
                )
                continue
            print(f"  {obs_name} rows, {z.per_rows:,}: {impl}", flush=True)
            if impl == "ours":
                timers, info = replay_bench.ours_timers(
                    z.per_rows, shape, dtype, z.per_iters, uniform=False, host=False
                )
            else:
                timers, info = replay_bench.flashbax_timers(
                    z.per_rows, shape, dtype, z.per_iters, device=device
                )
            fill_s[impl] = info[f"{impl}_fill_s"]
            methods.update(replay_bench.measure(timers, z.per_repeats))
            del timers, info  # this buffer is freed before the next is made
            gc.collect()
            jax.clear_caches()
        both = "flashbax_per" in methods and "ours_sum_tree" in methods
        cells.append(
            {
                "obs": obs_name,
                "capacity": z.per_rows,
                "batch": replay_bench.BATCH,
                "fill_s": fill_s,
                "skipped": skipped,
                "methods": methods,
                "flashbax_per_over_ours_sum_tree": replay_bench.ratio(
                    methods["flashbax_per"], methods["ours_sum_tree"]
                )
                if both
                else None,
                "ours_cumsum_over_ours_sum_tree": replay_bench.ratio(
                    methods["ours_cumsum"], methods["ours_sum_tree"]
                )
                if "ours_sum_tree" in methods
                else None,
            }
        )
    return {"flashbax_device": device, "flashbax_missing": missing, "cells": cells}


def l3(z: Sizes) -> dict:
    import gpu_sections

    return gpu_sections.l3_cost(
        z.l3_preset, z.l3_env_steps, z.l3_repeats, z.l3_l2_rows, z.l3_prefill, z.l3_only
    )


SECTIONS = {
    "envpool": envpool,
    "cartpole": cartpole,
    "precision": precision,
    "pong": pong,
    "per": per,
    "l3": l3,
}


def _run_section(name: str, tiny: bool, path: str) -> None:
    """The child's side: run one section and write `{status, result | reason}` to `path`."""
    import jax

    z = TINY if tiny else Sizes()
    try:
        rec = {"status": "ok", "result": SECTIONS[name](z)}
    except Skipped as e:
        rec = {"status": "skipped", "reason": str(e)}
    device = jax.devices()[0]
    rec["device"] = {
        "backend": jax.default_backend(),
        "device_kind": device.device_kind,
        "jax": jax.__version__,
    }
    with open(path, "w") as f:
        json.dump(rec, f)


# ---- the parent: budget, one process per section, results as they finish ---------------------
def limits(names, budget_s: float) -> dict[str, float]:
    """Each section's share of `budget_s`, in proportion to `PLAN` (they add up to it)."""
    total = sum(PLAN[n][0] for n in names)
    return {n: budget_s * PLAN[n][0] / total for n in names}


def run_check(names, budget_s: float, tiny: bool, out_dir: str) -> dict:
    from gpu_markdown import render_check

    shares = limits(names, budget_s)
    print(f"gpu_check: {len(names)} section(s) in at most {budget_s:.0f} s:", flush=True)
    for n in names:
        print(f"  {n:<10} {shares[n]:>5.0f} s  {PLAN[n][1]}", flush=True)
    print(f"  {'total':<10} {sum(shares.values()):>5.0f} s", flush=True)
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, "gpu-check-tiny" if tiny else "gpu_check")
    report = {
        "machine": common.machine(),
        # the device, as the first section's process saw it (this process never starts JAX,
        # which on a GPU would take 75% of its memory away from the sections)
        "backend": "unknown",
        "device_kind": "unknown",
        "jax": "unknown",
        "tiny": tiny,
        "budget_s": budget_s,
        "limits_s": shares,
        "sections": {},
    }
    t0, spare = time.perf_counter(), 0.0
    for k, name in enumerate(names, 1):
        limit = shares[name] + spare
        print(f"[{k}/{len(names)}] {name} (limit {limit:.0f} s)", flush=True)
        path = f"{stem}.{name}.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--section", name, "--to", path]
        t = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd + (["--tiny"] if tiny else []), cwd=ROOT, timeout=limit, text=True,
                stdout=sys.stdout, stderr=subprocess.PIPE,
            )  # fmt: skip
            if proc.returncode == 0 and os.path.exists(path):
                with open(path) as f:
                    rec = json.load(f)
            else:
                err = (proc.stderr or "").strip().splitlines()
                rec = {
                    "status": "error",
                    "error": " | ".join(err[-3:]) or f"exit {proc.returncode}",
                }
        except subprocess.TimeoutExpired:
            rec = {"status": "timeout", "error": f"stopped at its limit of {limit:.0f} s"}
        if os.path.exists(path):
            os.remove(path)
        if report["backend"] == "unknown" and "device" in rec:
            report.update(rec.pop("device"))
        rec.pop("device", None)
        rec["wall_s"], rec["limit_s"] = time.perf_counter() - t, limit
        spare = max(0.0, limit - rec["wall_s"])
        report["sections"][name] = rec
        report["benchmark_time_s"] = time.perf_counter() - t0
        common.write_results(stem, report, render_check)  # after every section
        print(f"  {name}: {rec['status']} in {rec['wall_s']:.1f} s", flush=True)
    print(f"wrote {stem}.json and {stem}.md", flush=True)
    return report


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--out", metavar="DIR", help="folder for the results (default: "
                   "benchmarks/results/gpu_check/)")  # fmt: skip
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                   help="seconds for all sections together (default %(default)s)")  # fmt: skip
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated subset of {','.join(SECTIONS)}")  # fmt: skip
    p.add_argument("--tiny", action="store_true", help="CPU smoke sizes (not results)")
    p.add_argument("--section", help=argparse.SUPPRESS)  # the child's: one section
    p.add_argument("--to", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.section:
        return _run_section(args.section, args.tiny, args.to)
    names = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in names if s not in SECTIONS]
    if unknown or not names:
        p.error(f"--sections: unknown {unknown}; choose from {','.join(SECTIONS)}")
    if args.budget <= 0:
        p.error(f"--budget {args.budget:g}: expected seconds > 0")
    out = args.out or os.path.join(HERE, "results", "gpu_check")
    run_check(names, args.budget, args.tiny, out)


if __name__ == "__main__":
    main()
