"""The self-play pool (`loop.extensions.selfplay`): snapshots, sampling rules, game records, the
pool's opponent, and a two-player env against an opponent with a state (`Env.against`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.envs.base import Opponent
from jaxrl_fast.loop.extensions.selfplay import (
    FLOOR,
    RECENT,
    add_snapshot,
    draw_weights,
    empty_pool,
    members_in,
    newest,
    pool_opponent,
    record_games,
)


def _pool_with(snapshots: int, size: int = 4):
    pool = empty_pool({"w": jnp.zeros(3)}, size)
    for k in range(1, snapshots + 1):
        pool = add_snapshot(pool, {"w": jnp.full(3, float(k))})
    return pool


def test_snapshots_fill_a_ring_after_the_random_player():
    pool = _pool_with(0)
    assert members_in(pool).tolist() == [True, False, False, False]
    assert int(newest(pool)) == 0
    for rule in ("uniform", "latest", "dynamic"):  # only the random player to draw
        np.testing.assert_allclose(draw_weights(pool, rule), [1, 0, 0, 0])
    pool = _pool_with(2)
    assert members_in(pool).tolist() == [True, True, True, False]
    assert int(newest(pool)) == 2
    pool = _pool_with(5)  # slots 1, 2, 3, then 4 -> 1 and 5 -> 2
    assert pool.params["w"][:, 0].tolist() == [0, 4, 5, 3]
    assert int(pool.added) == 5 and int(newest(pool)) == 2
    assert members_in(pool).all()


def test_sampling_rules():
    pool = _pool_with(5)._replace(score=jnp.array([0.5, 0.9, 0.1, 0.5]))
    np.testing.assert_allclose(draw_weights(pool, "uniform"), [0.25] * 4, rtol=1e-6)
    # "latest": half the draws the newest snapshot (member 2), half uniform
    np.testing.assert_allclose(draw_weights(pool, "latest"), [0.125, 0.125, 0.625, 0.125],
                               rtol=1e-6)  # fmt: skip
    # "dynamic": 1 + FLOOR - the learner's recent score against each
    w = 1 + FLOOR - np.array([0.5, 0.9, 0.1, 0.5])
    np.testing.assert_allclose(draw_weights(pool, "dynamic"), w / w.sum(), rtol=1e-6)
    # the opponent's draws follow the weights
    opponent = pool_opponent(lambda p, o: p["w"][None], 3, "dynamic")
    keys = jax.random.split(jax.random.key(0), 8000)
    draws = np.asarray(jax.vmap(opponent.draw, (0, None))(keys, pool))
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 8000, w / w.sum(), atol=0.02)


def test_record_games_counts_outcomes_and_their_recent_score():
    pool = _pool_with(3)
    member = jnp.array([1, 1, 2, 0, 3])
    outcome = jnp.array([1.0, -1.0, 0.0, 1.0, 1.0])
    ended = jnp.array([True, True, True, False, True])
    new = record_games(pool, member, outcome, ended)
    np.testing.assert_array_equal(new.games, [[0, 0, 0], [1, 0, 1], [0, 1, 0], [1, 0, 0]])
    assert float(new.score[0]) == 0.5  # no game ended against the random player
    np.testing.assert_allclose(new.score[3], 0.5 + RECENT * 0.5, rtol=1e-6)
    # k games at once move the score as k games one at a time (the same outcome)
    at_once = record_games(pool, jnp.array([3, 3, 3]), jnp.array([-1.0] * 3), jnp.ones(3, bool))
    one = pool
    for _ in range(3):
        one = record_games(one, jnp.array([3]), jnp.array([-1.0]), jnp.ones(1, bool))
    np.testing.assert_allclose(at_once.score, one.score, rtol=1e-6)
    # a new snapshot in a member's place starts with no games and an even score
    replaced = add_snapshot(add_snapshot(add_snapshot(new, {"w": jnp.ones(3)}), {"w": jnp.ones(3)}),
                            {"w": jnp.ones(3)})  # fmt: skip
    np.testing.assert_array_equal(replaced.games, np.zeros((4, 3)))
    np.testing.assert_allclose(replaced.score, [0.5] * 4)


@pytest.mark.parametrize("size", [4, 10])  # every member's Q-values; the drawn one's gathered
def test_pool_members_play_legal_moves(size):
    """Member 0 plays a random legal move; a snapshot its greedy move over the legal ones."""
    w = jnp.zeros((size, 3)).at[1].set(jnp.array([5.0, 9.0, 1.0]))
    pool = _pool_with(1, size)._replace(params={"w": w})
    opponent = pool_opponent(lambda p, o: jnp.where(o[:, -3:] != 0, p["w"], -1e30), 3, "uniform")
    obs = jnp.array([0.3, 0.7, 1.0, 0.0, 1.0])  # features, then the mask: action 1 illegal
    assert int(opponent.act(jax.random.key(0), pool, jnp.int32(1), None, obs)) == 0
    keys = jax.random.split(jax.random.key(1), 400)
    moves = np.asarray(
        jax.vmap(opponent.act, (0, None, None, None, None))(keys, pool, 0, None, obs)
    )
    assert set(moves.tolist()) == {0, 2}


def _lowest_legal(key, state):
    return jnp.argmax(state.legal_action_mask).astype(jnp.int32)


def test_a_stateful_opponent_plays_as_the_fixed_one_and_records_every_outcome():
    """Tic-tac-toe against the lowest-legal-square player, once as a fixed opponent and once as
    an `Opponent` with a pool as its state: the same steps; the pool counts the learner's win,
    loss on the reply, draw and illegal move against the member the env drew."""
    pytest.importorskip("pgx")
    from jaxrl_fast.envs.pgx_env import make_versus_env

    fixed = make_versus_env("tic_tac_toe", 1, opponent=_lowest_legal)
    opponent = Opponent(
        draw=lambda key, ctx: jnp.int32(2),
        act=lambda key, ctx, member, state, obs: _lowest_legal(key, state),
        record=record_games,
    )
    stateful = fixed.against(opponent, _pool_with(2))
    assert stateful.spec == fixed.spec and stateful.against is not None
    steps = {name: (jax.jit(e.reset), jax.jit(e.step)) for name, e in
             (("fixed", fixed), ("stateful", stateful))}  # fmt: skip
    opener = next(  # a reset key where the learner opens
        k
        for k in range(16)
        if not np.asarray(steps["fixed"][0](jax.random.key(k))[1])[0, :18].any()
    )
    games = [[4, 3, 5], [8, 7, 5], [1, 3, 4, 6, 8], [4, 4]]  # win, loss, draw, illegal move
    finals = {}
    for name, (reset, step) in steps.items():
        rewards, ctx = [], None
        for moves in games:
            state, _ = reset(jax.random.key(opener))
            if ctx is not None:
                state = state._replace(ctx=ctx)
            for i, a in enumerate(moves):
                state, obs, r, done, info = step(jax.random.key(100 + i), state, jnp.array([a]))
                rewards.append((float(r[0]), bool(done[0])))
            ctx = getattr(state, "ctx", None)
        finals[name] = rewards, ctx
    assert finals["fixed"][0] == finals["stateful"][0]
    ends = [r for r, d in finals["fixed"][0] if d]
    assert ends == [1.0, -1.0, 0.0, -1.0]
    pool = finals["stateful"][1]
    np.testing.assert_array_equal(pool.games[2], [1, 1, 2])  # member 2: W, D, L (+ illegal)
    assert float(np.asarray(pool.games).sum()) == 4
