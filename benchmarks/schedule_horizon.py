"""A preset trained shorter than its reference, its schedules over its own budget or the reference's.

    python benchmarks/schedule_horizon.py                       # pqn-minatar-breakout, 2 seeds
    python benchmarks/schedule_horizon.py --preset pqn-minatar-freeway --seeds 4

purejaxql trains PQN on MinAtar for 10M env steps and decays its epsilon (over 10%) and learning
rate (to 0) over that `TOTAL_TIMESTEPS_REAL`, also when `TOTAL_TIMESTEPS` is set shorter. The
`pqn-minatar-*` presets train 2M steps with the schedules over those 2M (epsilon over 200k, the
rate reaching 0 at 2M). This runs the preset at its budget twice, alternating, with
`ScheduleConfig.horizon` None (its own budget) and `--horizon` (the reference's): each seed's
greedy return at `--evals` evaluation points (`--episodes` episodes each) and at the end, the
mean with a 95% t-interval, and the wall time with compile.

Writes `benchmarks/results/schedule_horizon/<preset>.{json,md}` (`--out`).
"""

from __future__ import annotations

import os
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()
import jax  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from jaxrl_fast.run.train import train  # noqa: E402


def _divisor_near(n: int, target: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - target))


def run(preset: str, horizon: int | None, seeds: int, evals: int, episodes: int) -> dict:
    cfg = presets.get(preset)
    chunks = _divisor_near(cfg.num_blocks, evals)
    per_chunk = (cfg.total_env_steps - cfg.learning_starts) // chunks
    cfg = cfg.replace(num_seeds=seeds, num_chunks=chunks, eval_every=per_chunk,
                      eval_episodes=episodes, schedule={"horizon": horizon})  # fmt: skip
    curve: list[tuple[int, list[float]]] = []

    def on_chunk(rec: dict) -> None:
        if "eval_return" in rec:
            curve.append((int(rec["env_steps"]), [float(x) for x in rec["eval_return"]]))

    t0 = time.perf_counter()
    r = train(cfg, progress=False, on_chunk=on_chunk)
    wall = time.perf_counter() - t0
    jax.clear_caches()
    final = [float(x) for x in np.asarray(r.final_return)]
    return {"horizon": horizon, "curve": curve, "final": final, "wall_s": wall}


def _ci(xs: list[float]) -> tuple[float, float, float]:
    m = float(np.mean(xs))
    if len(xs) < 2:
        return m, m, m
    h = float(stats.t.ppf(0.975, len(xs) - 1) * stats.sem(xs))
    return m, m - h, m + h


def render(result: dict) -> str:
    lines = [
        f"# `{result['preset']}`: schedules over its budget or the reference's",
        "",
        f"`python benchmarks/schedule_horizon.py --preset {result['preset']} --seeds "
        f"{result['seeds']}` in {result['elapsed_s']:.0f} s. {machine_line(result['machine'])}.",
        "",
        f"{result['total_env_steps']:,} env steps a seed, {result['seeds']} seeds vmapped; greedy "
        f"returns over {result['episodes']} episodes per seed; the two horizons alternate over "
        f"{result['rounds']} round(s).",
        "",
        "| horizon | final greedy return per seed | mean [95% CI] | best evaluation (mean) | wall s |",
        "|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        m, lo, hi = _ci(row["final"])
        best = max(np.mean(v) for _, v in row["curve"]) if row["curve"] else float("nan")
        name = "the run's own" if row["horizon"] is None else f"{row['horizon']:,}"
        per_seed = ", ".join(f"{x:.2f}" for x in row["final"])
        lines.append(
            f"| {name} | {per_seed} | {m:.2f} [{lo:.2f}, {hi:.2f}] | {best:.2f} | "
            f"{row['wall_s']:.0f} |"
        )
    lines += ["", "Evaluation curves (env steps: mean over seeds):", ""]
    for row in result["rows"]:
        name = "own" if row["horizon"] is None else f"{row['horizon']:,}"
        pts = ", ".join(f"{s // 1000}k: {np.mean(v):.1f}" for s, v in row["curve"])
        lines.append(f"- horizon {name}: {pts}")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = common.parser(__doc__, __file__)
    p.add_argument("--preset", default="pqn-minatar-breakout")
    p.add_argument("--horizon", type=int, default=10_000_000, help="the reference's budget")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--evals", type=int, default=16)
    p.add_argument("--episodes", type=int, default=16)
    args = p.parse_args()
    t0 = time.perf_counter()
    rows = []
    for k in range(args.rounds):
        for horizon in (None, args.horizon):
            row = run(args.preset, horizon, args.seeds, args.evals, args.episodes)
            row["round"] = k
            rows.append(row)
            print(f"round {k + 1} horizon {horizon}: final {row['final']} "
                  f"({row['wall_s']:.0f} s)", flush=True)  # fmt: skip
    result = {
        "preset": args.preset,
        "seeds": args.seeds,
        "rounds": args.rounds,
        "episodes": args.episodes,
        "total_env_steps": presets.get(args.preset).total_env_steps,
        "rows": rows,
        "machine": machine(),
        "elapsed_s": time.perf_counter() - t0,
    }
    write_results(os.path.join(args.out, args.preset), result, render)


if __name__ == "__main__":
    main()
