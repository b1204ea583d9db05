"""The DQN family on the four gymnax MinAtar games: one program per algorithm and game.

    python benchmarks/dqn_family_minatar.py                        # 8 algorithms x 4 games
    python benchmarks/dqn_family_minatar.py --games Asterix Freeway --merge   # add 2 games
    python benchmarks/dqn_family_minatar.py --algorithms dqn rainbow-minatar --games Breakout

Writes `benchmarks/results/dqn_family/minatar.{json,md}` (`--out`). Each algorithm is its
`jaxrl_fast.presets.dqn_family` change to the `minatar-breakout` preset (DQN's MinAtar settings: 16 envs,
a 3x3 conv of 16 channels and a dense layer of 128, 100k replay, 2 updates per 16 env steps,
lr 2.5e-4 decayed to 0), with the game swapped in; `rainbow-minatar` is that preset ("Revisiting
Rainbow"'s MinAtar Rainbow field by field, `dqn_family.RAINBOW_MINATAR_DIFFERS`; its epsilon
decays over 250k env steps whatever the budget: `ScheduleConfig.horizon`). Every program runs `--seeds` seeds vmapped, for
`--steps` env steps per seed (the preset's 154k shortened to what this CPU allows in one
session: `learning_starts` stays 10,000, epsilon decays over the first 20%).

Reported per algorithm and game: each seed's final greedy return (`--episodes` evaluation
episodes, epsilon 0; noisy layers noise-free), their mean with a 95% t-interval, compile seconds
and training env-steps/s. Per algorithm: the interquartile mean (IQM, as rliable) over all
games' seeds of the returns normalised by DQN's, `(R - random) / (DQN mean - random)`, over the
games where DQN beat random (its 95% interval above the random return), with a 95%
stratified-bootstrap interval (seeds resampled within each game), and the geometric means over
games of env-steps/s and compile time relative to DQN's. The random policy's return per game is
measured here (`--episodes` x 4 episodes of uniform actions).
"""

from __future__ import annotations

import json
import os
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402
from jaxrl_fast.presets import dqn_family  # noqa: E402

parallel.use_cpu_cores()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from jaxrl_fast.run.train import train  # noqa: E402

GAMES = ("Asterix", "Breakout", "Freeway", "SpaceInvaders")
ALGORITHMS = ("dqn", "c51", "qr-dqn", "iqn", "m-dqn", "hl-gauss", "noisy", "rainbow-minatar",
              "full-rainbow")  # fmt: skip
DEFAULT = ALGORITHMS[:-1]  # full Rainbow on the DQN preset's settings: by request
BOOTSTRAP = 2000


