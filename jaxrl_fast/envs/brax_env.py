"""Brax (`pip install 'jaxrl-fast[brax]'`): continuous control on a grid of discrete actions
(`EnvConfig.discretise`, `envs.wrappers`), e.g. "brax:reacher" with `discretise=9`: the 2-joint
arm's 9 x 9 = 81 joint actions (the seed article's 81-action arm).

Brax's envs run on its "positional" pipeline here (`BACKEND`: the fast one of its four, as
Brax's own training examples pick for speed). A Brax env never times out by itself; its
episodes are truncated after `EPISODE_LENGTH` steps (Brax's `envs.create` default), and its
`done` (a fallen pendulum) terminates. Brax's step takes no key; the loop's is not used.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, make_batched_env
from jaxrl_fast.envs.wrappers import make_action_grid

NAMES = ("reacher", "pusher", "inverted_pendulum", "inverted_double_pendulum")
BACKEND = "positional"
EPISODE_LENGTH = 1000


def make_brax_env(
    name: str, num_envs: int, *, discretise: int | None = None, episode_length: int = EPISODE_LENGTH
) -> Env:
    """`num_envs` envs of Brax's `name` (one of `NAMES`) with `discretise` values per action
    dimension, truncated after `episode_length` steps.

    Raises:
      ValueError: `discretise` missing or not allowed (`envs.wrappers.make_action_grid`).
    """
    full = f"brax:{name}"
    if discretise is None:
        raise ValueError(
            f"EnvConfig.name={full!r} has a continuous action space; DQN needs discrete actions: "
            "set EnvConfig.discretise=N (N values per action dimension, e.g. 9: 81 actions on "
            "brax:reacher)."
        )
    from brax import envs

    env = envs.get_environment(name, backend=BACKEND)
    ones = np.ones(env.action_size, np.float32)
    grid = make_action_grid(-ones, ones, discretise, name=full)

    def reset_one(key):
        state = env.reset(key)
        return (state, jnp.int32(0)), state.obs

    def step_one(key, inner, action):
        del key  # Brax's step is deterministic
        state, t = env.step(inner[0], grid.to_continuous(action)), inner[1] + 1
        terminated = state.done > 0
        return (state, t), state.obs, state.reward, terminated, t >= episode_length

    spec = EnvSpec(
        name=full,
        obs_shape=(int(env.observation_size),),
        obs_dtype=jnp.float32,
        num_actions=grid.num_actions,
        num_envs=num_envs,
        max_episode_steps=episode_length,
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="brax",
    extra="brax",
    package="brax",
    names=NAMES,
    build=make_brax_env,
    about="Brax: continuous control on a grid of actions (EnvConfig.discretise)",
    continuous=True,
)
