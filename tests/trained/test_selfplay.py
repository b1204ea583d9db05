"""Self-play (`SelfPlayConfig`, `loop.extensions.selfplay`) in a training run, and its results
(`jaxrl_fast.trained.selfplay`): games between players, round robins, the Elo fit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import SelfPlayConfig, TrainConfig
from jaxrl_fast.trained import selfplay

# -- the Elo fit (no env needed) ----------------------------------------------------------------


def test_elo_of_two_players_is_the_log_odds_of_their_score():
    records = np.zeros((2, 2, 3))
    records[0, 1] = [30, 0, 70]  # player 0 scores 0.3 against player 1
    records[1, 0] = [70, 0, 30]
    r = selfplay.elo(records, prior_draws=0.0)
    assert r[0] == 0.0
    np.testing.assert_allclose(r[1], 400 * np.log10(0.7 / 0.3), rtol=1e-8)
    # the anchor moves the scale, not the gaps
    r1 = selfplay.elo(records, prior_draws=0.0, anchor=1)
    np.testing.assert_allclose(r1, r - r[1], atol=1e-8)
    # draws count half a win
    records[0, 1] = records[1, 0] = [10, 80, 10]
    np.testing.assert_allclose(selfplay.elo(records, prior_draws=0.0), [0, 0], atol=1e-8)


def test_elo_recovers_the_ratings_behind_expected_scores():
    truth = np.array([0.0, 200.0, -100.0, 350.0])
    n = 100.0
    records = np.zeros((4, 4, 3))
    for i in range(4):
        for j in range(4):
            if i != j:
                p = 1 / (1 + 10 ** ((truth[j] - truth[i]) / 400))
                records[i, j] = [n * p, 0, n * (1 - p)]
    np.testing.assert_allclose(selfplay.elo(records, prior_draws=0.0), truth, atol=1e-6)


def test_elo_keeps_a_player_that_never_scored_finite():
    records = np.zeros((2, 2, 3))
    records[0, 1], records[1, 0] = [0, 0, 50], [50, 0, 0]
    r = selfplay.elo(records)  # one virtual draw per pair
    assert np.isfinite(r).all() and r[1] > 500
    with pytest.raises(ValueError, match=r"\[M, M, 3\]"):
        selfplay.elo(np.zeros((2, 3, 3)))


# -- games and a self-play run (Pgx) ---------------------------------------------------------

STEPS, UPDATES_PER_SNAPSHOT = 2_048, 32


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("pgx")
    from jaxrl_fast.run.train import train

    cfg = TrainConfig().replace(
        env={"name": "pgx:tic_tac_toe", "num_envs": 8},
        network={"kind": "mlp", "hidden_sizes": (32,)},
        replay={"capacity": 2_048, "batch_size": 32},
        dqn={"target_period": 64},
        train_frequency=8,
        learning_starts=512,
        total_env_steps=STEPS,
        num_seeds=2,
        num_chunks=2,
        eval_episodes=8,
        selfplay={"pool_size": 8, "add_every": UPDATES_PER_SNAPSHOT, "sampling": "latest"},
    )
    return train(cfg, progress=False)


def test_a_selfplay_run_adds_snapshots_and_counts_its_games(run):
    cfg = run.config
    updates = cfg.total_updates
    pool = run.runner.seeds.env_state.ctx
    assert updates % UPDATES_PER_SNAPSHOT == 0
    np.testing.assert_array_equal(pool.added, [updates // UPDATES_PER_SNAPSHOT] * 2)
    # the last block added the final parameters as the newest snapshot
    newest = np.asarray(selfplay.newest(jax.tree.map(lambda x: x[0], pool)))
    final_params = jax.tree.leaves(run.runner.seeds.agent.params)
    for snap, final in zip(jax.tree.leaves(pool.params), final_params, strict=True):
        np.testing.assert_array_equal(np.asarray(snap)[0, newest], np.asarray(final)[0])
    # every training game was counted against a member (the prefill's too)
    trained = sum(np.asarray(h["episodes"]) for h in run.history)
    games = np.asarray(pool.games).sum((1, 2))
    assert (games >= trained).all() and (games > 0).all()
    # the evaluation plays the random player: a game's return is a win, draw or loss
    assert ((run.final_return >= -1) & (run.final_return <= 1)).all()


def test_report_rates_the_pool(run):
    rep = selfplay.report(run, games=16)
    pool = jax.tree.map(lambda x: x[0], run.runner.seeds.env_state.ctx)
    snapshots = min(int(pool.added), 7)
    assert rep.names[0] == "random" and rep.names[-1] == "learner"
    assert len(rep.names) == snapshots + 2 and rep.ratings[0] == 0.0
    m = len(rep.names)
    assert rep.records.shape == (m, m, 3) and rep.training.shape == (m, 3)
    totals = rep.records.sum(-1)
    np.testing.assert_array_equal(totals, 16 * (1 - np.eye(m)))
    np.testing.assert_array_equal(rep.records, rep.records.transpose(1, 0, 2)[..., ::-1])
    assert "| learner |" in rep.markdown()
    with pytest.raises(ValueError, match="self-play run"):
        selfplay.report(
            type(run)(**{**run.__dict__, "config": run.config.replace(selfplay={"pool_size": 0})})
        )


def test_a_match_between_lowest_legal_players_goes_to_the_opener(run):
    """Zero parameters give equal Q-values, so the greedy legal move is the lowest legal
    square: in tic-tac-toe the player who opens then wins on the diagonal 2-4-6, every game."""
    from jaxrl_fast.envs import make_env

    zeros = jax.tree.map(lambda x: jnp.zeros_like(x[0]), run.runner.seeds.agent.params)
    agent = selfplay.player_agent(run.config)
    counts = selfplay.round_robin(agent, make_env("pgx:tic_tac_toe", 64), [zeros, zeros, None],
                                  key=jax.random.key(0))  # fmt: skip
    wins, draws, losses = counts[0, 1]
    assert draws == 0 and wins + losses == 64 and 16 < wins < 48  # sides drawn per game
    wins, draws, losses = counts[0, 2]  # against random play the lowest square wins the most
    assert wins > losses


@pytest.mark.slow
def test_a_selfplay_run_resumes_bitwise_with_its_pool(run, tmp_path):
    """Stopped in its last chunk and resumed from the first one's checkpoint, a self-play run
    ends where the whole run does: the pool (snapshots, records, scores) is in the checkpoint."""
    from conftest import StopRun, stop_at

    from jaxrl_fast.run.train import train

    cfg = run.config
    with pytest.raises(StopRun):
        train(cfg, progress=False, run_dir=tmp_path, checkpoint_every=1, on_chunk=stop_at(1))
    resumed = train(cfg, progress=False, run_dir=tmp_path, resume=True)
    assert resumed.resumed_chunks == 1
    for a, b in zip(jax.tree.leaves(resumed.runner.seeds.env_state.ctx),
                    jax.tree.leaves(run.runner.seeds.env_state.ctx), strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(resumed.final_return, run.final_return)


def test_selfplay_refusals():
    with pytest.raises(ValueError, match=r"SelfPlayConfig.pool_size=1 .*0 \(off\) or an int >= 2"):
        SelfPlayConfig(pool_size=1)
    with pytest.raises(
        ValueError, match=r"SelfPlayConfig.sampling='best'.*'uniform', 'latest', 'dynamic'"
    ):
        SelfPlayConfig(pool_size=2, sampling="best")
    from jaxrl_fast.loop import make_train

    cfg = TrainConfig().replace(total_env_steps=20_000, selfplay={"pool_size": 2})
    with pytest.raises(ValueError, match=r"pool_size=2 needs a two-player game.*'CartPole-v1'"):
        make_train(cfg)
