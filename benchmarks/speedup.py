"""Fused vs conventional DQN on CartPole: throughput, compile time, seeds sweep, final returns.

One command, one process, one machine:

    python benchmarks/speedup.py            # full (about 15-25 min on a 2-core CPU)
    python benchmarks/speedup.py --quick    # reduced, about 2 min

Writes `benchmarks/results/speedup/speedup[-quick].json` and `.md`. What it measures:

1. `cartpole-cleanrl` (CleanRL/PureJaxRL hyperparameters), fused loop, 1 seed, full budget:
   compile time, env-steps/s, greedy final return.
2. The conventional loop (`jaxrl_fast.baseline.train_unfused`: Python loop, host numpy replay,
   one jitted update per training step), same config, fewer env steps (said in the table):
   env-steps/s. Ratio fused / conventional.
3. Fused, 8 seeds x full budget: final greedy return per seed (target: >= 475 on 7 of 8).
4. Fused aggregate throughput at 1, 8, 32, 128 seeds on a shorter budget per seed.
5. The default `cartpole` preset: wall time to a solved agent, compile included.
6. The update's FLOPs (XLA cost analysis) and this CPU's measured matmul rate at the update's
   main shape, giving a roofline in env-steps/s and the fraction the fused loop reaches.
"""

from __future__ import annotations

import json
import os
import time

import common
import jax
import jax.numpy as jnp
import numpy as np
from common import machine  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()  # one XLA device per core: multi-seed runs spread seeds over them
from jaxrl_fast.baseline import train_unfused  # noqa: E402
from jaxrl_fast.loop import make_train  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402

# Figures measured by an earlier session on this machine type (2-core CPU) running PureJaxRL's
# DQN with these hyperparameters; quoted for reference, not re-measured by this script.
PUREJAXRL_REFERENCE = {"sps_1_seed": 33_500, "sps_32_seeds": 54_000, "compile_s": 5.5}


def fused_run(config, devices=None) -> dict:
    r = train(config, progress=False, devices=devices)
    return {
        "num_seeds": config.num_seeds,
        "num_devices": r.num_devices,
        "env_steps_per_seed": r.env_steps,
        "compile_time_s": r.compile_time_s,
        "run_time_s": r.run_time_s,
        "env_steps_per_s": r.env_steps_per_s,
        "train_env_steps_per_s": r.train_env_steps_per_s,
        "wall_time_s": r.wall_time_s,
        "final_returns": [float(x) for x in r.final_return],
    }


