"""The DQN family's training speed relative to DQN on MinAtar, measured side by side.

    python benchmarks/dqn_family_speed.py                    # ~15 min on 2 cores
    python benchmarks/dqn_family_speed.py --algorithms dqn qr-dqn --rounds 3

Writes `benchmarks/results/dqn_family/speed.{json,md}` (`--out`). Each algorithm is the program
`benchmarks/dqn_family_minatar.py` runs (its `jaxrl_fast.presets.dqn_family` change to the
`minatar-breakout` preset on Breakout-MinAtar, or the `rainbow-minatar` preset), with `--seeds`
seeds vmapped and a shorter budget: the 10,000-step prefill, then `--steps` training env steps per
seed. The algorithms take turns, round by round (`--rounds`, >= 3), each run a fresh compile, so
that the machine's drift (two runs of one program differ by up to 25% on this shared VM) falls on
every algorithm alike.

Per algorithm: the median over rounds of the training env-steps/s (all seeds together, after the
prefill) and of the compile seconds, and the median of the per-round ratios to DQN's (the DQN run
of the same round). The returns of these short runs are not reported: see
`results/dqn_family/minatar.md` for those. `qr-dqn-51` is QR-DQN with 51 quantiles instead of
200 (`VARIANTS`): how much of its time is the width of its head.

Also timed, alternating over the same rounds: QR-DQN's quantile Huber loss and its gradient at
the benchmark's shapes (`--seeds` seeds vmapped, the preset's batch of rows, 200 predicted and
200 target quantiles), computed as the library does (`distributional.quantile_huber`: sorted
targets and prefix sums) and over every pair (the `[rows, N, N']` form), each a compiled function called
`LOSS_CALLS` times.
"""

from __future__ import annotations

import os
import statistics
import time

import common
from common import machine, machine_line, write_results  # noqa: E402
from dqn_family_minatar import ALGORITHMS, config_for  # noqa: E402

from jaxrl_fast import parallel  # noqa: E402

parallel.use_cpu_cores()
import jax  # noqa: E402

from jaxrl_fast.run.train import train  # noqa: E402

DEFAULT = ("dqn", "c51", "qr-dqn", "qr-dqn-51", "iqn", "m-dqn", "hl-gauss", "noisy",
           "rainbow-minatar")  # fmt: skip
# rows that change one setting of an algorithm, to show where its time goes
VARIANTS = {"qr-dqn-51": ("qr-dqn", {"algo": {"distributional": {"num_quantiles": 51}}})}
LOSS_CALLS = 30


def pairwise_quantile_huber(theta, tau, target, kappa):
    """The quantile Huber loss over every (i, j) pair: `[B, N, N']` terms."""
    import jax.numpy as jnp

    u = target[:, None, :] - theta[:, :, None]
    huber = jnp.where(jnp.abs(u) <= kappa, 0.5 * u**2, kappa * (jnp.abs(u) - 0.5 * kappa))
    return jnp.sum(jnp.mean(jnp.abs(tau[:, :, None] - (u < 0)) * huber, axis=-1), axis=-1)


def loss_programs(seeds: int, rows: int, n: int = 200):
    """{form: (compiled value-and-grad over the seeds, its inputs)} for both loss forms."""
    import jax.numpy as jnp

    from jaxrl_fast.agent.distributional import quantile_huber, quantile_midpoints

    k1, k2 = jax.random.split(jax.random.key(0))
    theta = jax.random.normal(k1, (seeds, rows, n))
    target = 2.0 * jax.random.normal(k2, (seeds, rows, n))
    tau = jnp.broadcast_to(quantile_midpoints(n), (seeds, rows, n))
    out = {}
    for name, f in (("sorted", quantile_huber), ("pairwise", pairwise_quantile_huber)):

        def loss(x, t, g, f=f):
            return f(x, t, g, 1.0).mean()

        # compiled ahead of time: the `jax.clear_caches()` after each training run keeps it
        fn = jax.jit(jax.vmap(jax.value_and_grad(loss))).lower(theta, tau, target).compile()
        jax.block_until_ready(fn(theta, tau, target))
        out[name] = (fn, (theta, tau, target))
    return out


def time_loss(fn, args) -> float:
    """Milliseconds per call of `fn(*args)` over `LOSS_CALLS` calls."""
    t = time.perf_counter()
    for _ in range(LOSS_CALLS):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / LOSS_CALLS * 1e3


