"""Craftax (`pip install 'jaxrl-fast[craftax]'`): "craftax:Craftax-Symbolic-v1" and
"craftax:Craftax-Classic-Symbolic-v1", their flat symbolic observations (float32 vectors).

Craftax ends an episode at death (and, in Craftax, at the boss's defeat; in Classic, in lava)
or at `max_timesteps` (100,000 and 10,000 steps). Its `done` joins the two; here the first is
`terminated` and the step limit alone is `truncated`, so the limit bootstraps. Craftax's own
auto-reset is not used (`make_craftax_env_from_name(..., auto_reset=False)`).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, make_batched_env

NAMES = ("Craftax-Symbolic-v1", "Craftax-Classic-Symbolic-v1")
_NO_LIMIT = 2**30  # a step limit no episode reaches: `is_terminal` then means death (or the boss)


def make_craftax_env(name: str, num_envs: int) -> Env:
    """`num_envs` envs of Craftax's `name` (one of `NAMES`)."""
    from craftax.craftax_env import make_craftax_env_from_name

    env = make_craftax_env_from_name(name, auto_reset=False)
    params = env.default_params
    unlimited = params.replace(max_timesteps=_NO_LIMIT)

    def reset_one(key):
        obs, state = env.reset_env(key, params)
        return state, obs

    def step_one(key, state, action):
        obs, state, reward, _, _ = env.step_env(key, state, action, params)
        terminated = jnp.asarray(env.is_terminal(state, unlimited), bool)
        truncated = state.timestep >= params.max_timesteps
        return state, obs, jnp.asarray(reward, jnp.float32), terminated, truncated

    spec = EnvSpec(
        name=f"craftax:{name}",
        obs_shape=tuple(env.observation_space(params).shape),
        obs_dtype=jnp.float32,
        num_actions=int(env.num_actions),
        num_envs=num_envs,
        max_episode_steps=int(params.max_timesteps),
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="craftax",
    extra="craftax",
    package="craftax",
    names=NAMES,
    build=make_craftax_env,
    about="Craftax: open-ended survival and crafting (symbolic observations)",
)
