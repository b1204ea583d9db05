"""Self-play in Connect Four: the learner's win rate against a random player over training, with
and without an opponent pool, and Elo tables of the pools and of the final learners.

Writes `benchmarks/results/selfplay/selfplay[-quick].{json,md}`. Rows (one DQN config, `SEEDS`
seeds vmapped, the same env steps), one after the other in one process:

- **random opponent**: the env's own opponent, a random legal player, every game;
- **pool, <sampling>**: self-play (`SelfPlayConfig`): a pool of `POOL` members (the random
  player and snapshots of the learner every `ADD_EVERY` updates), drawn per game by the row's
  sampling rule.

Per row: the evaluation return against the random player during training (`eval_every`,
`EVAL_GAMES` games a seed: wins minus losses); at the end, each seed's wins, draws and losses in
`FINAL_GAMES` games against the random player (`selfplay.make_match`), the pool's Elo table
(seed 0, `selfplay.report`), and an Elo table of the rows' final learners (seed 0 of each) and
the random player in one round robin. Run time: about 15 minutes (`--quick`: 1).
"""

from __future__ import annotations

import time

import common  # noqa: F401
import jax  # noqa: E402
import numpy as np  # noqa: E402
from common import machine, machine_line, parser, stem, write_results

from jaxrl_fast import presets  # noqa: E402
from jaxrl_fast.config import TrainConfig  # noqa: E402
from jaxrl_fast.envs import make_env  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402
from jaxrl_fast.trained import selfplay  # noqa: E402

ENV = "pgx:connect_four"
SEEDS = 2
POOL, ADD_EVERY = 8, 2_500
EVAL_GAMES, FINAL_GAMES, ROUND_ROBIN_GAMES = 100, 1_000, 200
STEPS, QUICK_STEPS = 648_000, 24_000  # 40,000 and 1,000 blocks after the prefill (8,000)
ROWS = (("random opponent", None), ("pool, uniform", "uniform"), ("pool, dynamic", "dynamic"))


def config(sampling: str | None, steps: int) -> TrainConfig:
    """The row's config: the `connect-four` preset (`board_presets`), with the row's pool; the
    `selfplay-connect-four` preset is the "dynamic" row."""
    cfg = presets.get("connect-four").replace(num_seeds=SEEDS, eval_episodes=EVAL_GAMES)
    if steps != cfg.total_env_steps:
        cfg = cfg.replace(total_env_steps=steps, eval_every=steps // 10)
    if sampling is not None:
        cfg = cfg.replace(selfplay={"pool_size": POOL, "add_every": ADD_EVERY,
                                    "sampling": sampling})  # fmt: skip
    return cfg


def final_record(result, env, agent) -> list[list[int]]:
    """Each seed's wins, draws, losses in the env's games against the random player."""
    params = result.runner.seeds.agent.params
    players = [jax.tree.map(lambda x, s=s: x[s], params) for s in range(SEEDS)]
    a = selfplay.stack_players(players, players[0])
    b = selfplay.stack_players([None] * SEEDS, players[0])
    keys = jax.random.split(jax.random.key(123), SEEDS)
    return np.asarray(selfplay.make_match(agent, env)(keys, a, b)).tolist()


def main() -> None:
    p = parser(__doc__, __file__, quick="20k env steps a row, few games")
    args = p.parse_args()
    steps = QUICK_STEPS if args.quick else STEPS
    games = (16, 64, 16) if args.quick else (EVAL_GAMES, FINAL_GAMES, ROUND_ROBIN_GAMES)
    t0 = time.time()
    rows, learners, agent = [], [], None
    for name, sampling in ROWS:
        cfg = config(sampling, steps).replace(eval_episodes=games[0])
        if args.quick:
            cfg = cfg.replace(selfplay={"add_every": 200} if sampling else {})
        t = time.time()
        result = train(cfg, progress=False)
        wall = time.time() - t
        agent = selfplay.player_agent(cfg)
        record = final_record(result, make_env(ENV, games[1]), agent)
        row = {
            "row": name,
            "sampling": sampling,
            "env_steps": result.env_steps,
            "wall_s": round(wall, 1),
            "compile_s": round(result.compile_time_s, 1),
            "curve": [
                {"env_steps": h["env_steps"], "eval_return": h["eval_return"]}
                for h in result.history
                if "eval_return" in h
            ],
            "final_vs_random": record,
            "win_rate": [r[0] / sum(r) for r in record],
        }
        if sampling is not None:
            rep = selfplay.report(result, games=games[2])
            row["pool"] = {
                "names": rep.names,
                "ratings": [round(float(x), 1) for x in rep.ratings],
                "training": rep.training.tolist(),
                "vs_random": rep.records[:, 0].tolist(),
                "markdown": rep.markdown(),
            }
        rows.append(row)
        learners.append(jax.tree.map(lambda x: x[0], result.runner.seeds.agent.params))
        print(name, row["win_rate"], round(wall), "s", flush=True)
    env = make_env(ENV, games[2])
    records = selfplay.round_robin(agent, env, [None, *learners], key=jax.random.key(7))
    ratings = selfplay.elo(records)
    result = {
        "machine": machine(),
        "env": ENV,
        "seeds": SEEDS,
        "pool": POOL,
        "add_every": ADD_EVERY,
        "games": dict(zip(("eval", "final", "round_robin"), games, strict=True)),
        "rows": rows,
        "learners_elo": {
            "names": ["random"] + [r["row"] for r in rows],
            "ratings": [round(float(x), 1) for x in ratings],
            "records": records.tolist(),
        },
        "run_time_s": round(time.time() - t0),
    }
    write_results(stem(args, "selfplay"), result, render)


def render(r: dict) -> str:
    lines = [
        "# Self-play in Connect Four",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/selfplay.py` in {r['run_time_s'] / 60:.0f} min. "
        f"`{r['env']}`, DQN, {r['seeds']} seeds a row; pool rows: {r['pool']} members (the "
        f"random player and snapshots every {r['add_every']} updates). Final record: "
        f"{r['games']['final']} games a seed against the random player, sides drawn per game.",
        "",
        "| row | env steps / seed | wins vs random (per seed) | W/D/L (per seed) | wall s |",
        "|---|---:|---:|---|---:|",
    ]
    for row in r["rows"]:
        wins = ", ".join(f"{w:.1%}" for w in row["win_rate"])
        wdl = "; ".join("/".join(str(x) for x in s) for s in row["final_vs_random"])
        lines.append(f"| {row['row']} | {row['env_steps']:,} | {wins} | {wdl} | {row['wall_s']} |")
    lines += [
        "",
        "Evaluation return against the random player (wins minus losses, mean of seeds):",
        "",
    ]
    steps = [c["env_steps"] for c in r["rows"][0]["curve"]]
    lines.append("| row | " + " | ".join(f"{s // 1000}k" for s in steps) + " |")
    lines.append("|---|" + "---:|" * len(steps))
    for row in r["rows"]:
        vals = [f"{np.mean(c['eval_return']):.2f}" for c in row["curve"]]
        lines.append(f"| {row['row']} | " + " | ".join(vals) + " |")
    le = r["learners_elo"]
    lines += ["", f"Elo of the final learners (seed 0 of each row; {r['games']['round_robin']} "
              "games a pair, the random player at 0):", "", "| player | Elo |", "|---|---:|"]  # fmt: skip
    lines += [f"| {n} | {x:.0f} |" for n, x in zip(le["names"], le["ratings"], strict=True)]
    for row in r["rows"]:
        if "pool" in row:
            lines += ["", f'Pool of row "{row["row"]}" (seed 0):', "", row["pool"]["markdown"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
