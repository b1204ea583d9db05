"""Wall time to a score: this library's DQN and PQN presets against rejax's DQN and PQN.

    pip install -e ".[bench]"                                 # rejax, from the package registry
    python benchmarks/time_to_score.py                        # CartPole, 3 rounds: ~25 min
    python benchmarks/time_to_score.py --tasks cartpole --rounds 3 --no-rejax
    python benchmarks/time_to_score.py --tasks breakout space-invaders --merge \
        --rejax-dqn-rounds 1                   # ~50 min: rejax's DQN alone is ~17 min a run

Writes `benchmarks/results/time_to_score/time_to_score.{json,md}` (`--out`). Per task, each row is
one program training `--seeds` seeds (4) at once, run once per round; the rows take turns within
each round, so the machine's drift falls on every row alike.

Tasks and scores: CartPole-v1 to a greedy return of 475; Breakout-MinAtar to 5 and
SpaceInvaders-MinAtar to 20, scores that this library's DQN presets reach within their budgets
(benchmarks/results/presets: 8.7 and 5.2 on Breakout at 154k steps, 23 and 23 on SpaceInvaders).

Rows:
- `jaxrl_fast dqn`, `jaxrl_fast pqn`: this library's presets for the task (CartPole: `cartpole`,
  `pqn-cartpole`; MinAtar: `minatar-<game>`, `pqn-minatar-<game>`), as shipped, evaluated greedily
  every ~1/32 of the run (8 episodes a seed). On MinAtar a run stops at the first evaluation
  that reaches the score (the PQN presets' 2M steps would otherwise cost minutes past it);
- `jaxrl_fast pqn, rejax's settings`: this library's rollout learner with rejax's published PQN
  settings (`SAME_AS_REJAX_PQN`: its envs, rollout, epochs, minibatches, 64-64 LayerNorm
  network, Adam, lambda, epsilon schedule and budget): the two loops on one algorithm;
- `rejax dqn`, `rejax pqn`: rejax 0.1.3 (`pip install rejax`) with the settings its repository
  publishes for the task (`configs/gymnax/cartpole.yaml`, transcribed in `REJAX` below, their
  total budgets included), its seeds vmapped in one `jax.jit` as its README shows; evaluated by
  its own `evaluate` every `eval_freq` steps with 8 episodes a seed instead of its default 128
  (the evaluation runs inside its compiled loop, so its cost counts in its time; 8 keeps it
  near ours). rejax 0.1.3 unpacks gymnax's step as 5 values (gymnax < 1.0); this library's
  gymnax 1.0 returns terminated and truncated apart, so its envs are wrapped (`OldGymnaxStep`:
  done = terminated or truncated, what rejax saw from gymnax < 1.0). On MinAtar rejax publishes
  no settings, so its rows are its classes' defaults (`DQN.create(env=...)`: 131,072 steps, 1 env,
  an evaluation every 4,096 steps; PQN: 64 envs x 64 steps, the same budget).

Time to score: compile time plus the training run's time up to the first evaluation where the
mean over seeds of the greedy return reaches the task's score, the run's time taken in
proportion to env steps where a run went to its end (both loops run at one speed throughout);
for a stopped run, the wall time from `train(config)`'s call to the host's reading of that
evaluation (set-up and compile included). env-steps/s counts
every seed's steps over the whole run (evaluations included). This library spreads its seeds
over the machine's cores (`parallel.use_cpu_cores()`: one XLA CPU device per core); rejax's
program runs on one device, as a user would run it.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import parallel  # noqa: E402

parallel.use_cpu_cores()
import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxrl_fast import presets  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402

EVALS = 32  # evaluation points per run
EPISODES = 8  # greedy episodes per seed and evaluation
TASKS = {
    "cartpole": {"score": 475.0, "dqn": "cartpole", "pqn": "pqn-cartpole", "stop": False},
    "breakout": {"score": 5.0, "dqn": "minatar-breakout", "pqn": "pqn-minatar-breakout",
                 "stop": True},
    "space-invaders": {"score": 20.0, "dqn": "minatar-space-invaders",
                       "pqn": "pqn-minatar-space-invaders", "stop": True},
}  # fmt: skip
# rejax's PQN settings in this library's loop (`--learner rollout`): the loops, not the settings
SAME_AS_REJAX_PQN = {
    "cartpole": dict(
        env={"num_envs": 16, "reward_shaping": None},
        network={"hidden_sizes": (64, 64), "layer_norm": True},
        dqn={"learning_rate": 3e-4, "optimizer": "adam", "target_period": 2048,
             "max_grad_norm": 10.0, "gamma": 0.99},
        algo={"rollout": {"td_lambda": 0.9, "num_minibatches": 16}},
        schedule={"epsilon_start": 1.0, "epsilon_end": 0.05, "epsilon_fraction": 0.5,
                  "lr_schedule": "constant"},
        train_frequency=16 * 128, updates_per_block=5 * 16,
        total_env_steps=524_288,
    ),
}  # fmt: skip
# rejax's published settings (github.com/keraJLi/rejax, configs/gymnax/cartpole.yaml)
REJAX = {
    "cartpole": {
        "dqn": dict(env="CartPole-v1", agent="DuelingQNetwork",
                    agent_kwargs={"activation": "swish"}, num_envs=10, buffer_size=50_000,
                    fill_buffer=5_000, batch_size=100, max_grad_norm=10, learning_rate=0.001,
                    num_epochs=5, total_timesteps=100_000, eval_freq=2_500, polyak=0.98,
                    eps_start=1, eps_end=0.05, exploration_fraction=0.5, gamma=0.99,
                    ddqn=True, normalize_observations=False),
        "pqn": dict(env="CartPole-v1", num_envs=16, num_steps=128, num_minibatches=16,
                    max_grad_norm=10, learning_rate=0.0003, num_epochs=5,
                    total_timesteps=524_288, eval_freq=16_384, eps_start=1, eps_end=0.05,
                    exploration_fraction=0.5, gamma=0.99, td_lambda=0.9,
                    normalize_observations=False),
    },
    # no published MinAtar settings: the classes' defaults
    "breakout": {"dqn": dict(env="Breakout-MinAtar"), "pqn": dict(env="Breakout-MinAtar")},
    "space-invaders": {"dqn": dict(env="SpaceInvaders-MinAtar"),
                       "pqn": dict(env="SpaceInvaders-MinAtar")},
}  # fmt: skip


class _Reached(Exception):
    """Raised by `run_ours`'s chunk callback at the first evaluation reaching the score."""


