"""Train every preset with 2 seeds and report final greedy returns against a random policy.

One command, one process, one machine:

    python benchmarks/presets.py                  # every preset, full budget (tens of minutes)
    python benchmarks/presets.py --quick          # every preset, budgets / 10 (smoke run)
    python benchmarks/presets.py --only acrobot   # one preset (repeatable flag)
    python benchmarks/presets.py --only pqn-cartpole --merge   # keep the other presets' rows

Writes `benchmarks/results/presets/presets[-quick].json` and `.md`: the machine, then per preset the env,
env steps per seed, each seed's final greedy return (mean of `eval_episodes` episodes), the
random-policy return (mean over 64 episodes of uniformly random actions) and the wall time,
compile included.
"""

from __future__ import annotations

import json
import os
import time

import common  # noqa: E402
from common import machine, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()  # one XLA device per core: the 2 seeds run in parallel
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrl_fast.envs import make_env  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402

NUM_SEEDS = 2
RANDOM_EPISODES = 64


def random_return(
    name: str, episodes: int = RANDOM_EPISODES, seed: int = 0, discretise: int | None = None
) -> float:
    """Mean undiscounted return of the first episode of `episodes` envs under uniform actions
    (for a discretised env: uniform over its grid of actions)."""
    env = make_env(name, num_envs=episodes, discretise=discretise)
    horizon = env.spec.max_episode_steps + 1
    num_actions = env.spec.num_actions

    @jax.jit
    def rollout(key):
        key, key_reset = jax.random.split(key)
        state, _ = env.reset(key_reset)

        def body(carry, k):
            state, total, finished = carry
            key_act, key_env = jax.random.split(k)
            action = jax.random.randint(key_act, (episodes,), 0, num_actions)
            state, _, reward, done, _ = env.step(key_env, state, action)
            total = total + jnp.where(finished, 0.0, reward)
            return (state, total, finished | done), None

        init = (state, jnp.zeros((episodes,), jnp.float32), jnp.zeros((episodes,), bool))
        (_, total, _), _ = jax.lax.scan(body, init, jax.random.split(key, horizon))
        return jnp.mean(total)

    return float(rollout(jax.random.key(seed)))


def quick_config(cfg):
    """Shrink a preset's budget about 10x, keeping the loop's divisibility rules."""
    e = cfg.env.num_envs
    learning_starts = 0 if not cfg.replays else max(2 * e, (cfg.learning_starts // 10) // e * e)
    blocks = max(1, (cfg.total_env_steps - cfg.learning_starts) // cfg.train_frequency // 10)
    return cfg.replace(
        learning_starts=learning_starts,
        total_env_steps=learning_starts + blocks * cfg.train_frequency,
        num_chunks=None,
    )


def run_preset(name: str, quick: bool) -> dict:
    cfg = presets.get(name).replace(num_seeds=NUM_SEEDS)
    if quick:
        cfg = quick_config(cfg)
    rand = random_return(cfg.env.name, discretise=cfg.env.discretise)
    t0 = time.perf_counter()
    result = train(cfg, progress=False)
    wall = time.perf_counter() - t0
    final = [float(x) for x in np.asarray(result.final_return)]
    row = {
        "preset": name,
        "env": cfg.env.name,
        "env_steps_per_seed": cfg.total_env_steps,
        "num_seeds": cfg.num_seeds,
        "final_return": final,
        "train_return": [float(x) for x in np.asarray(result.train_return)],
        "random_return": rand,
        "wall_time_s": wall,
        "compile_time_s": result.compile_time_s,
        "env_steps_per_s": result.env_steps_per_s,
    }
    print(
        f"{name:24s} {cfg.env.name:22s} steps={cfg.total_env_steps:>9,d} "
        f"final={[round(x, 2) for x in final]} random={rand:.2f} wall={wall:.1f}s",
        flush=True,
    )
    return row


def render(info: dict, quick: bool) -> str:
    m, rows = info["machine"], info["presets"]
    lines = [
        f"# Presets benchmark{' (quick: budgets / 10, not expected to learn fully)' if quick else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}, Python {m['python']}, "
        f"JAX {m['jax']}, devices {', '.join(m['devices'])}.",
        "",
        f"{NUM_SEEDS} seeds per preset in one program; final return = mean greedy (epsilon 0) "
        "return over the preset's `eval_episodes` episodes per seed; random = mean return of "
        f"{RANDOM_EPISODES} episodes of uniformly random actions. Wall time includes compile.",
        "",
        "| preset | env | env steps / seed | final greedy return per seed | random policy | "
        "wall time (s) | compile (s) |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        finals = ", ".join(f"{x:.2f}" for x in r["final_return"])
        lines.append(
            f"| `{r['preset']}` | {r['env']} | {r['env_steps_per_seed']:,} | {finals} | "
            f"{r['random_return']:.2f} | {r['wall_time_s']:.1f} | {r['compile_time_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="budgets / 10 (smoke run)")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="run only this preset (repeatable)"
    )
    parser.add_argument(
        "--merge", action="store_true", help="keep the other presets' rows of the results file"
    )
    args = parser.parse_args()
    # The Atari presets need the `atari` extra and hours here: benchmarks/atari.py measures them.
    names = args.only or [n for n in presets.names() if not presets.get(n).env.is_envpool]
    for n in names:
        presets.get(n)  # fail fast on unknown names
    rows = [run_preset(n, args.quick) for n in names]
    path = common.stem(args, "presets") + ".json"
    if args.merge and os.path.exists(path):  # the earlier rows of presets not run now, first
        with open(path) as f:
            kept = [r for r in json.load(f)["presets"] if r["preset"] not in names]
        rows = kept + rows
    info = {"machine": machine(), "quick": args.quick, "num_seeds": NUM_SEEDS, "presets": rows}
    write_results(common.stem(args, "presets"), info, lambda r: render(r, args.quick))


if __name__ == "__main__":
    main()
