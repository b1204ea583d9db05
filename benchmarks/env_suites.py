"""The JAX env suites in the fused loop: its speed against the env alone, and what it learns.

    pip install -e ".[suites]"
    python benchmarks/env_suites.py            # 8 envs, 6 suites: ~15 min on 2 cores
    python benchmarks/env_suites.py --quick    # budgets / 10 (a smoke run)
    python benchmarks/env_suites.py --only pgx:2048 --merge

Writes `benchmarks/results/env_suites/env_suites[-quick].{json,md}`. Per env (one per suite,
`ENVS`), in one process, one after the other:

(`brax:reacher` trains on its 9 x 9 = 81-action grid; `pgx:connect_four` plays a random legal
opponent, so its return is win rate minus loss rate.)

- **env alone**: the env's own steps for all seeds' envs (`S x E`) with uniformly random
  actions (legal ones for a masked env), in one jitted scan of the library's adapter (its
  auto-reset included): the ceiling the loop's env-steps/s is compared with;
- **fused loop**: DQN training with the row's config (`S` seeds vmapped, `E` envs each): its
  env-steps/s (training steps after compile, the evaluations left out), so `loop / env alone`
  is the share of the env's own speed the whole loop keeps (acting, replay, updates included);
- **learning**: the mean over seeds of the final greedy return (`eval_episodes` a seed) against
  a random policy's (the mean return of the episodes the env-alone rollout finished; it runs one
  episode limit, 2,048 to 4,100 steps, Craftax's 2,048).

The configs are small CPU budgets (minutes), not the suites' published settings; Craftax's is
far too short to learn much (its authors train for 1B steps) and is there for its speed row.
"""

from __future__ import annotations

import json
import os
import time

import common  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()  # one XLA device per core: the seeds spread over them
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrl_fast.agent.exploration import epsilon_greedy  # noqa: E402
from jaxrl_fast.agent.masks import legal_actions  # noqa: E402
from jaxrl_fast.config import TrainConfig  # noqa: E402
from jaxrl_fast.envs import make_env  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402

SEEDS = 2
_MLP = dict(
    env={"num_envs": 8},
    network={"kind": "mlp", "hidden_sizes": (128, 128)},
    replay={"capacity": 50_000, "batch_size": 64},
    dqn={"learning_rate": 1e-3, "target_period": 96, "gamma": 0.95},
    schedule={"epsilon_fraction": 0.3},
    train_frequency=8,
    eval_episodes=8,
)  # fmt: skip
# one env per suite: (name, changes to `_MLP` or a preset, env steps per seed)
ENVS = (
    ("navix:Navix-Empty-8x8-v0", {"env": {"num_envs": 8}, "learning_starts": 2_000}, 60_000),
    ("xminigrid:MiniGrid-Empty-8x8", {"env": {"num_envs": 8}, "learning_starts": 2_000}, 60_000),
    ("pgx:minatar-breakout", {"preset": "minatar-breakout"}, 154_000),
    ("pgx:2048", {"env": {"num_envs": 8}, "learning_starts": 2_000}, 60_000),
    ("pgx:connect_four", {"env": {"num_envs": 8}, "learning_starts": 2_000}, 100_000),
    ("jumanji:Snake-v1", {"env": {"num_envs": 8}, "learning_starts": 2_000}, 60_000),
    ("brax:reacher", {"env": {"num_envs": 8, "discretise": 9}, "learning_starts": 2_000}, 30_000),
    ("craftax:Craftax-Classic-Symbolic-v1",
     {"env": {"num_envs": 8}, "learning_starts": 2_000, "eval_epsilon": 0.1}, 20_000),
)  # fmt: skip