def _divisor_near(n: int, target: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - target))


def run_ours(
    preset: str, seeds: int, seed: int, changes: dict | None = None, stop_at: float | None = None
) -> dict:
    """One run of `preset` (with `changes`); with `stop_at`, it stops at the first evaluation
    whose mean over seeds reaches that score."""
    cfg = presets.get(preset).replace(**(changes or {}))
    chunks = _divisor_near(cfg.num_blocks, EVALS)
    per_chunk = (cfg.total_env_steps - cfg.learning_starts) // chunks
    cfg = cfg.replace(num_seeds=seeds, seed=seed, num_chunks=chunks, eval_every=per_chunk,
                      eval_episodes=EPISODES)  # fmt: skip
    curve, last = [], {}

    def on_chunk(rec: dict) -> None:
        last.update(rec, wall_s=time.perf_counter() - t0)
        if "eval_return" in rec:
            curve.append((rec["env_steps"], float(np.mean(rec["eval_return"]))))
            if stop_at is not None and curve[-1][1] >= stop_at:
                raise _Reached

    t0 = time.perf_counter()
    try:
        r = train(cfg, progress=False, on_chunk=on_chunk)
    except _Reached:  # wall time so far: set-up and compile, then the chunks up to this one
        jax.clear_caches()
        steps, run_s = last["env_steps"], last["elapsed_s"]
        return {"compile_s": last["wall_s"] - run_s, "run_s": run_s, "total_steps": steps,
                "curve": curve, "env_steps_per_s": seeds * steps / run_s,
                "stopped_at_score": True}  # fmt: skip
    jax.clear_caches()
    run_s = r.run_time_s + r.eval_time_s
    return {"compile_s": r.compile_time_s, "run_s": run_s, "total_steps": cfg.total_env_steps,
            "curve": curve, "env_steps_per_s": seeds * cfg.total_env_steps / run_s}  # fmt: skip


