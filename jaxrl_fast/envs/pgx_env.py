"""Pgx (`pip install 'jaxrl-fast[pgx]'`): its single-player games, the MinAtar ones, e.g.
"pgx:minatar-breakout" (10 x 10 x C boolean frames, sticky actions with probability 0.1 as Pgx
sets them), and "pgx:2048", whose moves are masked: its 4 x 4 x 31 boolean board flattened with
the legal-action mask appended (`EnvSpec.action_mask`, `agent.masks`); and its two-player
board games against an opponent (`make_versus_env`): "pgx:tic_tac_toe", "pgx:connect_four",
"pgx:othello", "pgx:go_9x9", masked the same way.

Pgx carries no time limit for the one-player games; the adapter truncates an episode after
`MAX_STEPS` steps (gymnax's MinAtar limit), so that a policy that never loses still ends its
evaluation episodes. The reward is the one of the player who moved (`rewards[current_player]`
before the step: player 0 in the one-player games).

In a two-player game the learner plays one side, drawn per episode; one env step is its move
and the opponent's reply, and its reward is the learner's entry of Pgx's reward vector at both
(Pgx gives +1 to the winner, -1 to the loser, 0 at a draw, and -1 to a player whose move is
illegal, ending the game). Its observation is Pgx's view for the learner's side, also at the
end of a game (when Pgx's current player may be the opponent). The opponent is a random legal
player by default; `make_versus_env(opponent=...)` takes another: a fixed player, or an
`envs.base.Opponent` with a state of its own (the self-play pool, `loop.extensions.selfplay`),
through `Env.against`.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxrl_fast.envs.base import (
    Env,
    EnvSpec,
    Opponent,
    Suite,
    Versus,
    append_legal,
    fixed_opponent,
    make_batched_env,
)

MASKED = ("2048",)  # one-player games with a legal-action mask
TWO_PLAYER = ("tic_tac_toe", "connect_four", "othello", "go_9x9")  # against an opponent
NAMES = (
    MASKED
    + TWO_PLAYER
    + tuple(
        f"minatar-{g}" for g in ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
    )
)
MAX_STEPS = 1000  # gymnax's max_steps_in_episode for MinAtar


def make_pgx_env(name: str, num_envs: int, *, max_steps: int = MAX_STEPS) -> Env:
    """`num_envs` envs of Pgx's `name` (one of `NAMES`), truncated after `max_steps` steps (a
    two-player game: against a random legal player, `make_versus_env`)."""
    import pgx

    if name in TWO_PLAYER:
        return make_versus_env(name, num_envs, max_steps=max_steps)
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


def random_legal(key, state) -> jax.Array:
    """A uniformly random legal move of Pgx's `state` (the default opponent)."""
    logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def make_versus_env(
    name: str,
    num_envs: int,
    *,
    opponent: Opponent | Callable = random_legal,
    ctx: Any = None,
    max_steps: int = MAX_STEPS,
) -> Env:
    """`num_envs` envs of Pgx's two-player `name` (one of `TWO_PLAYER`) in which the learner
    plays a side drawn per episode against `opponent` (module docstring); truncated after
    `max_steps` of the learner's moves.

    Args:
      opponent: a fixed player, `opponent(key, pgx_state) -> action`, or an `Opponent` with a
        state of its own (`envs.base.Opponent`: a self-play pool), whose state starts at `ctx`.
      ctx: with an `Opponent`, its initial state: the env's state is then `Versus(envs, ctx)`.
    """
    import pgx

    env = pgx.make(name)
    stateful = isinstance(opponent, Opponent)
    opp = opponent if stateful else fixed_opponent(opponent)

    def view(state, side):
        with warnings.catch_warnings():  # Pgx deprecates the player argument (trace time)
            warnings.simplefilter("ignore", DeprecationWarning)
            obs = env.observe(state, side)
        return append_legal(obs, state.legal_action_mask)

    def reply(key, state, learner, member, ctx):
        """The opponent's move where it is its turn in a running game; its reward vector (zeros
        where it did not move)."""
        moves = (state.current_player != learner) & ~(state.terminated | state.truncated)
        action = opp.act(key, ctx, member, state, view(state, 1 - learner))
        after = env.step(state, action, key)
        state = jax.tree.map(lambda a, b: jnp.where(moves, a, b), after, state)
        return state, jnp.where(moves, after.rewards, 0.0)

    def reset_one(key, ctx):
        k_init, k_side, k_reply = jax.random.split(key, 3)
        learner = jax.random.bernoulli(k_side).astype(jnp.int32)
        member = jnp.asarray(opp.draw(jax.random.fold_in(k_reply, 1), ctx), jnp.int32)
        state, _ = reply(k_reply, env.init(k_init), learner, member, ctx)  # it may open
        return (state, learner, jnp.int32(0), member), view(state, learner)

    def step_one(key, inner, action, ctx):
        state, learner, t, member = inner
        k_move, k_reply = jax.random.split(key)
        state = env.step(state, action, k_move)  # the learner's move (illegal: it loses)
        reward = state.rewards[learner]
        state, replied = reply(k_reply, state, learner, member, ctx)
        t = t + 1
        terminated = state.terminated
        truncated = (state.truncated | (t >= max_steps)) & ~terminated
        reward = (reward + replied[learner]).astype(jnp.float32)
        return (state, learner, t, member), view(state, learner), reward, terminated, truncated

    def batched(ctx) -> Env:  # the envs against the opponent in state `ctx`
        reset = functools.partial(reset_one, ctx=ctx)
        return make_batched_env(spec, reset, functools.partial(step_one, ctx=ctx))

    example = jax.eval_shape(lambda k: reset_one(k, ctx)[1], jax.random.key(0))
    spec = EnvSpec(
        name=f"pgx:{name}",
        obs_shape=tuple(example.shape),
        obs_dtype=jnp.bool_,
        num_actions=int(env.num_actions),
        num_envs=num_envs,
        max_episode_steps=max_steps,
        action_mask=True,
    )

    def against(opponent: Opponent, ctx: Any) -> Env:
        return make_versus_env(name, num_envs, opponent=opponent, ctx=ctx, max_steps=max_steps)

    if not stateful:
        return batched(None)._replace(against=against)

    def reset(key):
        state, obs = batched(ctx).reset(key)
        return Versus(state, ctx), obs

    def step(key, versus: Versus, action):
        state, obs, reward, done, info = batched(versus.ctx).step(key, versus.envs, action)
        member = state.inner[3]  # an ended episode's opponent (its env resets at the next step)
        new_ctx = opp.record(versus.ctx, member, info["episode_return"], done)
        return Versus(state, new_ctx), obs, reward, done, info

    return Env(spec, reset, step, against=against)


SUITE = Suite(
    prefix="pgx",
    extra="pgx",
    package="pgx",
    names=NAMES,
    build=make_pgx_env,
    about="Pgx: board games vs a random player, 2048 (masked), MinAtar",
)
