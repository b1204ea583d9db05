"""How often a CartPole preset ends solved: many seeds, several base seeds, one program each.

    python benchmarks/solve_rate.py                   # `cartpole` and its old settings, 5 x 8 seeds (~5 min)
    python benchmarks/solve_rate.py --bases 0 1 --seeds 4

Writes `benchmarks/results/solve_rate/solve_rate.json` and `.md`. For each variant and base seed, one
`train` call runs `--seeds` seeds in one program (spread over the CPU cores); a seed counts as
solved when its final greedy return (mean of the preset's `eval_episodes` episodes, epsilon 0)
is at least 475, CartPole-v1's own threshold. Variants:

- `cartpole`: the default preset.
- `cartpole, 1-step settings`: the settings the default had before 3-step returns
  (`acrobot`'s, on CartPole-v1: 1-step returns, epsilon floor after 25% of 201k env steps).
"""

from __future__ import annotations

import os
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()
import numpy as np  # noqa: E402

from jaxrl_fast.run.train import train  # noqa: E402

SOLVED = 475.0
VARIANTS = {
    "cartpole": lambda: presets.get("cartpole"),
    "cartpole, 1-step settings": lambda: presets.get("acrobot").replace(
        env={"name": "CartPole-v1"}
    ),
}


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--seeds", type=int, default=8, help="seeds per program")
    parser.add_argument("--bases", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="base seeds")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    t0 = time.perf_counter()
    rows = []
    for name in args.variants:
        for base in args.bases:
            cfg = VARIANTS[name]().replace(num_seeds=args.seeds, seed=base)
            r = train(cfg, progress=False)
            returns = [float(x) for x in np.asarray(r.final_return)]
            rows.append(
                {
                    "variant": name,
                    "base_seed": base,
                    "env_steps_per_seed": cfg.total_env_steps,
                    "final_returns": returns,
                    "solved": sum(x >= SOLVED for x in returns),
                    "wall_s": r.wall_time_s,
                }
            )
            print(f"{name} base {base}: {rows[-1]['solved']}/{args.seeds} solved", flush=True)
    result = {
        "machine": machine(),
        "seeds": args.seeds,
        "bases": args.bases,
        "rows": rows,
        "wall_s": time.perf_counter() - t0,
    }
    write_results(os.path.join(args.out, "solve_rate"), result, render)


def render(r: dict) -> str:
    lines = [
        "# CartPole presets: how often the final greedy policy is solved",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/solve_rate.py --seeds {r['seeds']} --bases "
        f"{' '.join(map(str, r['bases']))}` in {r['wall_s']:.0f} s. Solved: final greedy return "
        f">= {SOLVED:.0f} (mean of 10 episodes, epsilon 0).",
        "",
        "| variant | env steps / seed | solved, all bases | per base seed | lowest final return |",
        "|---|---:|---:|---|---:|",
    ]
    variants = list(dict.fromkeys(row["variant"] for row in r["rows"]))
    for v in variants:
        rows = [row for row in r["rows"] if row["variant"] == v]
        solved = sum(row["solved"] for row in rows)
        total = sum(len(row["final_returns"]) for row in rows)
        per = ", ".join(f"{row['solved']}/{len(row['final_returns'])}" for row in rows)
        low = min(min(row["final_returns"]) for row in rows)
        lines.append(
            f"| `{v}` | {rows[0]['env_steps_per_seed']:,} | **{solved} of {total}** | {per} | "
            f"{low:.1f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
