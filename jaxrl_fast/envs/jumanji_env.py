"""Jumanji (`pip install 'jaxrl-fast[jumanji]'`): "jumanji:Snake-v1", "jumanji:Game2048-v1",
"jumanji:Minesweeper-v0", envs with legal-action masks.

Each observation is the env's board (Snake's 12 x 12 x 5 grid; 2048's 4 x 4 exponents;
Minesweeper's 10 x 10 board) flattened to float32, with the env's `action_mask` appended
(`EnvSpec.action_mask`, `agent.masks`): the agent explores and bootstraps over legal actions
only. Minesweeper's (row, column) action is one of 100 (row-major). Counters the board already
implies (`step_count`, `num_mines`) are left out.

Jumanji keeps its key in its state and does not auto-reset; its last step has discount 0 at a
termination and 1 at its time limit (Snake's 4,000 steps), which become `terminated` and
`truncated`. Envs without a time limit get `MAX_STEPS` here, so that evaluation episodes end.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, append_legal, make_batched_env

# env name -> the observation fields the agent sees (the action mask is always appended)
FIELDS = {"Snake-v1": ("grid",), "Game2048-v1": ("board",), "Minesweeper-v0": ("board",)}
NAMES = tuple(FIELDS)
MAX_STEPS = 1000
_LAST = 2  # jumanji's StepType.LAST


def make_jumanji_env(name: str, num_envs: int, *, max_steps: int = MAX_STEPS) -> Env:
    """`num_envs` envs of Jumanji's `name` (one of `NAMES`); envs without their own time limit
    are truncated after `max_steps` steps."""
    import jumanji

    env = jumanji.make(name)
    spec_a = env.action_spec
    shape = tuple(int(n) for n in jnp.atleast_1d(jnp.asarray(spec_a.num_values)))
    num_actions = math.prod(shape)
    limit = int(getattr(env, "time_limit", 0) or max_steps)
    own_limit = bool(getattr(env, "time_limit", 0))

    def observe(timestep):
        parts = [getattr(timestep.observation, f).astype(jnp.float32) for f in FIELDS[name]]
        flat = jnp.concatenate([p.reshape(-1) for p in parts])
        return append_legal(flat, timestep.observation.action_mask.reshape(-1))

    def to_env(action):
        if len(shape) == 1 and spec_a.shape == ():
            return action
        return jnp.stack(jnp.unravel_index(action, shape)).astype(jnp.int32)

    def reset_one(key):
        state, timestep = env.reset(key)
        return (state, jnp.int32(0)), observe(timestep)

    def step_one(key, inner, action):
        del key  # jumanji's randomness comes from the key in its state
        state, t_next = inner[0], inner[1] + 1
        state, timestep = env.step(state, to_env(action))
        last = timestep.step_type == _LAST
        terminated = last & (timestep.discount == 0)
        truncated = last & (timestep.discount != 0)
        if not own_limit:
            truncated = truncated | (t_next >= limit)
        reward = jnp.asarray(timestep.reward, jnp.float32)
        return (state, t_next), observe(timestep), reward, terminated, truncated

    example = jax.eval_shape(lambda k: reset_one(k)[1], jax.random.key(0))
    spec = EnvSpec(
        name=f"jumanji:{name}",
        obs_shape=tuple(example.shape),
        obs_dtype=jnp.float32,
        num_actions=num_actions,
        num_envs=num_envs,
        max_episode_steps=limit,
        action_mask=True,
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="jumanji",
    extra="jumanji",
    package="jumanji",
    names=NAMES,
    build=make_jumanji_env,
    about="Jumanji: Snake, 2048, Minesweeper (legal-action masks)",
)
