"""Self-play results: games between players of a two-player env, head-to-head records, and an
Elo table of a self-play run's pool (`SelfPlayConfig`, `loop.extensions.selfplay`,
docs/selfplay.md).

A player is a set of the agent's parameters, playing the greedy legal move of its Q-values, or
None, the random legal player. Games run on device, every pair of a round robin at once (a
`vmap` over the pairs of `games` envs each; sides drawn per game, as in training):

    >>> from jaxrl_fast import presets, train
    >>> result = train(presets.get("selfplay-connect-four"))  # doctest: +SKIP
    >>> table = report(result, games=200)  # doctest: +SKIP
    >>> print(table.markdown())  # doctest: +SKIP

Elo ratings are the Bradley-Terry maximum-likelihood fit of the round robin's scores (a win 1, a
draw 0.5), on the Elo scale (400 points: 10-to-1 odds), anchored at the random player's 0.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.agent.dqn import Agent
from jaxrl_fast.agent.evaluate import play_episodes
from jaxrl_fast.agent.masks import legal_actions
from jaxrl_fast.envs.base import Env, Opponent
from jaxrl_fast.envs.make import make_env
from jaxrl_fast.envs.seeded import make_seeded_env
from jaxrl_fast.loop.extensions.selfplay import Pool, members_in, newest

ELO = 400.0 / np.log(10.0)  # Elo points per natural-log unit of odds


def _chooser(agent: Agent, num_actions: int):
    """`choose(player, key, obs [E, D]) -> actions [E]`: `player = (params, random)`."""

    def choose(player, key, obs):
        params, random = player
        greedy = jnp.argmax(agent.q_values(params, obs), -1)
        legal = legal_actions(obs, num_actions)
        draws = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf), axis=-1)
        return jnp.where(random, draws, greedy).astype(jnp.int32)

    return choose


def make_match(agent: Agent, env: Env):
    """`match(keys [N], a, b) -> [N, 3]` int32 (a's wins, draws, losses): `N` matches at once,
    each `env.spec.num_envs` games of player `a` against player `b` (`(params [N, ...], random
    [N] bool)`, a fixed random legal player where `random`), sides drawn per game.

    Args:
      agent: the agent whose `q_values` the players' parameters go through.
      env: a two-player env (`Env.against`) of `games` envs.
    """
    if env.against is None:
        raise ValueError(f"{env.spec.name!r} is not a two-player env (Env.against is None).")
    choose = _chooser(agent, env.spec.num_actions)
    opponent = Opponent(
        draw=lambda key, player: jnp.int32(1),
        act=lambda key, player, member, game_state, obs: choose(player, key, obs[None])[0],
        record=lambda player, member, outcome, ended: player,
    )

    def one(key, a, b):
        seeded = make_seeded_env(env.against(opponent, b), 1)

        def act(keys, obs, state):
            return choose(a, keys[0], obs[0])[None], state

        returns = play_episodes(seeded, act, lambda e: (), key[None])[0]
        return jnp.stack([(returns > 0).sum(), (returns == 0).sum(), (returns < 0).sum()])

    return jax.jit(jax.vmap(one))


def stack_players(players: Sequence[Any], like: Any):
    """Players (params or None) as one `(params [N, ...], random [N])`."""
    zeros = jax.tree.map(jnp.zeros_like, like)
    params = [zeros if p is None else p for p in players]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *params)
    return stacked, jnp.array([p is None for p in players])


def round_robin(agent: Agent, env: Env, players: Sequence[Any], *, key: jax.Array) -> np.ndarray:
    """`[M, M, 3]` records of every pair of `players` (params, or None for the random player):
    entry `[i, j]` is i's wins, draws and losses in `env.spec.num_envs` games against j (and
    `[j, i]` the same games from j's side); the diagonal is zero."""
    like = next(p for p in players if p is not None)
    pairs = [(i, j) for i in range(len(players)) for j in range(i + 1, len(players))]
    a = stack_players([players[i] for i, _ in pairs], like)
    b = stack_players([players[j] for _, j in pairs], like)
    counts = np.asarray(make_match(agent, env)(jax.random.split(key, len(pairs)), a, b))
    out = np.zeros((len(players), len(players), 3), np.int64)
    for (i, j), c in zip(pairs, counts, strict=True):
        out[i, j] = c
        out[j, i] = c[::-1]
    return out


def elo(records: np.ndarray, *, anchor: int = 0, prior_draws: float = 1.0) -> np.ndarray:
    """`[M]` Elo ratings from `[M, M, 3]` head-to-head records (wins, draws, losses of row
    against column): the Bradley-Terry maximum-likelihood fit of the scores (a draw half a win),
    with `prior_draws` virtual draws added to every pair that played (keeping a player that
    never scored finite), player `anchor` at 0.

    Raises:
      ValueError: records that are not `[M, M, 3]`.
    """
    records = np.asarray(records, np.float64)
    if records.ndim != 3 or records.shape[0] != records.shape[1] or records.shape[2] != 3:
        raise ValueError(f"records must be [M, M, 3]; got shape {records.shape}.")
    games = records.sum(-1)
    played = games > 0
    score = records[..., 0] + 0.5 * records[..., 1] + 0.5 * prior_draws * played
    games = games + prior_draws * played
    r = np.zeros(len(records))
    for _ in range(10_000):  # Newton steps on the concave log-likelihood
        p = 1.0 / (1.0 + np.exp(r[None, :] - r[:, None]))  # P(row beats column)
        grad = (score - games * p).sum(1)
        w = games * p * (1 - p)
        hess = np.diag(w.sum(1)) - w
        keep = np.arange(len(r)) != anchor
        step = np.zeros_like(r)
        step[keep] = np.linalg.lstsq(hess[np.ix_(keep, keep)], grad[keep], rcond=None)[0]
        r = r + step
        if np.abs(step).max() < 1e-10:
            break
    return (r - r[anchor]) * ELO


@dataclasses.dataclass
class SelfPlayReport:
    """One seed's pool after a self-play run (`report`).

    Attributes:
      names: the players: "random", the snapshots as "snapshot k" (the k-th added), "learner"
        (the final parameters).
      training: `[M, 3]` the learner's wins, draws, losses against each member during training
        since it joined (the learner's own row: zeros).
      records: `[M, M, 3]` the round robin's records.
      ratings: `[M]` Elo ratings, the random player at 0.
      games: games per pair.
    """

    names: list[str]
    training: np.ndarray
    records: np.ndarray
    ratings: np.ndarray
    games: int

    def win_rate(self, i: int, j: int) -> float:
        """Player i's share of wins in its games against player j."""
        return float(self.records[i, j, 0] / max(self.records[i, j].sum(), 1))

    def markdown(self) -> str:
        """The Elo table, with each player's record against the random player."""
        lines = [
            "| player | Elo | vs random (W/D/L) | training games vs it (learner W/D/L) |",
            "|---|---:|---:|---:|",
        ]
        for i, name in enumerate(self.names):
            vs = "-" if i == 0 else "/".join(str(int(x)) for x in self.records[i, 0])
            tr = "/".join(str(int(x)) for x in self.training[i])
            lines.append(f"| {name} | {self.ratings[i]:.0f} | {vs} | {tr} |")
        return "\n".join(lines)


def report(result, *, games: int = 100, seed: int = 0, key: jax.Array | None = None):
    """The pool of seed `seed` of a self-play run (`TrainResult`): the training records, a round
    robin of `games` games per pair between the random player, the snapshots (oldest first) and
    the final learner, and their Elo table.

    Raises:
      ValueError: a run without self-play (`SelfPlayConfig.pool_size` 0).
    """
    config = result.config
    if not config.selfplay.active:
        raise ValueError("report needs a self-play run (SelfPlayConfig.pool_size > 0).")
    pool: Pool = jax.tree.map(lambda x: x[seed], result.runner.seeds.env_state.ctx)
    size = pool.score.shape[0]
    joined = np.flatnonzero(np.asarray(members_in(pool)))[1:]  # the snapshots' slots
    last = int(newest(pool))
    # oldest first: the slot after the newest is the oldest once the ring has wrapped
    order = sorted(joined, key=lambda s: (s - last - 1) % (size - 1))
    added = int(pool.added)
    names = ["random"] + [f"snapshot {added - len(order) + k + 1}" for k in range(len(order))]
    params = result.runner.seeds.agent.params
    learner = jax.tree.map(lambda x: x[seed], params)
    players = [None] + [jax.tree.map(lambda x, s=s: x[s], pool.params) for s in order] + [learner]
    agent = player_agent(config)
    env = make_env(config.env.name, games)
    key = jax.random.key(config.seed + 2) if key is None else key
    records = round_robin(agent, env, players, key=key)
    training = np.concatenate([np.asarray(pool.games)[[0, *order]], np.zeros((1, 3))])
    return SelfPlayReport(names + ["learner"], training, records, elo(records), games)


def player_agent(config) -> Agent:
    """The agent (its functions) a run of `config` trains, to play its players with: the
    library's one `agent.build.agent_of`, on the env and precision `config` resolves to."""
    from jaxrl_fast.agent.build import agent_of
    from jaxrl_fast.agent.schedules import make_schedules
    from jaxrl_fast.loop.resolve import resolve

    run = resolve(config.replace(num_seeds=1))
    schedules = make_schedules(run.config)
    return agent_of(
        run.config, run.env.spec, run.precision, schedules, conv_impl=run.choices.conv_impl
    )
