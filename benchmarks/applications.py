"""The article's environment-side recipes, measured: action discretisation, reward shaping.

    python benchmarks/applications.py            # ~5 min on 2 cores
    python benchmarks/applications.py --quick    # budgets / 10 (a smoke run)

Per preset (`pendulum-discrete`, `reacher-81`), in one process: the preset trained with
`--seeds` seeds in one program (final greedy return per seed, wall time with compile), and three
yardsticks on the same env, each the mean return of 64 whole episodes:

- `random`: uniformly random actions of the discrete grid the agent acts on;
- `scripted`: the env's scripted controller (`jaxrl_fast.envs.scripted`) on the continuous
  actions;
- `scripted on the grid`: the same controller with each action snapped to the nearest grid
  point (`ActionGrid.nearest`): what the discretisation itself costs that controller.

Then `mountaincar-shaped` (potential-based shaping by the car's energy) against the same config
without shaping, each with `--seeds` seeds: the env's own final greedy returns. Then a
curriculum on MountainCar-v0's engine force (by progress, and by return) against training on
the env's own force directly, all evaluated 20 times on the real task: when each seed first
solves it.
Then CartPole with 4 pole lengths x 2 seeds as one program (`EnvConfig.variants`) against one
program per pole length. Then a smaller agent (issue 17, part 3): the `cartpole` preset's agents
pruned by 30% and distilled into a 3.7x smaller MLP (`jaxrl_fast.trained.compress`). Then recurrent Q
(issue 17, part 1): `memorychain-lstm` and `cartpole-hidden-lstm` against MLPs. Then learning
from demonstrations (issue 17, part 2): early learning with and without them, scripted on
CartPole and the discretised arm, a trained agent's recorded episodes on MinAtar-Breakout.

`--only SECTION` (repeatable) redoes those sections and keeps the others from the JSON.

Writes `benchmarks/results/applications/applications[-quick].json` and `.md`.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import common  # noqa: E402
from applications_report import EPISODES, render  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402,F401

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()  # one XLA device per core: the seeds run in parallel
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from presets import quick_config  # noqa: E402

from jaxrl_fast.envs.scripted import scripted_controller  # noqa: E402
from jaxrl_fast.envs.wrappers import make_action_grid  # noqa: E402
from jaxrl_fast.loop import make_train  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402

DISCRETISED = ("pendulum-discrete", "reacher-81")


def policy_return(name: str, policy, episodes: int = EPISODES, seed: int = 0) -> float:
    """Mean undiscounted return of `episodes` whole episodes of gymnax env `name` under
    `policy(obs, key) -> continuous action`."""
    import gymnax

    env, params = gymnax.make(name)
    horizon = int(params.max_steps_in_episode)

    def episode(key):
        key_reset, key_steps = jax.random.split(key)
        obs, state = env.reset_env(key_reset, params)

        def step(carry, key):
            obs, state, total, over = carry
            key_act, key_env = jax.random.split(key)
            obs, state, reward, done, _ = env.step_env(key_env, state, policy(obs, key_act), params)
            total = total + jnp.where(over, 0.0, reward)
            return (obs, state, total, over | done), None

        init = (obs, state, jnp.zeros((), jnp.float32), jnp.zeros((), bool))
        (_, _, total, _), _ = jax.lax.scan(step, init, jax.random.split(key_steps, horizon))
        return total

    keys = jax.random.split(jax.random.key(seed), episodes)
    return float(jnp.mean(jax.jit(jax.vmap(episode))(keys)))


def yardsticks(env_name: str, bins: int) -> dict:
    """Random (on the grid), scripted and scripted-on-the-grid returns for env `env_name`."""
    import gymnax

    env, params = gymnax.make(env_name)
    space = env.action_space(params)
    grid = make_action_grid(space.low, space.high, bins, name=env_name)
    controller = scripted_controller(env_name)

    def random_policy(obs, key):
        return grid.to_continuous(jax.random.randint(key, (), 0, grid.num_actions))

    return {
        "random": policy_return(env_name, random_policy),
        "scripted": policy_return(env_name, lambda obs, key: controller(obs)),
        "scripted_on_grid": policy_return(
            env_name, lambda obs, key: grid.to_continuous(grid.nearest(controller(obs)))
        ),
        "num_actions": grid.num_actions,
        "action_dims": len(grid.low),
    }


def run_discretised(name: str, seeds: int, quick: bool) -> dict:
    cfg = presets.get(name).replace(num_seeds=seeds)
    if quick:
        cfg = quick_config(cfg)
    t = time.perf_counter()
    result = train(cfg, progress=False)
    wall = time.perf_counter() - t
    final = [float(x) for x in np.asarray(result.final_return)]
    row = {
        "preset": name,
        "env": cfg.env.name,
        "discretise": cfg.env.discretise,
        "env_steps_per_seed": cfg.total_env_steps,
        "final_return": final,
        "wall_time_s": wall,
        "compile_time_s": result.compile_time_s,
        **yardsticks(cfg.env.name, cfg.env.discretise),
    }
    print(f"{name}: final {[round(x, 1) for x in final]}, random {row['random']:.1f}, "
          f"scripted {row['scripted']:.1f} ({row['scripted_on_grid']:.1f} on the grid), "
          f"{wall:.1f} s", flush=True)  # fmt: skip
    return row


SHAPED = "mountaincar-shaped"


def run_shaping(seeds: int, quick: bool) -> dict:
    """`mountaincar-shaped` and the same config without its shaping, side by side."""
    cfg = presets.get(SHAPED).replace(num_seeds=seeds)
    if quick:
        cfg = quick_config(cfg)
    row = {"preset": SHAPED, "env": cfg.env.name, "shaping": cfg.env.reward_shaping}
    row["env_steps_per_seed"] = cfg.total_env_steps
    for label, shaping in (("unshaped", None), ("shaped", cfg.env.reward_shaping)):
        t = time.perf_counter()
        result = train(cfg.replace(env={"reward_shaping": shaping}), progress=False)
        row[label] = {
            "final_return": [float(x) for x in np.asarray(result.final_return)],
            "wall_time_s": time.perf_counter() - t,
        }
        print(f"{SHAPED} {label}: {row[label]['final_return']}", flush=True)
    return row


CURRICULUM_STEPS = 301_000
# the engine's force, from strong enough to drive straight up (0.0025 = gravity) to the env's
# own 0.001, which needs the back-and-forth swing. (A first try moved the goal's position from
# -0.3 to 0.5 instead: no arm solved the real goal in 301k steps; pushing right to a near goal
# teaches nothing about swinging.)
CURRICULUM = {"param": "force", "start": 0.0025, "end": 0.001, "stages": 5}
SOLVED = -110.0  # MountainCar-v0's solved threshold (mean return)


def _first_reaching(history: list[dict], seeds: int, threshold: float) -> list[int | None]:
    """Per seed, the env steps of the first evaluation at or above `threshold` (None: never)."""
    first: list[int | None] = [None] * seeds
    for rec in history:
        for s, ret in enumerate(rec.get("eval_return") or []):
            if first[s] is None and ret is not None and ret >= threshold:
                first[s] = rec["env_steps"]
    return first


def run_curriculum(seeds: int, quick: bool) -> dict:
    """MountainCar-v0 (unshaped), its own engine force 0.001: trained on it directly, or with
    a curriculum on the force from 0.0025, advanced by progress or by return; all evaluated at
    0.001."""
    base = presets.get("cartpole").replace(
        env={"name": "MountainCar-v0"}, num_seeds=seeds, total_env_steps=CURRICULUM_STEPS
    )
    if quick:
        base = quick_config(base)
    base = base.replace(eval_every=(base.total_env_steps - base.learning_starts) // 20)
    arms = {
        "direct": {},
        "curriculum, progress": {**CURRICULUM, "advance": "progress"},
        "curriculum, return >= -150": {
            **CURRICULUM, "advance": "return", "success_return": -150.0
        },
    }  # fmt: skip
    out = {"env": "MountainCar-v0", "env_steps_per_seed": base.total_env_steps}
    out["curriculum"], out["threshold"], out["arms"] = CURRICULUM, SOLVED, {}
    for label, curriculum in arms.items():
        cfg = base.replace(env={"curriculum": curriculum or {"param": None}})
        t = time.perf_counter()
        result = train(cfg, progress=False)
        rec = {
            "final_return": [float(x) for x in np.asarray(result.final_return)],
            "first_solved": _first_reaching(result.history, seeds, SOLVED),
            "first_flag": _first_reaching(result.history, seeds, -199.0),
            "wall_time_s": time.perf_counter() - t,
        }
        if curriculum:  # where each seed's curriculum ended
            values = make_train(cfg).run.env.params_of(result.runner.seeds.env_state)
            rec["final_value"] = np.asarray(values[CURRICULUM["param"]]).tolist()
        out["arms"][label] = rec
        print(f"curriculum {label}: {rec}", flush=True)
    return out


VARIANTS = ";".join(f"length={x},polemass_length={0.1 * x:g}" for x in (0.25, 0.5, 1.0, 2.0))


def run_variants(seeds_per_variant: int, quick: bool) -> dict:
    """CartPole with 4 pole lengths: one program of 4 x `seeds_per_variant` seeds, against the
    4 variants trained one program each (compile included in both)."""
    count = len(VARIANTS.split(";"))
    cfg = presets.get("cartpole").replace(
        env={"variants": VARIANTS}, num_seeds=count * seeds_per_variant
    )
    if quick:
        cfg = quick_config(cfg)
    t = time.perf_counter()
    result = train(cfg, progress=False)
    together = time.perf_counter() - t
    per_variant = result.summary()["variants"]
    apart = []
    for v in per_variant:
        # the variant alone: a one-variant run of its own
        alone = ",".join(f"{k}={x:g}" for k, x in v["params"].items())
        one = cfg.replace(env={"variants": alone}, num_seeds=seeds_per_variant)
        t = time.perf_counter()
        res = train(one, progress=False)
        apart.append(
            {
                "final_return": [float(x) for x in np.asarray(res.final_return)],
                "wall_time_s": time.perf_counter() - t,
            }
        )
    out = {
        "env": "CartPole-v1",
        "env_steps_per_seed": cfg.total_env_steps,
        "seeds_per_variant": seeds_per_variant,
        "together": {"variants": per_variant, "wall_time_s": together},
        "apart": apart,
    }
    print(f"variants: together {together:.1f} s, apart "
          f"{sum(a['wall_time_s'] for a in apart):.1f} s", flush=True)  # fmt: skip
    return out


COMPRESS_FRACTION = 0.3
STUDENT = (60, 42)  # the cartpole preset's MLP is 120-84: about 3.7x the student's parameters


def _time_apply(nets: dict, batch: int = 4096, calls: int = 200, rounds: int = 3) -> dict:
    """Median microseconds per jitted forward pass of `batch` observations, A/B alternating."""
    times = {name: [] for name in nets}
    compiled = {}
    for name, (apply, params, obs) in nets.items():
        compiled[name] = jax.jit(apply)
        jax.block_until_ready(compiled[name](params, obs))
    for _ in range(rounds):
        for name, (_apply, params, obs) in nets.items():
            t = time.perf_counter()
            for _ in range(calls):
                out = compiled[name](params, obs)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - t) / calls * 1e6)
    return {name: statistics.median(v) for name, v in times.items()}


def _compressed_bytes(params) -> int:
    """Bytes of `params` in a compressed .npz (zeros compress: what pruning saves on disk)."""
    import io

    buf = io.BytesIO()
    leaves = {str(i): np.asarray(x) for i, x in enumerate(jax.tree.leaves(params))}
    np.savez_compressed(buf, **leaves)
    return buf.getbuffer().nbytes


def run_compress(seeds: int, quick: bool) -> dict:
    """The `cartpole` preset's agents: pruned by 30% (globally, per layer, and globally then
    fine-tuned by distillation with the pruned entries held at 0), and distilled into a
    3.7x smaller MLP; greedy returns over 64 episodes, sizes, forward-pass time."""
    from jaxrl_fast.agent.network import QNetwork
    from jaxrl_fast.config import NetworkConfig
    from jaxrl_fast.envs import make_env
    from jaxrl_fast.trained import compress

    cfg = presets.get("cartpole").replace(num_seeds=seeds)
    if quick:
        cfg = quick_config(cfg)
    result = train(cfg, progress=False)
    spec = make_env(cfg.env.name).spec
    teacher = QNetwork.from_config(cfg.network, spec, cfg.algo)
    student = QNetwork.from_config(NetworkConfig(kind="mlp", hidden_sizes=STUDENT), spec)
    rows, name = [], cfg.env.name
    for s in range(seeds):
        tp = jax.tree.map(lambda x, s=s: x[s], result.runner.seeds.agent.params)
        glob = compress.prune_by_magnitude(tp, COMPRESS_FRACTION)
        layer = compress.prune_by_magnitude(tp, COMPRESS_FRACTION, scope="layer")
        obs = compress.collect_observations(teacher.apply, tp, name, seed=s)
        keep = jax.tree.map(lambda x: (x != 0).astype(x.dtype), glob)
        tuned, _ = compress.distil(teacher.apply, tp, teacher.apply, glob, obs, keep=keep)
        sp0 = student.init(jax.random.key(s), obs[:1])
        sp, losses = compress.distil(teacher.apply, tp, student.apply, sp0, obs, steps=10_000)
        sq, _ = compress.distil(teacher.apply, tp, student.apply, sp0, obs, steps=10_000, loss="q")
        row = {
            "teacher": compress.greedy_return(teacher.apply, tp, name),
            "pruned_global": compress.greedy_return(teacher.apply, glob, name),
            "pruned_layer": compress.greedy_return(teacher.apply, layer, name),
            "pruned_tuned": compress.greedy_return(teacher.apply, tuned, name),
            "student": compress.greedy_return(student.apply, sp, name),
            "student_q_loss": compress.greedy_return(student.apply, sq, name),
            "student_final_loss": float(losses[-1]),
        }
        rows.append(row)
        print(f"compress seed {s}: {row}", flush=True)
    tp = jax.tree.map(lambda x: x[0], result.runner.seeds.agent.params)
    tuned_keep = compress.prune_by_magnitude(tp, COMPRESS_FRACTION)
    batch = jnp.zeros((4096, *spec.obs_shape), jnp.float32)
    sp = student.init(jax.random.key(0), batch[:1])
    return {
        "env": name,
        "env_steps_per_seed": cfg.total_env_steps,
        "fraction": COMPRESS_FRACTION,
        "student_hidden": list(STUDENT),
        "teacher_hidden": list(cfg.network.hidden_sizes),
        "seeds": rows,
        "params": {
            "teacher": compress.count_params(tp)[0],
            "pruned_nonzero": compress.count_params(tuned_keep)[1],
            "student": compress.count_params(sp)[0],
        },
        "npz_bytes": {
            "teacher": _compressed_bytes(tp),
            "pruned": _compressed_bytes(tuned_keep),
            "student": _compressed_bytes(sp),
        },
        "forward_us_batch_4096": _time_apply(
            {"teacher": (teacher.apply, tp, batch), "student": (student.apply, sp, batch)}
        ),
    }


RECURRENT = ("memorychain-lstm", "cartpole-hidden-lstm")


def _feed_forward(cfg):
    """The same run with an MLP on transitions: the LSTM removed, each batch the same number
    of trained positions (`batch_size` x `sequence_length` transitions)."""
    rows = cfg.replay.batch_size * cfg.replay.sequence_length
    return cfg.replace(
        network={"lstm": 0}, replay={"sequence_length": 0, "burn_in": 0, "batch_size": rows}
    )


def run_recurrent(seeds: int, quick: bool) -> list[dict]:
    """Each recurrent preset against the same run with an MLP (and, for CartPole with its
    velocities hidden, the MLP that sees them): final greedy returns, wall times."""
    out = []
    for name in RECURRENT:
        cfg = presets.get(name).replace(num_seeds=seeds)
        if quick:
            cfg = quick_config(cfg)
        arms = {"lstm": cfg, "mlp": _feed_forward(cfg)}
        if cfg.env.observe:
            arms["mlp, whole observation"] = _feed_forward(cfg).replace(env={"observe": ()})
            # the feed-forward preset's own settings (tuned for an MLP), same budget
            own = presets.get("cartpole").replace(
                env={"observe": cfg.env.observe},
                num_seeds=seeds,
                total_env_steps=cfg.total_env_steps,
            )
            arms["mlp, cartpole preset settings"] = quick_config(own) if quick else own
        row = {
            "preset": name,
            "env": cfg.env.name,
            "observe": list(cfg.env.observe),
            "lstm_width": cfg.network.lstm,
            "sequence_length": cfg.replay.sequence_length,
            "burn_in": cfg.replay.burn_in,
            "env_steps_per_seed": cfg.total_env_steps,
        }
        for label, arm in arms.items():
            t = time.perf_counter()
            result = train(arm, progress=False)
            row[label] = {
                "final_return": [float(x) for x in np.asarray(result.final_return)],
                "wall_time_s": time.perf_counter() - t,
                "run_time_s": result.run_time_s,
                "compile_time_s": result.compile_time_s,
            }
            print(f"{name} {label}: {row[label]['final_return']}", flush=True)
        out.append(row)
    return out


# Early learning with and without demonstrations: (preset, env steps, evaluate every).
DEMO_RUNS = (("cartpole", 51_000, 5_000), ("reacher-81", 101_000, 10_000))
# MinAtar from a recorded run: the teacher's preset budget, the steps recorded, the students'.
DEMO_MINATAR = ("minatar-breakout", 20_000, 74_000, 8_000)


def _evals(history: list[dict]) -> tuple[list[int], list[list[float]]]:
    """The env steps of each evaluation during training and its per-seed greedy returns."""
    rows = [h for h in history if h.get("eval_return") is not None]
    return [h["env_steps"] for h in rows], [list(h["eval_return"]) for h in rows]


def _demo_arms(cfg, demo: dict) -> dict:
    """`cfg` trained without and with `demo` (a `DemoConfig` change), with its evaluations."""
    out = {}
    for label, change in (("without", {"source": ""}), ("with", demo)):
        t = time.perf_counter()
        result = train(cfg.replace(demo=change), progress=False)
        steps, returns = _evals(result.history)
        out[label] = {
            "eval_steps": steps,
            "eval_return": returns,
            "final_return": [float(x) for x in np.asarray(result.final_return)],
            "wall_time_s": time.perf_counter() - t,
        }
        means = [round(statistics.fmean(r), 1) for r in returns]
        print(f"{cfg.env.name} {label} demonstrations: {means}", flush=True)
    return out


def run_demos(seeds: int, quick: bool) -> dict:
    """Early learning with and without demonstrations: scripted ones on CartPole and the
    discretised arm, and, on MinAtar-Breakout, a trained agent's recorded episodes."""
    import tempfile

    from jaxrl_fast.trained import demos

    runs = []
    for name, steps, every in DEMO_RUNS:
        cfg = presets.get(name).replace(num_seeds=seeds, total_env_steps=steps, eval_every=every)
        if quick:
            cfg = quick_config(cfg).replace(eval_every=None)
        demo = {"source": "scripted", "steps": 10_000, "share": 0.25}
        runs.append({"preset": name, "env": cfg.env.name, "demo": demo, **_demo_arms(cfg, demo)})
    name, recorded, steps, every = DEMO_MINATAR
    teacher_cfg = presets.get(name).replace(num_seeds=2)
    if quick:
        teacher_cfg = quick_config(teacher_cfg)
    t = time.perf_counter()
    teacher = train(teacher_cfg, progress=False)
    best = int(np.argmax(np.asarray(teacher.final_return)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "teacher.npz")
        played = demos.record(teacher, path, steps=recorded, seed_index=best, epsilon=0.01)
        ends = played.terminated | played.truncated
        recorded_return = float(played.reward.sum() / max(ends.sum(), 1))
        teacher_row = {
            "preset": name,
            "env_steps": teacher_cfg.total_env_steps,
            "final_return": [float(x) for x in np.asarray(teacher.final_return)],
            "seed_recorded": best,
            "steps_recorded": int(played.reward.size),
            "recorded_return_per_episode": recorded_return,
            "wall_time_s": time.perf_counter() - t,
        }
        print(f"{name} teacher: {teacher_row['final_return']}, recorded {recorded_return:.1f}")
        cfg = presets.get(name).replace(num_seeds=seeds, total_env_steps=steps, eval_every=every)
        if quick:
            cfg = quick_config(cfg).replace(eval_every=None)
        demo = {"source": path, "share": 0.25}
        minatar = {"preset": name, "env": cfg.env.name, "teacher": teacher_row}
        minatar.update(_demo_arms(cfg, demo))
    minatar["demo"] = {"source": "recorded .npz", "share": 0.25}
    return {"runs": runs + [minatar]}


SECTIONS = (
    "discretised",
    "shaping",
    "curriculum",
    "variants",
    "compress",
    "recurrent",
    "demos",
)


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="budgets / 10 (a smoke run)")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument(
        "--only", choices=SECTIONS, action="append", help="redo these sections, keep the others"
    )
    args = parser.parse_args()
    path = common.stem(args, "applications")
    result = {"machine": machine(), "seeds": args.seeds, "quick": args.quick}
    if args.only:
        with open(path + ".json") as f:
            result = {**json.load(f), "machine": machine()}
    runs = {
        "discretised": lambda: [run_discretised(n, args.seeds, args.quick) for n in DISCRETISED],
        "shaping": lambda: run_shaping(args.seeds, args.quick),
        "curriculum": lambda: run_curriculum(args.seeds, args.quick),
        "variants": lambda: run_variants(2, args.quick),
        "compress": lambda: run_compress(args.seeds, args.quick),
        "recurrent": lambda: run_recurrent(args.seeds, args.quick),
        "demos": lambda: run_demos(args.seeds, args.quick),
    }
    for section in args.only or SECTIONS:
        result[section] = runs[section]()
    write_results(path, result, render)


if __name__ == "__main__":
    main()