def config_for(name: str, changes: dict, steps: int, quick: bool) -> TrainConfig:
    changes = dict(changes)
    preset = changes.pop("preset", None)
    base = presets.get(preset) if preset else TrainConfig().replace(**_MLP)
    cfg = base.replace(**changes).replace(env={"name": name}, num_seeds=SEEDS)
    if quick:
        steps = max(steps // 10, cfg.learning_starts // 5 + 64 * cfg.env.num_envs)
        cfg = cfg.replace(learning_starts=cfg.learning_starts // 5)
    blocks = (steps - cfg.learning_starts) // cfg.train_frequency
    chunks = 4
    blocks -= blocks % chunks
    total = cfg.learning_starts + blocks * cfg.train_frequency
    return cfg.replace(total_env_steps=total, num_chunks=chunks, eval_every=total)


def env_alone(name: str, num_envs: int, seed: int = 0, discretise: int | None = None) -> dict:
    """Env-steps/s of `num_envs` envs under uniformly random (legal) actions over one episode
    limit, at least 2,048 steps and at most 4,100 (Craftax's 10,000: 2,048), and the mean
    return of the episodes they finish."""
    env = make_env(name, num_envs=num_envs, discretise=discretise)
    spec = env.spec
    limit = spec.max_episode_steps + 1
    steps = max(limit, 2_048) if limit <= 4_100 else 2_048  # long enough to time

    def body(carry, key):
        state, obs = carry
        key_act, key_env = jax.random.split(key)
        legal = legal_actions(obs, spec.num_actions) if spec.action_mask else None
        q = jnp.zeros((num_envs, spec.num_actions))
        action = epsilon_greedy(key_act, q, 1.0, spec.num_actions, legal)
        state, obs, _, done, info = env.step(key_env, state, action)
        return (state, obs), (done, info["episode_return"])

    @jax.jit
    def rollout(key):
        key_reset, key_steps = jax.random.split(key)
        start = env.reset(key_reset)
        return jax.lax.scan(body, start, jax.random.split(key_steps, steps))[1]

    key = jax.random.key(seed)
    jax.block_until_ready(rollout(key))  # compile, and warm
    t = time.perf_counter()
    done, returns = jax.block_until_ready(rollout(jax.random.fold_in(key, 1)))
    seconds = time.perf_counter() - t
    done, returns = np.asarray(done), np.asarray(returns)
    return {
        "env_steps_per_s": num_envs * steps / seconds,
        "random_return": float(returns[done].mean()) if done.any() else None,
        "random_episodes": int(done.sum()),
    }


def run_env(name: str, changes: dict, steps: int, quick: bool) -> dict:
    cfg = config_for(name, changes, steps, quick)
    alone = env_alone(name, SEEDS * cfg.env.num_envs, discretise=cfg.env.discretise)
    spec = make_env(name, discretise=cfg.env.discretise).spec
    t0 = time.perf_counter()
    result = train(cfg, progress=False)
    wall = time.perf_counter() - t0
    jax.clear_caches()
    final = [float(x) for x in np.asarray(result.final_return)]
    row = {
        "env": name,
        "suite": name.split(":")[0],
        "masked": spec.action_mask,
        "env_steps_per_seed": cfg.total_env_steps,
        "num_seeds": SEEDS,
        "num_envs": cfg.env.num_envs,
        "network": f"{cfg.network.torso(spec.obs_shape)} {list(cfg.network.hidden_sizes)}",
        "alone_env_steps_per_s": alone["env_steps_per_s"],
        "loop_env_steps_per_s": result.train_env_steps_per_s,
        "final_return": final,
        "random_return": alone["random_return"],
        "random_episodes": alone["random_episodes"],
        "compile_s": result.compile_time_s,
        "wall_s": wall,
    }
    print(
        f"{name:38s} alone {alone['env_steps_per_s']:>10,.0f}/s  loop "
        f"{result.train_env_steps_per_s:>9,.0f}/s  final {np.mean(final):8.2f}  random "
        f"{alone['random_return'] if alone['random_return'] is not None else float('nan'):8.2f}"
        f"  wall {wall:.0f} s",
        flush=True,
    )  # fmt: skip
    return row


def render(r: dict) -> str:
    lines = [
        "# JAX env suites in the fused loop" + (" (quick: budgets / 10)" if r["quick"] else ""),
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/env_suites.py` in {r['wall_s'] / 60:.0f} min. "
        f"{SEEDS} seeds a program, vmapped. *Env alone*: the env's own steps for all seeds' envs "
        "under uniformly random (legal) actions in one jitted scan. *Loop*: DQN training's "
        "env-steps/s after compile (acting, replay and updates included). *Final*: mean over "
        "seeds of the final greedy return; *random*: the mean return of the episodes the "
        "random rollout finished. Small CPU budgets, not the suites' published settings.",
        "",
        "| env | masked | env steps / seed | network | env alone (steps/s) | loop (steps/s) | "
        "loop / alone | final greedy return | random policy | compile s | wall s |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in r["rows"]:
        rand = "n/a" if x["random_return"] is None else f"{x['random_return']:.2f}"
        lines.append(
            f"| `{x['env']}` | {'yes' if x['masked'] else 'no'} | {x['env_steps_per_seed']:,} | "
            f"{x['network']} | {x['alone_env_steps_per_s']:,.0f} | "
            f"{x['loop_env_steps_per_s']:,.0f} | "
            f"{x['loop_env_steps_per_s'] / x['alone_env_steps_per_s']:.2f} | "
            f"{np.mean(x['final_return']):.2f} | {rand} | {x['compile_s']:.1f} | "
            f"{x['wall_s']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="budgets / 10 (a smoke run)")
    parser.add_argument("--only", nargs="+", help="these envs (names as in ENVS) only")
    parser.add_argument("--merge", action="store_true", help="keep the other envs' rows")
    args = parser.parse_args()
    rows_in = [e for e in ENVS if not args.only or e[0] in args.only]
    if args.only and len(rows_in) != len(args.only):
        parser.error(f"--only: expected names among {[e[0] for e in ENVS]}")
    t0 = time.perf_counter()
    rows = [run_env(name, changes, steps, args.quick) for name, changes, steps in rows_in]
    wall = time.perf_counter() - t0
    path = common.stem(args, "env_suites") + ".json"
    if args.merge and os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        done = {r["env"] for r in rows}
        order = [e[0] for e in ENVS]
        rows = sorted([r for r in old["rows"] if r["env"] not in done] + rows,
                      key=lambda r: order.index(r["env"]) if r["env"] in order else len(order))  # fmt: skip
        wall += old["wall_s"]
    result = {"machine": machine(), "quick": args.quick, "rows": rows, "wall_s": wall}
    write_results(common.stem(args, "env_suites"), result, render)


if __name__ == "__main__":
    main()