def roofline(config) -> dict:
    """FLOPs of one update and the measured matmul rate at its largest layer's shape."""
    fns = make_train(config.replace(num_seeds=1))
    runner = jax.jit(fns.init)(jax.random.split(jax.random.key(0), 1))
    seed = jax.tree.map(lambda x: x[0] if x.ndim and x.shape[0] == 1 else x, runner.seeds)
    batch = fns.buffer.sample(seed.replay, jax.random.key(1))
    compiled = jax.jit(fns.agent.update).lower(seed.agent, batch).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = float(cost["flops"])
    b = config.replay.batch_size
    h = config.network.hidden_sizes
    x = jax.random.normal(jax.random.key(2), (b, h[0]))
    w = jax.random.normal(jax.random.key(3), (h[0], h[1]))
    n = 4000

    @jax.jit
    def loop(x):
        def body(c, _):
            return c + 1e-6 * jnp.sum(c @ w), None

        return jax.lax.scan(body, x, None, length=n)[0]

    jax.block_until_ready(loop(x))
    t = time.perf_counter()
    jax.block_until_ready(loop(x))
    per_matmul = (time.perf_counter() - t) / n
    matmul_gflops = 2 * b * h[0] * h[1] / per_matmul / 1e9
    updates_per_s = matmul_gflops * 1e9 / flops
    roof_sps = updates_per_s * config.train_frequency / config.updates_per_block
    return {
        "update_flops": flops,
        "matmul_gflops": matmul_gflops,
        "roofline_env_steps_per_s": roof_sps,
    }


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="reduced version (~2 min)")
    args = parser.parse_args()
    q = args.quick
    base = presets.get("cartpole-cleanrl")
    full_steps = 100_000 if q else 500_000
    baseline_steps = 20_000 if q else 60_000
    sweep_steps = 30_000 if q else 50_000
    sweep_seeds = (1, 8, 32) if q else (1, 8, 32, 128)
    eight_seeds = 2 if q else 8
    out: dict = {"machine": machine(), "quick": q, "purejaxrl_reference": PUREJAXRL_REFERENCE}
    t0 = time.perf_counter()

    print("[1/6] fused cartpole-cleanrl, 1 seed", flush=True)
    out["fused_1_seed"] = fused_run(base.replace(total_env_steps=full_steps, num_seeds=1))
    print("[2/6] conventional loop", flush=True)
    b = train_unfused(base, max_env_steps=baseline_steps)
    out["conventional"] = {
        "env_steps": b.env_steps,
        "compile_time_s": b.compile_time_s,
        "run_time_s": b.run_time_s,
        "env_steps_per_s": b.env_steps_per_s,
        "train_env_steps_per_s": b.train_env_steps_per_s,
        "final_return_at_its_budget": float(b.final_return),
    }
    # Training phase (after the prefill) on both sides: the part with updates, which dominates
    # a full run; whole-run ratios would favour whichever side ran the larger prefill share.
    out["speedup_1_seed"] = out["fused_1_seed"]["train_env_steps_per_s"] / b.train_env_steps_per_s
    out["speedup_1_seed_whole_run"] = out["fused_1_seed"]["env_steps_per_s"] / b.env_steps_per_s
    print(f"[3/6] fused cartpole-cleanrl, {eight_seeds} seeds x {full_steps}", flush=True)
    out["fused_8_seeds"] = fused_run(
        base.replace(total_env_steps=full_steps, num_seeds=eight_seeds)
    )
    print("[4/6] seeds sweep", flush=True)
    out["sweep"] = [
        fused_run(base.replace(total_env_steps=sweep_steps, num_seeds=s)) for s in sweep_seeds
    ]
    out["sweep_one_device"] = [
        fused_run(base.replace(total_env_steps=sweep_steps, num_seeds=s), devices=jax.devices()[:1])
        for s in sweep_seeds
        if s > 1 and len(jax.devices()) > 1
    ]
    print("[5/6] default preset to solved", flush=True)
    default = presets.get("cartpole")
    if q:
        default = default.replace(total_env_steps=150_000)
    out["default_preset"] = fused_run(default)
    print("[6/6] roofline", flush=True)
    out["roofline"] = roofline(base)
    out["roofline"]["fraction_reached_1_seed"] = (
        out["fused_1_seed"]["train_env_steps_per_s"] / out["roofline"]["roofline_env_steps_per_s"]
    )
    out["benchmark_time_s"] = time.perf_counter() - t0

    os.makedirs(args.out, exist_ok=True)
    name = "speedup-quick" if q else "speedup"
    with open(os.path.join(args.out, f"{name}.json"), "w") as f:
        json.dump(out, f, indent=2)
    with open(os.path.join(args.out, f"{name}.md"), "w") as f:
        f.write(render(out))
    print(render(out))


