"""Self-play against an opponent pool (`SelfPlayConfig`, docs/selfplay.md) in a two-player game
(`Env.against`: Pgx's board games).

Each seed keeps a pool of `pool_size` members on device, in its envs' state (`Versus.ctx`, a
`Pool`): member 0 is a fixed random legal player, the others snapshots of the learner's
parameters, which play greedily over their legal moves through the agent's own `q_values`
(masked). A snapshot joins every `add_every` updates, replacing the oldest once the pool is
full. Each env draws its opponent for each new episode by `SelfPlayConfig.sampling`, and every
ended game is counted per member: the learner's wins, draws and losses (`Pool.games`) and its
recent score (`Pool.score`, which "dynamic" sampling weighs members by). The evaluation plays the
env's own opponent, the random player. `jaxrl_fast.trained.selfplay` reads the pool after a run: the
counts, head-to-head records and an Elo table.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.agent.masks import legal_actions
from jaxrl_fast.config.hparams import hparams_of
from jaxrl_fast.envs.base import Opponent
from jaxrl_fast.loop.extension import Extension
from jaxrl_fast.loop.parts import LoopParts
from jaxrl_fast.types import Array

RECENT = 0.05  # a game's weight in `Pool.score` (an average over the last ~1 / RECENT games)
FLOOR = 0.1  # "dynamic": a member's weight is 1 + FLOOR - score, so every member keeps a chance
LATEST_SHARE = 0.5  # "latest": the newest snapshot's share of the draws
# Pools up to this size compute every member's reply and keep the drawn one's: with 8 members
# (Connect Four, MLP 256-256, 16 envs) a run's steps took 0.76x the time of gathering the drawn
# member's parameters per env (benchmarks/experiments/ab-selfplay-reply.md); larger pools gather
EVERY_MEMBER_UP_TO = 8


class Pool(NamedTuple):
    """One seed's opponent pool (leaves of `[P, ...]`, P = `pool_size`; member 0 is the random
    player, whose `params` row is unused)."""

    params: Any  # [P, *params]: the snapshots
    added: Array  # int32: snapshots added so far (member 1 + (k % (P - 1)) holds the k-th)
    games: Array  # [P, 3] float32: the learner's wins, draws, losses against each member
    score: Array  # [P] float32: its recent score against each (win 1, draw 0.5, loss 0)


def members_in(pool: Pool) -> Array:
    """`[P]` bool: the members that have joined (the random player and the snapshots so far)."""
    size = pool.score.shape[-1]
    return jnp.arange(size) <= jnp.minimum(pool.added, size - 1)


def newest(pool: Pool) -> Array:
    """The member holding the newest snapshot (0 before the first)."""
    size = pool.score.shape[-1]
    return jnp.where(pool.added > 0, 1 + (pool.added - 1) % (size - 1), 0)


def draw_weights(pool: Pool, sampling: str) -> Array:
    """`[P]` float32: each member's chance to be drawn for a new episode."""
    valid = members_in(pool).astype(jnp.float32)
    if sampling == "dynamic":
        weights = valid * (1.0 + FLOOR - pool.score)
    else:
        weights = valid
    weights = weights / weights.sum()
    if sampling == "latest":
        latest = jax.nn.one_hot(newest(pool), weights.shape[-1])
        weights = jnp.where(pool.added > 0, (1 - LATEST_SHARE) * weights + LATEST_SHARE * latest,
                            weights)  # fmt: skip
    return weights


def record_games(pool: Pool, member: Array, outcome: Array, ended: Array) -> Pool:
    """`pool` with the ended games (`member [E]`, the learner's `outcome [E]`) counted."""
    kind = jnp.where(outcome > 0, 0, jnp.where(outcome < 0, 2, 1))
    counts = jnp.zeros_like(pool.games).at[member, kind].add(ended.astype(jnp.float32))
    n = counts.sum(-1)
    mean = (counts[:, 0] + 0.5 * counts[:, 1]) / jnp.maximum(n, 1.0)
    # n games of the same mean score move the average as n games one after another would
    score = pool.score + (1.0 - (1.0 - RECENT) ** n) * (mean - pool.score)
    return pool._replace(games=pool.games + counts, score=score)


