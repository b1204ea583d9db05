"""Replay tiers inside the fused loop: the cost of the L3 spill tier and what PER buys.

One command, one process, one machine:

    python benchmarks/replay_loop.py            # full (about 15-20 min on a 2-core CPU)
    python benchmarks/replay_loop.py --quick    # smoke run, about 2 min

Writes `benchmarks/results/replay_loop/replay_loop[-quick].json` and `.md`. What it measures:

1. **L3 overhead.** The fused loop's training-phase env-steps/s with L3 off vs L3 on (host RAM
   and memory-mapped files under a temporary `spill_dir`) at the same L2 size, with 10% of
   every batch served from L3 (issue target: at most 15% slower). Runs alternate between the
   variants and the median of the repeats is reported, so drift on the shared VM hits all
   variants alike. A variant with small (64 KiB) spill blocks shows the per-callback cost
   when the callbacks fire often. The L3 counters (blocks spilled, read calls, L2 hit rate)
   come from the run's own metrics.
2. **PER vs uniform** on `minatar-breakout`, 4 seeds each at the preset's budget: final greedy
   return per seed (issue target: PER reaches at least the uniform return).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import common
from common import machine, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()
from jaxrl_fast.run.train import train  # noqa: E402


def _run(config) -> dict:
    r = train(config, progress=False)
    rec = r.history[-1].get("replay", {})
    return {
        "train_env_steps_per_s": r.train_env_steps_per_s,
        "compile_time_s": r.compile_time_s,
        "run_time_s": r.run_time_s,
        "final_returns": [float(x) for x in r.final_return],
        "num_devices": r.num_devices,
        "replay": rec,
    }


def l3_overhead(
    name: str,
    steps: int,
    repeats: int,
    spill_dir: str,
    capacity: int | None = None,
    learning_starts: int | None = None,
    only: tuple[str, ...] | None = None,
) -> dict:
    """`only`: the variants to run, by label ("L3 off" always; smoke runs)."""
    preset = presets.get(name)
    starts = preset.learning_starts if learning_starts is None else learning_starts  # smoke runs
    base = preset.replace(
        total_env_steps=steps, learning_starts=starts, num_seeds=1, eval_episodes=1
    )
    if capacity is not None:  # an L2 the run overflows, so that L3 serves rows
        base = base.replace(replay=dict(capacity=capacity))
    cap = base.replay.capacity
    l3 = dict(l3_capacity=10 * cap, l3_share=0.1)
    variants = {
        "L3 off": base,
        "L3 host, 4 MB blocks": base.replace(replay=dict(l3="host", **l3)),
        "L3 disk, 4 MB blocks": base.replace(replay=dict(l3="disk", spill_dir=spill_dir, **l3)),
        "L3 host, 64 KiB blocks": base.replace(replay=dict(l3="host", spill_block=1 << 16, **l3)),
    }
    if only is not None:
        variants = {k: v for k, v in variants.items() if k == "L3 off" or k in only}
    runs: dict[str, list[dict]] = {k: [] for k in variants}
    for rep in range(repeats):
        for label, cfg in variants.items():
            print(f"  {name} {label} repeat {rep + 1}/{repeats}", flush=True)
            runs[label].append(_run(cfg))
    off = statistics.median(r["train_env_steps_per_s"] for r in runs["L3 off"])
    rows = []
    for label, rs in runs.items():
        sps = statistics.median(r["train_env_steps_per_s"] for r in rs)
        rows.append(
            {
                "variant": label,
                "train_env_steps_per_s_median": sps,
                "train_env_steps_per_s_runs": [r["train_env_steps_per_s"] for r in rs],
                "slowdown_vs_off": 1.0 - sps / off,
                "replay_counters": rs[-1]["replay"],
                "final_returns": rs[-1]["final_returns"],
            }
        )
    return {
        "preset": name,
        "env_steps": steps,
        "learning_starts": base.learning_starts,
        "l2_rows": cap,
        "l3_rows": 10 * cap,
        "l3_share": 0.1,
        "repeats": repeats,
        "rows": rows,
    }


def per_vs_uniform(steps: int | None, seeds: int) -> dict:
    base = presets.get("minatar-breakout").replace(num_seeds=seeds)
    if steps is not None:
        base = base.replace(total_env_steps=steps)
    out = {}
    for label, cfg in {
        "uniform": base,
        "PER (power, alpha 0.6, beta 0.4 -> 1)": base.replace(replay=dict(prioritised=True)),
    }.items():
        print(f"  minatar-breakout {label}, {seeds} seeds", flush=True)
        out[label] = _run(cfg)
    return {"preset": "minatar-breakout", "env_steps": base.total_env_steps, "runs": out}


def render(r: dict) -> str:
    m = r["machine"]
    q = " --quick" if r["quick"] else ""
    lines = [
        f"# Replay tiers in the fused loop{' (quick)' if r['quick'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; jax {m['jax']} on "
        f"{m['backend']}. Produced by `python benchmarks/replay_loop.py{q}` in "
        f"{r['benchmark_time_s']:.0f} s. CPU timings on a shared VM are noisy (±20% between "
        "runs): compare the variants of one table, which ran interleaved.",
        "",
        "## L3 spill tier: cost at the same L2 size, 10% of each batch from L3",
        "",
    ]
    lines += [
        "The L2 hit rate is the share of sampled rows served by L2: 10% of each batch is asked "
        "of L3, and rows drawn there that are not transitions (reset steps) are replaced by L2 "
        "rows. Slowdowns are of training-phase throughput (prefill excluded).",
        "",
    ]
    for t in r["l3_overhead"]:
        lines += [
            f"### `{t['preset']}`, 1 seed, {t['env_steps']:,} env steps, L2 {t['l2_rows']:,} rows,"
            f" L3 {t['l3_rows']:,} rows; median of {t['repeats']}",
            "",
            "| variant | training env-steps/s | slower than L3 off | blocks spilled | L3 read calls"
            " | L2 hit rate (last chunk) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in t["rows"]:
            c = row["replay_counters"]
            hit = c.get("l2_hit_rate")
            hit_s = "-" if hit is None else f"{100 * hit[0]:.1f}%"
            lines.append(
                f"| {row['variant']} | {row['train_env_steps_per_s_median']:,.0f} | "
                f"{100 * row['slowdown_vs_off']:+.1f}% | {c.get('blocks_spilled', '-')} | "
                f"{c.get('l3_read_calls', '-')} | {hit_s} |"
            )
        lines.append("")
    p = r["per_vs_uniform"]
    lines += [
        f"## PER vs uniform, `minatar-breakout`, {p['env_steps']:,} env steps per seed",
        "",
        "| replay | final greedy return per seed | mean | training env-steps/s (all seeds) |",
        "|---|---|---:|---:|",
    ]
    for label, run in p["runs"].items():
        f = run["final_returns"]
        lines.append(
            f"| {label} | {', '.join(f'{x:.1f}' for x in f)} | {statistics.mean(f):.2f} | "
            f"{run['train_env_steps_per_s']:,.0f} |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="smoke run (~2 min)")
    args = parser.parse_args()
    q = args.quick
    out: dict = {"machine": machine(), "quick": q}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jaxrl_fast-bench-spill-") as spill_dir:
        print("[1/2] L3 overhead", flush=True)
        out["l3_overhead"] = [
            l3_overhead("cartpole-cleanrl", 30_000 if q else 200_000, 1 if q else 3, spill_dir),
        ]
        if not q:
            out["l3_overhead"].append(
                l3_overhead("minatar-breakout", 50_000, 2, spill_dir, capacity=20_000)
            )
    print("[2/2] PER vs uniform", flush=True)
    out["per_vs_uniform"] = per_vs_uniform(30_000 if q else None, 2 if q else 4)
    out["benchmark_time_s"] = time.perf_counter() - t0
    stem = os.path.join(args.out, "replay_loop" + ("-quick" if q else ""))
    write_results(stem, out, render)


if __name__ == "__main__":
    main()