def config_for(algorithm: str, game: str, seeds: int, steps: int, episodes: int):
    """`algorithm` on `game`: its change to `minatar-breakout` (or the `rainbow-minatar`
    preset), `seeds` seeds, `steps` env steps per seed, `episodes` greedy evaluation episodes."""
    if algorithm == "rainbow-minatar":
        cfg = presets.get("rainbow-minatar")
    else:
        cfg = dqn_family.apply(algorithm, presets.get("minatar-breakout"))
    f = cfg.train_frequency  # a multiple of the 16 envs, as learning_starts is
    total = cfg.learning_starts + max(1, (steps - cfg.learning_starts) // f) * f
    return cfg.replace(
        env={"name": f"{game}-MinAtar"},
        num_seeds=seeds,
        total_env_steps=total,
        eval_episodes=episodes,
        num_chunks=None,
    )


def random_return(game: str, episodes: int, seed: int = 0) -> float:
    """The mean return of uniform random actions over `episodes` episodes of `game`."""
    from jaxrl_fast.agent.evaluate import play_episodes
    from jaxrl_fast.config import EnvConfig
    from jaxrl_fast.envs.seeded import make_seeded

    env = make_seeded(EnvConfig(name=f"{game}-MinAtar"), 1, num_envs=episodes, seed=seed,
                      evaluation=True)  # fmt: skip
    n = env.spec.num_actions

    def act(keys, obs, state):
        return jax.vmap(lambda k: jax.random.randint(k, obs.shape[1:2], 0, n))(keys), state

    total = jax.jit(lambda k: play_episodes(env, act, lambda e: (), k))(
        jax.random.split(jax.random.key(seed), 1)
    )
    return float(jnp.mean(total))


def t_interval(x: np.ndarray) -> tuple[float, float]:
    """The 95% t-interval of the mean of `x`."""
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return float(x.mean() - half), float(x.mean() + half)


def iqm(scores: np.ndarray) -> float:
    """The interquartile mean of all entries (rliable's IQM: the mean of the middle 50%)."""
    return float(stats.trim_mean(scores.ravel(), 0.25))


def stratified_bootstrap(scores: np.ndarray, reps: int = BOOTSTRAP, seed: int = 0):
    """A 95% interval of the IQM of `scores [games, seeds]`, seeds resampled within games."""
    rng = np.random.default_rng(seed)
    g, s = scores.shape
    out = np.empty(reps)
    for k in range(reps):
        idx = rng.integers(0, s, (g, s))
        out[k] = iqm(np.take_along_axis(scores, idx, axis=1))
    return float(np.percentile(out, 2.5)), float(np.percentile(out, 97.5))


def summarise(rows: list[dict], randoms: dict[str, float], games, algorithms) -> list[dict]:
    """Per algorithm: the IQM of DQN-normalised returns over the games where DQN beat random
    (with its interval), and the speed and compile time relative to DQN (geometric means over
    all games)."""
    cell = {(r["algorithm"], r["game"]): r for r in rows}
    # a game normalises by DQN only where DQN beat random (its 95% interval above random)
    normalised = [
        g for g in games if ("dqn", g) in cell and cell[("dqn", g)]["ci95"][0] > randoms[g]
    ]
    out = []
    for a in algorithms:
        if not all((a, g) in cell and ("dqn", g) in cell for g in games):
            continue
        scores, speed, compile_ = [], [], []
        for g in games:
            dqn = cell[("dqn", g)]
            speed.append(cell[(a, g)]["env_steps_per_s"] / dqn["env_steps_per_s"])
            compile_.append(cell[(a, g)]["compile_s"] / dqn["compile_s"])
            if g not in normalised:
                continue
            ref = np.mean(dqn["final_returns"]) - randoms[g]
            scores.append((np.asarray(cell[(a, g)]["final_returns"]) - randoms[g]) / ref)
        scores = np.asarray(scores)
        ok = scores.size > 0
        out.append(
            {
                "algorithm": a,
                "normalised_games": normalised,
                "iqm_normalised": iqm(scores) if ok else None,
                "iqm_ci": stratified_bootstrap(scores) if ok else None,
                "speed_vs_dqn": float(np.exp(np.mean(np.log(speed)))),
                "compile_vs_dqn": float(np.exp(np.mean(np.log(compile_)))),
            }
        )
    return out


def main() -> None:
    parser = common.parser(__doc__, __file__, out=os.path.join(common.RESULTS, "dqn_family"))
    parser.add_argument("--seeds", type=int, default=4, help="seeds per program (>= 4)")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per seed")
    parser.add_argument("--episodes", type=int, default=32, help="evaluation episodes per seed")
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=list(GAMES))
    parser.add_argument("--algorithms", nargs="+", default=list(DEFAULT),
                        choices=list(ALGORITHMS))  # fmt: skip
    parser.add_argument("--merge", action="store_true",
                        help="keep the other (algorithm, game) rows of the results file")  # fmt: skip
    args = parser.parse_args()
    if args.seeds < 1 or args.steps < 20_000 or args.episodes < 1:
        parser.error("--seeds >= 1, --steps >= 20000 (the prefill is 10,000) and --episodes >= 1")
    t0 = time.perf_counter()
    randoms = {g: random_return(g, 4 * args.episodes) for g in args.games}
    rows = []
    for game in args.games:
        for algorithm in args.algorithms:
            cfg = config_for(algorithm, game, args.seeds, args.steps, args.episodes)
            r = train(cfg, progress=False)
            returns = np.asarray(r.final_return, np.float64)
            rows.append(
                {
                    "algorithm": algorithm,
                    "game": game,
                    "env_steps_per_seed": cfg.total_env_steps,
                    "final_returns": [float(x) for x in returns],
                    "mean_return": float(returns.mean()),
                    "ci95": t_interval(returns),
                    "compile_s": r.compile_time_s,
                    "env_steps_per_s": r.train_env_steps_per_s,
                    "wall_s": r.wall_time_s,
                }
            )
            print(f"{game} {algorithm}: mean {returns.mean():.2f} "
                  f"({r.train_env_steps_per_s:,.0f} env-steps/s, {r.wall_time_s:.0f} s)",
                  flush=True)  # fmt: skip
            jax.clear_caches()
    wall = time.perf_counter() - t0
    path = os.path.join(args.out, "minatar.json")
    if args.merge and os.path.exists(path):  # another session's rows (same settings) stay
        with open(path) as f:
            old = json.load(f)
        if (old["seeds"], old["steps"], old["episodes"]) != (args.seeds, args.steps, args.episodes):
            raise SystemExit(f"--merge: {path} was run with other --seeds/--steps/--episodes")
        done = {(r["algorithm"], r["game"]) for r in rows}
        rows = [r for r in old["rows"] if (r["algorithm"], r["game"]) not in done] + rows
        randoms = {**old["random_returns"], **randoms}
        wall += old["wall_s"]
    games = [g for g in GAMES if any(r["game"] == g for r in rows)]
    algorithms = [a for a in ALGORITHMS if any(r["algorithm"] == a for r in rows)]
    rows.sort(key=lambda r: (GAMES.index(r["game"]), ALGORITHMS.index(r["algorithm"])))
    result = {
        "machine": machine(),
        "seeds": args.seeds,
        "steps": args.steps,
        "episodes": args.episodes,
        "random_returns": randoms,
        "rows": rows,
        "summary": summarise(rows, randoms, games, algorithms),
        "wall_s": wall,
    }
    write_results(os.path.join(args.out, "minatar"), result, render)


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def render(r: dict) -> str:
    games = sorted({row["game"] for row in r["rows"]}, key=GAMES.index)
    algorithms = list(dict.fromkeys(row["algorithm"] for row in r["rows"]))
    cell = {(row["algorithm"], row["game"]): row for row in r["rows"]}
    lines = [
        "# The DQN family on MinAtar: one program per algorithm and game",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/dqn_family_minatar.py` in {r['wall_s'] / 60:.0f} min: "
        f"{r['seeds']} seeds per program (vmapped), {r['steps']:,} env steps per seed (the "
        f"presets' 154k shortened; prefill 10,000), final greedy return over {r['episodes']} "
        "episodes per seed. Each algorithm is its `jaxrl_fast.presets.dqn_family` change to the "
        "`minatar-breakout` preset (tuned for DQN), except `rainbow-minatar` (its own preset).",
        "",
        "## Final greedy return: mean over seeds [95% t-interval]",
        "",
        "| algorithm | " + " | ".join(games) + " |",
        "|---|" + "---:|" * len(games),
    ]
    for a in algorithms:
        vals = []
        for g in games:
            row = cell.get((a, g))
            vals.append("" if row is None else f"{row['mean_return']:.2f} {_ci(row['ci95'])}")
        lines.append(f"| {a} | " + " | ".join(vals) + " |")
    rand = ", ".join(f"{g} {r['random_returns'][g]:.2f}" for g in games)
    lines += ["", f"Random policy: {rand}.", ""]
    lines += [
        "## Relative to DQN",
        "",
        "IQM over the seeds of the games where DQN beat random (its 95% interval above the "
        f"random return: {', '.join(r['summary'][0]['normalised_games']) if r['summary'] else 'none'}) "
        "of `(R - random) / (DQN mean - random)`, with a 95% stratified-bootstrap interval. "
        "Speed and compile time relative to DQN: `speed.md` (`benchmarks/dqn_family_speed.py`, "
        "the algorithms alternating on an otherwise idle machine); the runs here shared the "
        "machine with other work at times, so their env-steps/s (below) are not for comparing.",
        "",
        "| algorithm | IQM normalised [95% CI] |",
        "|---|---:|",
    ]
    for s in r["summary"]:
        iqm_text = "n/a" if s["iqm_normalised"] is None else f"{s['iqm_normalised']:.2f}"
        lines.append(f"| {s['algorithm']} | {iqm_text} {_ci(s['iqm_ci'])} |")
    lines += [
        "",
        "## Every seed",
        "",
        "| algorithm | game | final greedy returns | compile s | env-steps/s | wall s |",
        "|---|---|---|---:|---:|---:|",
    ]
    for row in r["rows"]:
        returns = ", ".join(f"{x:.1f}" for x in row["final_returns"])
        lines.append(
            f"| {row['algorithm']} | {row['game']} | {returns} | {row['compile_s']:.1f} | "
            f"{row['env_steps_per_s']:,.0f} | {row['wall_s']:.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
