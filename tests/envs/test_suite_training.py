"""Training on the JAX suites' envs (`envs.suites`): DQN learns a MiniGrid task, and both
learners train on a masked two-player game. Apart from `test_suites.py`, so that the test
runner's workers share the suites' long tests."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxrl_fast.envs import make_env


def _require(package: str):
    return pytest.importorskip(package)


# -- training on suite envs -------------------------------------------------------------------


def _suite_config(name: str, **changes):
    from conftest import tiny_config

    from jaxrl_fast.config import DQNConfig, EnvConfig, NetworkConfig, ReplayConfig

    base = dict(
        env=EnvConfig(name=name, num_envs=8),
        network=NetworkConfig(hidden_sizes=(64,), kind="mlp"),
        replay=ReplayConfig(capacity=10_000, batch_size=64),
        dqn=DQNConfig(learning_rate=1e-3, target_period=96, gamma=0.95),
        learning_starts=1000,
        train_frequency=8,
        num_seeds=4,
        eval_episodes=4,
    )
    return tiny_config(**{**base, **changes})


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize("name", ["navix:Navix-Empty-5x5-v0"])
def test_dqn_learns_a_minigrid_task(name):
    """Empty 5x5 (a sparse reward at the goal, 100 steps to find it): 4 seeds of DQN reach it
    greedily, near the optimum, well above a random policy's return. (XLand-MiniGrid's
    Empty-5x5 learns alike at this budget, 0.955 on 4 of 4 seeds in a trial: `docs/env-suites.md`
    trains it; one MiniGrid learner here keeps the suite short.)"""
    _require(name.split(":")[0])
    from jaxrl_fast import train

    cfg = _suite_config(name, total_env_steps=16_000, num_chunks=5, eval_every=3_000)
    history = [h["eval_return"] for h in train(cfg, progress=False).history if "eval_return" in h]
    final = np.asarray(history[-1])
    assert (final > 0.8).sum() >= 3, history  # the optimum: 0.95 (xminigrid), 1 (navix)
    assert final.mean() > _random_return(name) + 0.2, history


def _random_return(name: str, steps: int = 400) -> float:
    """Mean return of the episodes that 32 envs finish in `steps` uniformly random steps."""
    env = make_env(name, 32)

    def body(carry, key):
        state = carry
        action = jax.random.randint(key, (32,), 0, env.spec.num_actions)
        state, _, _, done, info = env.step(key, state, action)
        return state, (done, info["episode_return"])

    state, _ = env.reset(jax.random.key(0))
    _, (done, ret) = jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(
        jax.random.key(1), steps)))(state)  # fmt: skip
    return float(np.asarray(ret)[np.asarray(done)].mean())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "network"),
    [("pgx:connect_four", {"kind": "mlp", "hidden_sizes": (32,)})],
)  # fmt: skip
def test_suite_envs_train_with_dqn_and_pqn(name, network):
    """Both learners run on a masked suite env with vmapped seeds: Connect Four against a random
    player; returns stay in their range. (Jumanji's masked envs take the same path: the mask is
    in the observation.)"""
    _require(name.split(":")[0])
    from jaxrl_fast import train

    dqn = _suite_config(name, network=network, total_env_steps=1_600, learning_starts=400,
                        num_seeds=2, num_chunks=2, eval_every=600, eval_episodes=2)  # fmt: skip
    pqn = dqn.replace(
        learner="rollout", learning_starts=0, train_frequency=64, updates_per_block=4,
        total_env_steps=1_024, eval_every=512,
        algo={"rollout": {"num_minibatches": 2, "td_lambda": 0.65}},
        dqn={"loss": "regression", "double_q": False, "target_period": 64},
        network={"layer_norm": True},
    )  # fmt: skip
    for cfg in (dqn, pqn):
        r = train(cfg, progress=False)
        assert r.config.env.name == name
        evals = [h["eval_return"] for h in r.history if "eval_return" in h]
        assert len(evals) == 2 and all(len(e) == 2 for e in evals)
        if name == "pgx:connect_four":  # +1 a win, -1 a loss or an illegal move, 0 a draw
            assert np.all(np.abs(np.asarray(evals)) <= 1.0)
        assert np.all(np.isfinite([h["loss"] for h in r.history]))