class OldGymnaxStep:
    """A gymnax >= 1.0 env whose `step` returns the 5-tuple of gymnax < 1.0 (`done` =
    terminated or truncated), which rejax 0.1.3 unpacks; everything else is the env's."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        if name == "_env":  # before __init__ (copy.deepcopy)
            raise AttributeError(name)
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, jax.numpy.logical_or(terminated, truncated), info


def run_rejax(settings: dict, seeds: int, seed: int) -> dict:
    import gymnax
    import rejax
    from rejax.evaluate import evaluate

    name = settings["algo"]
    cls = rejax.get_algo(name)
    env, env_params = gymnax.make(settings["env"])
    config = {k: v for k, v in settings.items() if k not in ("algo", "env")}
    algo = cls.create(env=OldGymnaxStep(env), env_params=env_params, **config)

    def eval_callback(algo, ts, rng):
        act = algo.make_act(ts)
        return evaluate(act, rng, algo.env, algo.env_params, EPISODES,
                        algo.env_params.max_steps_in_episode)  # fmt: skip

    algo = algo.replace(eval_callback=eval_callback)
    keys = jax.random.split(jax.random.PRNGKey(seed), seeds)
    fn = jax.jit(jax.vmap(cls.train, in_axes=(None, 0)))
    t = time.perf_counter()
    compiled = fn.lower(algo, keys).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    _, (_, returns) = compiled(algo, keys)
    returns = np.asarray(jax.block_until_ready(returns))  # [seeds, evals + 1, episodes]
    run_s = time.perf_counter() - t
    means = returns.mean(axis=(0, 2))
    freq, total = algo.eval_freq, algo.total_timesteps
    curve = [(min(i * freq, total), float(m)) for i, m in enumerate(means)]  # the first: step 0
    jax.clear_caches()
    return {"compile_s": compile_s, "run_s": run_s, "total_steps": total, "curve": curve,
            "env_steps_per_s": seeds * total / run_s}  # fmt: skip


def time_to(run: dict, score: float) -> float | None:
    """Compile plus the run's time up to the first evaluation at or above `score` (None: never)."""
    for steps, value in run["curve"]:
        if value >= score:
            return run["compile_s"] + run["run_s"] * steps / run["total_steps"]
    return None


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-rejax", action="store_true", help="this library's rows only")
    parser.add_argument(
        "--merge", action="store_true", help="keep the other tasks' rows of the results file"
    )
    parser.add_argument(
        "--rejax-dqn-rounds", type=int, default=None,
        help="run rejax's DQN in the first N rounds only (default: every round); its default "
        "MinAtar budget takes ~17 min a run on 2 cores",
    )  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 3 or args.seeds < 1:
        parser.error("--rounds >= 3 (rows alternate over rounds) and --seeds >= 1")
    rows, wall = [], {}
    for task in args.tasks:
        spec, task_t0 = TASKS[task], time.perf_counter()
        stop = spec["score"] if spec["stop"] else None
        makers = {f"jaxrl_fast {a}": (lambda s, p=spec[a], st=stop: run_ours(p, args.seeds, s, None, st))
                  for a in ("dqn", "pqn")}  # fmt: skip
        if task in SAME_AS_REJAX_PQN:
            makers["jaxrl_fast pqn, rejax's settings"] = (
                lambda s, p=spec["pqn"], c=(SAME_AS_REJAX_PQN[task]): run_ours(p, args.seeds, s, c)
            )
        if not args.no_rejax:
            for a, settings in REJAX[task].items():
                settings = {**settings, "algo": a}
                makers[f"rejax {a}"] = lambda s, st=settings: run_rejax(st, args.seeds, s)
        runs: dict[str, list[dict]] = {name: [] for name in makers}
        for k in range(args.rounds):
            for name, make in makers.items():
                if name == "rejax dqn" and k >= (args.rejax_dqn_rounds or args.rounds):
                    continue
                run = make(k)
                run["time_to_score_s"] = time_to(run, spec["score"])
                runs[name].append(run)
                tts = run["time_to_score_s"]
                print(f"{task} round {k + 1} {name}: compile {run['compile_s']:.1f} s, "
                      f"run {run['run_s']:.1f} s, {run['env_steps_per_s']:,.0f} env-steps/s, "
                      f"to {spec['score']:g}: {'never' if tts is None else f'{tts:.1f} s'}",
                      flush=True)  # fmt: skip
        for name, rs in runs.items():
            reached = [r["time_to_score_s"] for r in rs if r["time_to_score_s"] is not None]
            rows.append({
                "task": task, "row": name, "score": spec["score"], "runs": rs,
                "rounds_reached": len(reached),
                "time_to_score_s": statistics.median(reached) if reached else None,
                "compile_s": statistics.median(r["compile_s"] for r in rs),
                "env_steps_per_s": statistics.median(r["env_steps_per_s"] for r in rs),
                "final": statistics.median(r["curve"][-1][1] for r in rs),
            })  # fmt: skip
        wall[task] = time.perf_counter() - task_t0
    path = os.path.join(args.out, "time_to_score") + ".json"
    if args.merge and os.path.exists(path):  # the earlier rows of tasks not run now, first
        with open(path) as f:
            old = json.load(f)
        rows = [r for r in old["rows"] if r["task"] not in args.tasks] + rows
        kept = {r["task"] for r in rows} - set(args.tasks)
        wall = {**{t: old.get("task_wall_s", {}).get(t, old["wall_s"]) for t in kept}, **wall}
    result = {"machine": machine(), "seeds": args.seeds, "rounds": args.rounds,
              "episodes": EPISODES, "rows": rows, "wall_s": sum(wall.values()),
              "task_wall_s": wall, "rejax_dqn_rounds": args.rejax_dqn_rounds}  # fmt: skip
    write_results(os.path.join(args.out, "time_to_score"), result, render)


