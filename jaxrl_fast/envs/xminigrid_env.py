"""XLand-MiniGrid (`pip install 'jaxrl-fast[xminigrid]'`): its MiniGrid tasks with their fixed
rules, e.g. "xminigrid:MiniGrid-Empty-8x8", "xminigrid:MiniGrid-DoorKey-5x5", with the agent's
field of view as observation (tile and colour codes, here as float32 so the codes are not scaled
like pixels).

XLand-MiniGrid does not auto-reset and takes no key in its step. Its last step of an episode has
discount 0 when the goal was reached (`terminated`) and 1 when `max_steps` ran out
(`truncated`).

Its XLand meta-RL envs, e.g. "xminigrid:XLand-MiniGrid-R1-9x9", draw each episode's rules (a
goal, production rules, the objects on the grid) from a benchmark of rulesets, which xminigrid
downloads on first use (`xminigrid.load_benchmark`). This library downloads nothing: they read
a benchmark file one gives them (`EnvConfig.suite_file`; xminigrid's bz2 pickle, as
`xminigrid.load_benchmark_from_path` reads it: xminigrid's downloaded ones under
`~/.xland_minigrid/`, or one's own, `save_benchmark`). Each reset draws a ruleset uniformly
(its own key), and the episode keeps it.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, make_batched_env

# xminigrid 0.9's MiniGrid tasks (a test checks them against `registered_environments()`)
NAMES = tuple(
    ["MiniGrid-BlockedUnlockPickUp"]
    + [f"MiniGrid-DoorKey-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"MiniGrid-Empty-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"MiniGrid-EmptyRandom-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + ["MiniGrid-FourRooms", "MiniGrid-LockedRoom"]
    + [f"MiniGrid-MemoryS{s}" for s in (8, 16, 32, 64, 128)]
    + ["MiniGrid-Playground", "MiniGrid-Unlock", "MiniGrid-UnlockPickUp"]
)
# its XLand meta-RL envs: rules drawn per episode from a ruleset benchmark (`EnvConfig.suite_file`)
XLAND = tuple(
    f"XLand-MiniGrid-R{r}-{s}x{s}"
    for r, sizes in ((1, (9, 11, 13, 15, 17)), (2, (9, 11, 13, 15, 17)), (4, (9, 11, 13, 15, 17)),
                     (6, (13, 17, 19)), (9, (16, 19, 25)))
    for s in sizes
)  # fmt: skip
NAMES = NAMES + XLAND
_LAST = 2  # xminigrid's StepType.LAST


def save_benchmark(rulesets: dict, path: str) -> None:
    """Write a ruleset benchmark file (`EnvConfig.suite_file`): `rulesets` holds xminigrid's
    arrays "goals" `[N, G]`, "rules" `[N, R, 7]`, "init_tiles" `[N, T, 2]` and "num_rules"
    `[N]` (encodings as `xminigrid.core.goals` / `rules` make them)."""
    from xminigrid.benchmarks import save_bz2_pickle

    save_bz2_pickle({k: np.asarray(rulesets[k]) for k in _FIELDS}, path)


_FIELDS = ("goals", "rules", "init_tiles", "num_rules")


def _load_benchmark(name: str, file: str):
    from xminigrid.benchmarks import load_benchmark_from_path

    full = f"xminigrid:{name}"
    if not file:
        raise ValueError(
            f"EnvConfig.name={full!r} draws its rules from a ruleset benchmark, which this "
            "library does not download: set EnvConfig.suite_file to a benchmark file "
            "(xminigrid's, e.g. ~/.xland_minigrid/trivial_21k after "
            "xminigrid.load_benchmark('trivial-21k'), or your own: "
            "jaxrl_fast.envs.xminigrid_env.save_benchmark)."
        )
    if not os.path.isfile(file):
        raise FileNotFoundError(f"EnvConfig.suite_file={file!r}: no such file ({full}).")
    try:
        return load_benchmark_from_path(file)
    except Exception as err:
        raise ValueError(
            f"EnvConfig.suite_file={file!r} is not a ruleset benchmark xminigrid can read "
            f"({type(err).__name__}: {err})."
        ) from err


def make_xminigrid_env(name: str, num_envs: int, *, file: str = "") -> Env:
    """`num_envs` envs of XLand-MiniGrid's `name` (one of `NAMES`); an XLand env's (`XLAND`)
    with its rules drawn per episode from the ruleset benchmark in `file`."""
    import xminigrid

    env, params = xminigrid.make(name)
    if name not in XLAND and file:
        raise ValueError(
            f"EnvConfig.suite_file={file!r} is for the XLand-MiniGrid-R* envs; "
            f"xminigrid:{name} has fixed rules. Leave it empty."
        )
    bench = _load_benchmark(name, file) if name in XLAND else None

    def reset_one(key):
        if bench is None:
            timestep = env.reset(params, key)
            return timestep, timestep.observation.astype(jnp.float32)
        key_rules, key = jax.random.split(key)
        rules = params.replace(ruleset=bench.sample_ruleset(key_rules))
        timestep = env.reset(rules, key)
        return (timestep, rules.ruleset), timestep.observation.astype(jnp.float32)

    def step_one(key, inner, action):
        del key  # xminigrid's steps are deterministic
        if bench is None:
            timestep, rules = inner, params
        else:
            timestep, rules = inner[0], params.replace(ruleset=inner[1])
        timestep = env.step(rules, timestep, action)
        last = timestep.step_type == _LAST
        return (
            timestep if bench is None else (timestep, rules.ruleset),
            timestep.observation.astype(jnp.float32),
            jnp.asarray(timestep.reward, jnp.float32),
            last & (timestep.discount == 0),
            last & (timestep.discount != 0),
        )

    spec = EnvSpec(
        name=f"xminigrid:{name}",
        obs_shape=tuple(env.observation_shape(params)),
        obs_dtype=jnp.float32,
        num_actions=int(env.num_actions(params)),
        num_envs=num_envs,
        max_episode_steps=int(params.max_steps),
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="xminigrid",
    extra="xminigrid",
    package="xminigrid",
    names=NAMES,
    build=make_xminigrid_env,
    about="XLand-MiniGrid: MiniGrid tasks, XLand rulesets from a file (agent's view)",
    file="XLand-MiniGrid-R* envs: a ruleset benchmark (xminigrid's bz2 pickle)",
)
