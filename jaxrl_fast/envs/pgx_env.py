"""Pgx (`pip install 'jaxrl-fast[pgx]'`): its single-player MinAtar games, e.g.
"pgx:minatar-breakout" (10 x 10 x C boolean frames, sticky actions with probability 0.1 as Pgx
sets them).

Pgx carries no time limit for MinAtar; the adapter truncates an episode after `MAX_STEPS` steps
(gymnax's MinAtar limit), so that a policy that never loses still ends its evaluation episodes.
The reward is the one of the player who moved (`rewards[current_player]` before the step: player
0 in these one-player games). Pgx's games with legal-action masks (2048, the board games) come
with the masks.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, make_batched_env

NAMES = tuple(
    f"minatar-{g}" for g in ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
)
MAX_STEPS = 1000  # gymnax's max_steps_in_episode for MinAtar


def make_pgx_env(name: str, num_envs: int, *, max_steps: int = MAX_STEPS) -> Env:
    """`num_envs` envs of Pgx's `name` (one of `NAMES`), truncated after `max_steps` steps."""
    import pgx

    env = pgx.make(name)

    def reset_one(key):
        state = env.init(key)
        return (state, jnp.int32(0)), state.observation

    def step_one(key, inner, action):
        state, t = inner
        mover = state.current_player
        state = env.step(state, action, key)
        t = t + 1
        return (
            (state, t),
            state.observation,
            jnp.asarray(state.rewards[mover], jnp.float32),
            state.terminated,
            state.truncated | (t >= max_steps),
        )

    spec = EnvSpec(
        name=f"pgx:{name}",
        obs_shape=tuple(env.observation_shape),
        obs_dtype=jnp.bool_,
        num_actions=int(env.num_actions),
        num_envs=num_envs,
        max_episode_steps=max_steps,
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="pgx",
    extra="pgx",
    package="pgx",
    names=NAMES,
    build=make_pgx_env,
    about="Pgx: MinAtar games (boolean frames, sticky actions)",
)
