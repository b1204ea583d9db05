"""Reward shaping (`envs/shaping.py`, `EnvConfig.reward_shaping`): the maths, the names, and
the loop storing shaped rewards while it reports the env's own returns."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import EnvConfig
from jaxrl_fast.envs import make_probe_env, shaping


def test_potential_based_bonus_by_hand():
    """F = gamma phi(s') - phi(s); phi = 0 after a terminal step; nothing on reset rows."""
    shape = shaping.potential_based(lambda obs: obs[..., 0], gamma=0.5)
    obs = jnp.array([[2.0], [2.0], [2.0], [2.0]])
    next_obs = jnp.array([[4.0], [4.0], [4.0], [4.0]])
    info = {
        "terminated": jnp.array([False, True, False, False]),
        "reset": jnp.array([False, False, True, False]),
    }
    info["truncated"] = jnp.array([False, False, False, True])  # bootstraps: phi(s') kept
    got = shape(obs, jnp.zeros(4, jnp.int32), jnp.ones(4), next_obs, info)
    np.testing.assert_allclose(np.asarray(got), [1.0 + 2.0 - 2.0, 1.0 - 2.0, 1.0, 1.0 + 0.0])
    assert got.dtype == jnp.float32


@pytest.mark.parametrize(
    "name, obs, value",
    [
        ("potential:pendulum-upright", [1.0, 0.0, 3.0], 1.0),
        ("potential:cartpole-upright", [2.4, 0.0, -0.21, 0.0], -1.0),
        ("potential:mountaincar-energy", [np.pi / 6, 0.05], 100.0 * (1.0 + 0.5)),
        ("potential:reacher-distance", [1, 1, 0, 0, 0, 0, 2, 1], -1.0),
    ],
)
def test_builtin_potentials_by_hand(name, obs, value):
    """With gamma = 1, a step from `obs` to a terminal state is worth -phi(obs)."""
    shape = shaping.make_shaping(name, gamma=1.0)
    obs = jnp.asarray([obs], jnp.float32)
    info = {"terminated": jnp.array([True]), "reset": jnp.array([False])}
    got = shape(obs, jnp.zeros(1, jnp.int32), jnp.zeros(1), obs, info)
    np.testing.assert_allclose(np.asarray(got), [-value], rtol=1e-5)


def test_names_and_registration():
    with pytest.raises(ValueError, match=r"reward_shaping='potential:nope' is not a known.*"
                       r"potential:mountaincar-energy"):  # fmt: skip
        shaping.make_shaping("potential:nope", 0.99)
    with pytest.raises(ValueError, match=r"not starting with 'potential:'"):
        shaping.register("potential:mine", lambda *a: a[2])
    fn = lambda obs, action, reward, next_obs, info: reward * 2  # noqa: E731
    shaping.register("test-double", fn)
    shaping.register("test-double", fn)  # the same function again: fine
    assert shaping.make_shaping("test-double", 0.9) is fn
    assert "test-double" in shaping.names()
    with pytest.raises(ValueError, match=r"already registered"):
        shaping.register("test-double", lambda *a: a[2])
    assert shaping.make_shaping(None, 0.9) is None
    with pytest.raises(ValueError, match=r"EnvConfig\.reward_shaping=''"):
        EnvConfig(reward_shaping="")


def test_unknown_shaping_is_refused_before_compiling():
    from jaxrl_fast.loop import make_train

    with pytest.raises(ValueError, match=r"reward_shaping='potential:nope'"):
        make_train(tiny_config(env={"name": "probe-chain", "reward_shaping": "potential:nope"}))


@pytest.mark.slow
@pytest.mark.learning
def test_loop_learns_shaped_q_and_reports_env_returns(monkeypatch):
    """Potential-based shaping shifts the optimal Q by -phi(s). On probe-chain (Q* = [0.9, 0.9]
    at state 0, [0, 1] at state 1; gamma 0.9, the config's) with phi = 5 at state 0 and 2 at
    state 1, the shaped Q is [-4.1, -4.1] and [-2.0, -1.0]. A shaping with gamma 1, or without
    phi = 0 after the terminal step, misses by 0.2 or more. The returns the run reports stay
    the env's own (0 or 1)."""
    from jaxrl_fast.run.train import train

    monkeypatch.setitem(
        shaping.POTENTIALS, "test-chain", lambda obs: 5.0 * obs[..., 0] + 2.0 * obs[..., 1]
    )
    cfg = tiny_config(
        env={"name": "probe-chain", "reward_shaping": "potential:test-chain"},
        total_env_steps=3280,
        num_chunks=4,
        schedule={"epsilon_end": 0.5},  # both actions tried often: each Q-value is learned
        eval_episodes=2,
    )
    result = train(cfg, progress=False)
    net = QNetwork.from_config(cfg.network, make_probe_env("probe-chain", 1).spec, cfg.algo)
    for s in range(cfg.num_seeds):
        params = jax.tree.map(lambda x, s=s: x[s], result.runner.seeds.agent.params)
        q = np.asarray(net.apply(params, np.eye(2, dtype=np.float32)))
        np.testing.assert_allclose(q, [[-4.1, -4.1], [-2.0, -1.0]], atol=0.01)
    returns = np.asarray([h["episode_return"] for h in result.history])
    assert np.all((returns >= 0.0) & (returns <= 1.0))
    assert np.all((result.final_return >= 0.0) & (result.final_return <= 1.0))


@pytest.mark.slow
def test_conventional_baseline_stores_shaped_rewards():
    """The unfused loop shapes the rewards it stores as the fused loop does."""
    from jaxrl_fast import baseline

    shaping.register("test-plus-100", lambda obs, action, reward, next_obs, info: reward + 100.0)
    cfg = tiny_config(env={"name": "probe-chain", "reward_shaping": "test-plus-100"})
    collector = baseline.Collector(cfg, baseline.compile_parts(cfg, None))
    for i in range(6):
        collector.collect(i)
    stored = collector.replay.reward[: collector.replay.size]
    assert collector.replay.size >= 4 * cfg.env.num_envs  # reset steps' rows are not stored
    assert np.all((stored >= 100.0) & (stored <= 101.0))