def render(r: dict) -> str:
    lines = [
        "# Wall time to a score: jaxrl_fast's DQN and PQN against rejax's",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/time_to_score.py` in {r['wall_s'] / 60:.0f} min: "
        f"{r['seeds']} seeds a program, {r['rounds']} rounds with the rows taking turns; greedy "
        f"evaluations of {r['episodes']} episodes a seed about 32 times a run. Time to score: "
        "compile plus the run's time up to the first evaluation whose mean over seeds reaches "
        "the score (median over the rounds that reached it). On MinAtar this library's runs stop "
        "there, so their last return is the one that reached the score and their env-steps/s "
        "covers the steps run. rejax's rows on MinAtar are its classes' defaults (it publishes "
        "no MinAtar settings)."
        + (
            f" rejax's DQN ran in the first {r['rejax_dqn_rounds']} round(s) only: its default "
            "MinAtar run (131,072 steps, one update a step) takes ~17 min."
            if r.get("rejax_dqn_rounds")
            else ""
        )
        + " Settings: the module docstring.",
        "",
        "| task | row | to score (s) | rounds reached | last mean return | env-steps/s | "
        "compile s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        tts = row["time_to_score_s"]
        lines.append(
            f"| {row['task']} ({row['score']:g}) | {row['row']} | "
            f"{'never' if tts is None else f'{tts:.1f}'} | {row['rounds_reached']}/"
            f"{len(row['runs'])} | {row['final']:.1f} | {row['env_steps_per_s']:,.0f} | "
            f"{row['compile_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