def render(r: dict) -> str:
    m = r["machine"]
    f1, conv, f8, roof = r["fused_1_seed"], r["conventional"], r["fused_8_seeds"], r["roofline"]
    ref = r["purejaxrl_reference"]
    solved8 = sum(x >= 475 for x in f8["final_returns"])
    lines = [
        f"# Fused vs conventional DQN, CartPole-v1{' (quick)' if r['quick'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; jax {m['jax']} on "
        f"{m['backend']}. Produced by `python benchmarks/speedup.py{' --quick' if r['quick'] else ''}`"
        f" in {r['benchmark_time_s']:.0f} s. CPU timings on a shared VM are noisy: compare ratios "
        "within this run.",
        "",
        "## cartpole-cleanrl (CleanRL / PureJaxRL hyperparameters), one seed",
        "",
        "| loop | env steps | compile s | run s | env-steps/s, whole run | env-steps/s, training "
        "phase | final greedy return |",
        "|---|---|---|---|---|---|---|",
        f"| fused (jaxrl_fast) | {f1['env_steps_per_seed']:,} | {f1['compile_time_s']:.2f} | "
        f"{f1['run_time_s']:.1f} | {f1['env_steps_per_s']:,.0f} | "
        f"{f1['train_env_steps_per_s']:,.0f} | {f1['final_returns'][0]:.1f} |",
        f"| conventional (`baseline.train_unfused`) | {conv['env_steps']:,} (fewer, to save time) | "
        f"{conv['compile_time_s']:.2f} | {conv['run_time_s']:.1f} | {conv['env_steps_per_s']:,.0f} | "
        f"{conv['train_env_steps_per_s']:,.0f} | "
        f"{conv['final_return_at_its_budget']:.1f} (at its shorter budget) |",
        "",
        f"**Speed-up, fused / conventional, 1 seed: {r['speedup_1_seed']:.1f}x** (training-phase "
        f"env-steps/s, after the 10k-step prefill; compile excluded for both). Whole-run ratio: "
        f"{r['speedup_1_seed_whole_run']:.1f}x.",
        "",
        f"Training-phase throughput (prefill excluded), 1 seed: {f1['train_env_steps_per_s']:,.0f} "
        f"env-steps/s. The update costs {roof['update_flops'] / 1e6:.1f} MFLOP (XLA cost analysis); "
        f"this CPU ran the update's main matmul at {roof['matmul_gflops']:.0f} GFLOP/s, so the "
        f"matmul roofline is {roof['roofline_env_steps_per_s']:,.0f} env-steps/s and the fused loop "
        f"reaches **{100 * roof['fraction_reached_1_seed']:.0f}%** of it.",
        "",
        f"Reference (PureJaxRL DQN, same hyperparameters, measured earlier on this machine type, "
        f"not in this run): {ref['sps_1_seed']:,} env-steps/s at 1 seed, {ref['sps_32_seeds']:,} at "
        f"32 seeds, {ref['compile_s']} s compile. This run: "
        f"{f1['env_steps_per_s'] / ref['sps_1_seed']:.2f}x at 1 seed, compile "
        f"{f1['compile_time_s']:.1f} s.",
        "",
        f"## {len(f8['final_returns'])} seeds x {f8['env_steps_per_seed']:,} env steps (one program)",
        "",
        "Final greedy return per seed: "
        + ", ".join(f"{x:.0f}" for x in f8["final_returns"])
        + f". Seeds >= 475: **{solved8} of {len(f8['final_returns'])}**. Aggregate "
        f"{f8['env_steps_per_s']:,.0f} env-steps/s on {f8['num_devices']} device(s), wall "
        f"{f8['wall_time_s']:.0f} s.",
        "",
        "## Seeds sweep (fused, aggregate throughput)",
        "",
        "| seeds | devices | env steps per seed | compile s | env-steps/s (all) | training-phase "
        "env-steps/s | mean final return |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in r["sweep"] + r["sweep_one_device"]:
        lines.append(
            f"| {s['num_seeds']} | {s['num_devices']} | {s['env_steps_per_seed']:,} | "
            f"{s['compile_time_s']:.2f} | "
            f"{s['env_steps_per_s']:,.0f} | {s['train_env_steps_per_s']:,.0f} | "
            f"{np.mean(s['final_returns']):.1f} |"
        )
    d = r["default_preset"]
    lines += [
        "",
        "Sweep runs use a short budget per seed, so their returns are not final scores. On a CPU"
        " each core is one XLA device (`parallel.use_cpu_cores`); seeds are spread over the "
        "devices that divide their number, with no communication.",
        "",
        "## Default `cartpole` preset",
        "",
        f"{d['env_steps_per_seed']:,} env steps, 1 seed: final greedy return "
        f"{d['final_returns'][0]:.1f} ({'solved' if d['final_returns'][0] >= 475 else 'not solved'}"
        f", threshold 475) in **{d['wall_time_s']:.1f} s wall, compile included** "
        f"(compile {d['compile_time_s']:.1f} s).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
