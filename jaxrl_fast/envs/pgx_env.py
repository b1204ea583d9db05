"""Pgx (`pip install 'jaxrl-fast[pgx]'`): its single-player games, the MinAtar ones, e.g.
"pgx:minatar-breakout" (10 x 10 x C boolean frames, sticky actions with probability 0.1 as Pgx
sets them), and "pgx:2048", whose moves are masked: its 4 x 4 x 31 boolean board flattened with
the legal-action mask appended (`EnvSpec.action_mask`, `agent.masks`).

Pgx carries no time limit for these games; the adapter truncates an episode after `MAX_STEPS`
steps (gymnax's MinAtar limit), so that a policy that never loses still ends its evaluation
episodes. The reward is the one of the player who moved (`rewards[current_player]` before the
step: player 0 in these one-player games).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, append_legal, make_batched_env

MASKED = ("2048",)  # games with a legal-action mask
NAMES = MASKED + tuple(
    f"minatar-{g}" for g in ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
)
MAX_STEPS = 1000  # gymnax's max_steps_in_episode for MinAtar


def make_pgx_env(name: str, num_envs: int, *, max_steps: int = MAX_STEPS) -> Env:
    """`num_envs` envs of Pgx's `name` (one of `NAMES`), truncated after `max_steps` steps."""
    import pgx

    env = pgx.make(name)
    masked = name in MASKED

    def observe(state):
        return (
            append_legal(state.observation, state.legal_action_mask)
            if masked
            else (state.observation)
        )

    def reset_one(key):
        state = env.init(key)
        return (state, jnp.int32(0)), observe(state)

    def step_one(key, inner, action):
        state, t = inner
        mover = state.current_player
        state = env.step(state, action, key)
        t = t + 1
        return (
            (state, t),
            observe(state),
            jnp.asarray(state.rewards[mover], jnp.float32),
            state.terminated,
            state.truncated | (t >= max_steps),
        )

    spec = EnvSpec(
        name=f"pgx:{name}",
        obs_shape=tuple(jax.eval_shape(lambda k: reset_one(k)[1], jax.random.key(0)).shape),
        obs_dtype=jnp.bool_,
        num_actions=int(env.num_actions),
        num_envs=num_envs,
        max_episode_steps=max_steps,
        action_mask=masked,
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="pgx",
    extra="pgx",
    package="pgx",
    names=NAMES,
    build=make_pgx_env,
    about="Pgx: 2048 (legal-action masks) and the MinAtar games",
)