def main() -> None:
    parser = common.parser(__doc__, __file__, out=os.path.join(common.RESULTS, "dqn_family"))
    parser.add_argument("--algorithms", nargs="+", default=list(DEFAULT),
                        choices=[*ALGORITHMS, *VARIANTS])  # fmt: skip
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=16_000, help="training env steps per seed")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 3 or args.steps < 1_000 or "dqn" not in args.algorithms:
        parser.error("--rounds >= 3, --steps >= 1000, and dqn among --algorithms (the reference)")
    t0 = time.perf_counter()
    runs: dict[str, list[dict]] = {a: [] for a in args.algorithms}
    rows_per_batch = config_for("qr-dqn", args.game, 1, 20_000, 1).replay.batch_size
    programs = loss_programs(args.seeds, rows_per_batch)
    loss_ms: dict[str, list[float]] = {name: [] for name in programs}
    for k in range(args.rounds):
        for name, (fn, inputs) in programs.items():
            loss_ms[name].append(time_loss(fn, inputs))
        print(f"round {k + 1} quantile Huber loss + grad: "
              + ", ".join(f"{n} {v[-1]:.1f} ms" for n, v in loss_ms.items()), flush=True)  # fmt: skip
        for a in args.algorithms:
            base, change = VARIANTS.get(a, (a, {}))
            cfg = config_for(base, args.game, args.seeds, 10_000 + args.steps, 1).replace(**change)
            r = train(cfg.replace(eval_episodes=0), progress=False)
            runs[a].append(
                {"env_steps_per_s": r.train_env_steps_per_s, "compile_s": r.compile_time_s}
            )
            print(f"round {k + 1} {a}: {r.train_env_steps_per_s:,.0f} env-steps/s, "
                  f"compile {r.compile_time_s:.1f} s", flush=True)  # fmt: skip
            jax.clear_caches()
    rows = []
    for a, rs in runs.items():
        ratios = [
            x["env_steps_per_s"] / d["env_steps_per_s"]
            for x, d in zip(rs, runs["dqn"], strict=True)
        ]
        compile_ratios = [
            x["compile_s"] / d["compile_s"] for x, d in zip(rs, runs["dqn"], strict=True)
        ]
        rows.append(
            {
                "algorithm": a,
                "runs": rs,
                "env_steps_per_s": statistics.median(x["env_steps_per_s"] for x in rs),
                "compile_s": statistics.median(x["compile_s"] for x in rs),
                "speed_vs_dqn": statistics.median(ratios),
                "speed_vs_dqn_range": [min(ratios), max(ratios)],
                "compile_vs_dqn": statistics.median(compile_ratios),
            }
        )
    result = {
        "machine": machine(),
        "game": args.game,
        "seeds": args.seeds,
        "train_steps": args.steps,
        "rounds": args.rounds,
        "rows": rows,
        "loss_ms": loss_ms,
        "loss_rows": rows_per_batch,
        "wall_s": time.perf_counter() - t0,
    }
    write_results(os.path.join(args.out, "speed"), result, render)


def render(r: dict) -> str:
    lines = [
        "# The DQN family's training speed relative to DQN (MinAtar, side by side)",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/dqn_family_speed.py` in {r['wall_s'] / 60:.0f} min: "
        f"{r['game']}-MinAtar, {r['seeds']} seeds vmapped, the 10,000-step prefill then "
        f"{r['train_steps']:,} training env steps per seed; the algorithms take turns over "
        f"{r['rounds']} rounds, each run a fresh compile. env-steps/s counts all seeds, "
        "training phase only. Ratios: the median of the per-round ratios to that round's DQN "
        "run (range in brackets).",
        "",
        "| algorithm | env-steps/s | vs DQN [range] | compile s | compile vs DQN |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        lo, hi = row["speed_vs_dqn_range"]
        lines.append(
            f"| {row['algorithm']} | {row['env_steps_per_s']:,.0f} | "
            f"{row['speed_vs_dqn']:.2f}x [{lo:.2f}, {hi:.2f}] | {row['compile_s']:.1f} | "
            f"{row['compile_vs_dqn']:.2f}x |"
        )
    ms = {name: statistics.median(v) for name, v in r["loss_ms"].items()}
    lines += [
        "",
        "QR-DQN's quantile Huber loss and its gradient, "
        f"{r['seeds']} seeds x {r.get('loss_rows', 32)} rows x 200 x 200 quantiles, median over "
        "the rounds: "
        f"sorted (the library's) {ms['sorted']:.1f} ms, over every pair {ms['pairwise']:.1f} ms "
        f"({ms['pairwise'] / ms['sorted']:.0f}x).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
