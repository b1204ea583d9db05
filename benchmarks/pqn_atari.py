"""PQN on Atari Pong in the fused loop beside DQN: 2 seeds vmapped over one envpool pool each.

    python benchmarks/pqn_atari.py                       # ~15 min on 2 cores
    python benchmarks/pqn_atari.py --steps 16384 --rounds 3

Writes `benchmarks/results/pqn_atari/pqn_atari.{json,md}` (`--out`). Two programs, taking turns
over `--rounds` rounds, each a fresh compile: `pqn-atari-pong` (the rollout learner with
purejaxql's Atari settings: 128 envs a seed x 32-step rollouts, 2 epochs of 32 minibatches, the
Nature torso with LayerNorm) and `atari-pong` (the library's DQN preset: 8 envs a seed, replay,
the Nature torso), each for `--steps` env steps a seed (DQN: after a `--prefill` of random
steps, which its speed leaves out). A CPU-sized budget: what it shows is that PQN's path runs
end to end on envpool with vmapped seeds (one pool of seeds x envs, stepped once per iteration)
and what an env step costs in each program, not a learned Pong player (the returns start at
-21). Reported per program: compile seconds, training env-steps/s (all seeds; medians over the
rounds and the median of PQN's per-round ratio to DQN's), the last round's greedy returns (1
episode a seed, epsilon 0.05 as the presets evaluate) and last chunk's loss.
"""

from __future__ import annotations

import os
import statistics
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()
import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxrl_fast.run.train import train  # noqa: E402


def config(name: str, seeds: int, steps: int, prefill: int):
    cfg = presets.get(name)
    f, e = cfg.train_frequency, cfg.env.num_envs
    starts = 0 if not cfg.replays else max(2 * e, prefill // e * e)
    return cfg.replace(
        num_seeds=seeds,
        learning_starts=starts,
        total_env_steps=starts + max(1, (steps - starts) // f) * f,
        eval_episodes=1,
        num_chunks=None,
    )


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8_192, help="env steps per seed")
    parser.add_argument("--prefill", type=int, default=2_000, help="DQN's learning_starts")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error("--rounds >= 3: the programs take turns")
    t0 = time.perf_counter()
    names = ("atari-pong", "pqn-atari-pong")
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for k in range(args.rounds):
        for name in names:
            cfg = config(name, args.seeds, args.steps, args.prefill)
            r = train(cfg, progress=False)
            runs[name].append({
                "compile_s": r.compile_time_s,
                "env_steps_per_s": r.train_env_steps_per_s,
                "env_steps_per_seed": cfg.total_env_steps,
                "learning_starts": cfg.learning_starts,
                "final_returns": [float(x) for x in np.asarray(r.final_return)],
                "last_loss": [float(x) for x in np.asarray(r.history[-1]["loss"])],
            })  # fmt: skip
            print(f"round {k + 1} {name}: {r.train_env_steps_per_s:,.0f} env-steps/s, compile "
                  f"{r.compile_time_s:.1f} s", flush=True)  # fmt: skip
            jax.clear_caches()
    rows = []
    for name, rs in runs.items():
        ratios = [x["env_steps_per_s"] / d["env_steps_per_s"]
                  for x, d in zip(rs, runs["atari-pong"], strict=True)]  # fmt: skip
        rows.append({
            "preset": name, "runs": rs, "seeds": args.seeds,
            "env_steps_per_seed": rs[-1]["env_steps_per_seed"],
            "learning_starts": rs[-1]["learning_starts"],
            "compile_s": statistics.median(x["compile_s"] for x in rs),
            "env_steps_per_s": statistics.median(x["env_steps_per_s"] for x in rs),
            "speed_vs_dqn": statistics.median(ratios),
            "speed_vs_dqn_range": [min(ratios), max(ratios)],
            "final_returns": rs[-1]["final_returns"], "last_loss": rs[-1]["last_loss"],
        })  # fmt: skip
    result = {"machine": machine(), "rounds": args.rounds, "rows": rows,
              "wall_s": time.perf_counter() - t0}  # fmt: skip
    write_results(os.path.join(args.out, "pqn_atari"), result, render)


def render(r: dict) -> str:
    lines = [
        "# PQN on Atari Pong in the fused loop, beside DQN",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/pqn_atari.py` in {r['wall_s'] / 60:.0f} min: the two "
        f"programs taking turns over {r['rounds']} rounds, each a fresh compile; seeds vmapped "
        "over one envpool pool. A CPU-sized budget: the returns show the path runs, not a "
        "learned player (Pong's returns start at -21).",
        "",
        "| preset | seeds | env steps a seed (prefill) | compile s | env-steps/s (training) | "
        "vs DQN [range] | last round's greedy returns | last chunk's loss |",
        "|---|---:|---|---:|---:|---:|---|---|",
    ]
    for row in r["rows"]:
        lo, hi = row["speed_vs_dqn_range"]
        lines.append(
            f"| `{row['preset']}` | {row['seeds']} | {row['env_steps_per_seed']:,} "
            f"({row['learning_starts']:,}) | {row['compile_s']:.1f} | "
            f"{row['env_steps_per_s']:,.0f} | {row['speed_vs_dqn']:.2f}x [{lo:.2f}, {hi:.2f}] | "
            f"{', '.join(f'{x:.0f}' for x in row['final_returns'])} | "
            f"{', '.join(f'{x:.3g}' for x in row['last_loss'])} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
