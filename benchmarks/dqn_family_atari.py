"""Rainbow on Atari Pong in the fused loop: 2 seeds vmapped over one envpool pool, end to end.

    python benchmarks/dqn_family_atari.py                 # rainbow-atari-pong and atari-pong
    python benchmarks/dqn_family_atari.py --steps 60000 --presets full-rainbow-atari-pong

Writes `benchmarks/results/dqn_family/atari.{json,md}` (`--out`). Each preset runs `--seeds`
seeds (one envpool pool of seeds x 8 emulators, stepped once per iteration) for `--steps` env
steps per seed, a CPU-sized budget (the presets' 400k, and Dopamine's 200M frames, are far
longer): what it shows is that the path runs end to end (C51 + PER + 3-step returns on the
Nature torso, frame-deduplicated replay) and what each step costs beside DQN on the same torso,
not a learned Pong player. Reported: compile seconds, training env-steps/s, the final greedy
return per seed (`--episodes` episodes, epsilon 0.05 as the presets evaluate) and the mean loss
of the last chunk.
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

PRESETS = ("atari-pong", "rainbow-atari-pong")


def main() -> None:
    parser = common.parser(__doc__, __file__, out=os.path.join(common.RESULTS, "dqn_family"))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40_000, help="env steps per seed")
    parser.add_argument("--prefill", type=int, default=8_000, help="learning_starts")
    parser.add_argument("--episodes", type=int, default=1, help="evaluation episodes per seed")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--note", default="", help="a sentence for the results (conditions)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    rows = []
    for name in args.presets:
        cfg = presets.get(name)
        f = cfg.train_frequency
        prefill = max(cfg.env.num_envs, args.prefill // cfg.env.num_envs * cfg.env.num_envs)
        cfg = cfg.replace(
            num_seeds=args.seeds,
            learning_starts=prefill,
            total_env_steps=prefill + max(1, (args.steps - prefill) // f) * f,
            eval_episodes=args.episodes,
            num_chunks=None,
        )
        r = train(cfg, progress=False)
        rows.append(
            {
                "preset": name,
                "seeds": args.seeds,
                "env_steps_per_seed": cfg.total_env_steps,
                "learning_starts": prefill,
                "compile_s": r.compile_time_s,
                "env_steps_per_s": r.train_env_steps_per_s,
                "wall_s": r.wall_time_s,
                "final_returns": [float(x) for x in np.asarray(r.final_return)],
                "last_loss": [float(x) for x in np.asarray(r.history[-1]["loss"])]
                if r.history and "loss" in r.history[-1]
                else None,
            }
        )
        print(f"{name}: {rows[-1]['env_steps_per_s']:,.0f} env-steps/s", flush=True)
    dqn = next((row for row in rows if row["preset"] == "atari-pong"), None)
    for row in rows:
        row["speed_vs_dqn"] = row["env_steps_per_s"] / dqn["env_steps_per_s"] if dqn else None
    result = {"machine": machine(), "rows": rows, "wall_s": time.perf_counter() - t0}
    if args.note:
        result["note"] = args.note
    write_results(os.path.join(args.out, "atari"), result, render)


def render(r: dict) -> str:
    lines = [
        "# Rainbow on Atari Pong in the fused loop",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/dqn_family_atari.py` in {r['wall_s'] / 60:.0f} min. "
        "Seeds vmapped over one envpool pool; a CPU-sized budget, so the returns show the path "
        "runs, not a learned player (Pong's returns start at -21)."
        + (f" {r['note']}" if r.get("note") else ""),
        "",
        "| preset | seeds | env steps per seed (prefill) | compile s | env-steps/s (training) "
        "| vs DQN | final greedy returns | last chunk's loss |",
        "|---|---:|---|---:|---:|---:|---|---|",
    ]
    for row in r["rows"]:
        returns = ", ".join(f"{x:.0f}" for x in row["final_returns"])
        loss = (
            "n/a" if row["last_loss"] is None else ", ".join(f"{x:.3g}" for x in row["last_loss"])
        )
        vs = "n/a" if row["speed_vs_dqn"] is None else f"{row['speed_vs_dqn']:.2f}x"
        lines.append(
            f"| `{row['preset']}` | {row['seeds']} | {row['env_steps_per_seed']:,} "
            f"({row['learning_starts']:,}) | {row['compile_s']:.1f} | "
            f"{row['env_steps_per_s']:,.0f} | {vs} | {returns} | {loss} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