def add_snapshot(pool: Pool, params: Any) -> Pool:
    """`pool` with `params` joined in the oldest snapshot's place (its counts cleared)."""
    size = pool.score.shape[-1]
    slot = 1 + pool.added % (size - 1)
    return Pool(
        params=jax.tree.map(lambda p, x: p.at[slot].set(x.astype(p.dtype)), pool.params, params),
        added=pool.added + 1,
        games=pool.games.at[slot].set(0.0),
        score=pool.score.at[slot].set(0.5),
    )


def empty_pool(params: Any, size: int) -> Pool:
    """A pool of `size` members with only the random player in it (`params`: one set, arrays
    or shape structs)."""
    return Pool(
        params=jax.tree.map(lambda x: jnp.zeros((size, *x.shape), x.dtype), params),
        added=jnp.zeros((), jnp.int32),
        games=jnp.zeros((size, 3), jnp.float32),
        score=jnp.full((size,), 0.5, jnp.float32),
    )


def pool_opponent(q_values, num_actions: int, sampling: str) -> Opponent:
    """The `Opponent` of a pool: member 0 plays a random legal move, the others the greedy legal
    move of their snapshot's `q_values(params, obs [1, D]) -> [1, A]` (masked)."""

    def draw(key, pool: Pool):
        return jax.random.choice(key, pool.score.shape[-1], p=draw_weights(pool, sampling))

    def act(key, pool: Pool, member, game_state, obs):
        if pool.score.shape[-1] <= EVERY_MEMBER_UP_TO:
            # every member's Q-values, then the drawn one's: the pool's weights are read once
            # for all the envs (a batched matmul), not gathered per env
            q = jax.vmap(lambda p: q_values(p, obs[None])[0])(pool.params)[member]
        else:
            q = q_values(jax.tree.map(lambda p: p[member], pool.params), obs[None])[0]
        greedy = jnp.argmax(q)
        legal = legal_actions(obs, num_actions)
        random = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))
        return jnp.where(member == 0, random, greedy).astype(jnp.int32)

    return Opponent(draw=draw, act=act, record=record_games)


def selfplay(parts: LoopParts) -> Extension | None:
    config = parts.config
    sp = config.selfplay
    if not sp.active:
        return None
    if parts.env.against is None:
        raise ValueError(
            f"SelfPlayConfig.pool_size={sp.pool_size} needs a two-player game (Pgx's: "
            f"'pgx:tic_tac_toe', 'pgx:connect_four', 'pgx:othello', 'pgx:go_9x9'); "
            f"EnvConfig.name={config.env.name!r} is not one. Set pool_size=0."
        )
    spec = parts.env.spec
    obs = jax.ShapeDtypeStruct((spec.num_envs, *spec.obs_shape), spec.obs_dtype)
    params = jax.eval_shape(
        lambda k, o: parts.agent.init(k, o, hparams_of(config)).params, jax.random.key(0), obs
    )
    opponent = pool_opponent(parts.agent.q_values, spec.num_actions, sp.sampling)
    start = empty_pool(params, sp.pool_size)
    per_block, every = config.updates_per_block, sp.add_every

    def env(seeded):
        return seeded.against(opponent, start)

    def snapshot(seeds, stats, block, training):
        # a snapshot joins when this block's updates reach a multiple of `add_every`
        due = training & (((block + 1) * per_block) // every > (block * per_block) // every)
        pool = seeds.env_state.ctx
        new = jax.vmap(add_snapshot)(pool, seeds.agent.params)
        pool = jax.tree.map(lambda a, b: jnp.where(due, a, b), new, pool)
        return seeds._replace(env_state=seeds.env_state._replace(ctx=pool))

    return Extension("selfplay", env=env, after_block=snapshot)
