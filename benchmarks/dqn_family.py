"""The DQN family side by side: the same preset with each value head, one program per head.

    python benchmarks/dqn_family.py                       # CartPole, 4 seeds per head (~3 min)
    python benchmarks/dqn_family.py --seeds 8 --heads scalar c51

Writes `benchmarks/results/dqn_family/dqn_family.{json,md}`. For each head, one `train` call
runs `--seeds` seeds of the `cartpole` preset (its budget and hyperparameters, tuned for the
scalar head) in one program, spread over the CPU cores; the distributional heads get the support
`[0, 100]` (CartPole's discounted returns at gamma 0.99 stay below 100) and their own loss
(docs/distributional.md). Reported per head: each seed's final greedy return (the preset's
evaluation episodes, epsilon 0), the median, the number of seeds at >= 475 (CartPole-v1's solved
threshold), compile seconds and env-steps/s. The whole family on MinAtar:
`benchmarks/dqn_family_minatar.py`.
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
HEADS = ("scalar", "c51", "qr-dqn", "hl-gauss")


def config_for(head: str, seeds: int):
    """The `cartpole` preset with `head` (and its loss, and CartPole's support)."""
    cfg = presets.get("cartpole").replace(num_seeds=seeds)
    if head == "scalar":
        return cfg
    return cfg.replace(
        network={"head": head},
        algo={"distributional": {"v_min": 0.0, "v_max": 100.0, "num_quantiles": 32}},
        dqn={"loss": head},
    )


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--seeds", type=int, default=4, help="seeds per program")
    parser.add_argument("--heads", nargs="+", default=list(HEADS), choices=list(HEADS))
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    t0 = time.perf_counter()
    rows = []
    for head in args.heads:
        cfg = config_for(head, args.seeds)
        r = train(cfg, progress=False)
        returns = [float(x) for x in np.asarray(r.final_return)]
        rows.append(
            {
                "head": head,
                "env_steps_per_seed": cfg.total_env_steps,
                "final_returns": returns,
                "median_return": float(np.median(returns)),
                "solved": sum(x >= SOLVED for x in returns),
                "compile_s": r.compile_time_s,
                "env_steps_per_s": r.train_env_steps_per_s,
                "wall_s": r.wall_time_s,
            }
        )
        print(f"{head}: median {rows[-1]['median_return']:.1f}, {rows[-1]['solved']} solved")
    result = {"machine": machine(), "seeds": args.seeds, "rows": rows}
    result["wall_s"] = time.perf_counter() - t0
    write_results(os.path.join(args.out, "dqn_family"), result, render)


def render(r: dict) -> str:
    lines = [
        "# The DQN family on CartPole: one preset, each value head",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/dqn_family.py` in {r['wall_s']:.0f} s: the `cartpole` "
        f"preset, {r['seeds']} seeds per head in one program; distributional heads on the support "
        "[0, 100] with their own loss (QR-DQN: 32 quantiles). The preset's hyperparameters were "
        "tuned for the scalar head.",
        "",
        "| head | env steps per seed | final greedy returns | median | solved (>= 475) "
        "| compile s | env-steps/s (training) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        returns = ", ".join(f"{x:.0f}" for x in row["final_returns"])
        lines.append(
            f"| {row['head']} | {row['env_steps_per_seed']:,} | {returns} | "
            f"{row['median_return']:.1f} | {row['solved']}/{len(row['final_returns'])} | "
            f"{row['compile_s']:.1f} | {row['env_steps_per_s']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
