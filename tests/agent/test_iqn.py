"""Implicit quantile networks (`agent.iqn`): the loss against a numpy transcription of the
paper's eq. (3), the head's levels per pass (N, N', K sampled; K midpoints without the random
stream), the agent's draws, and learning probe-chain's Q* in the loop."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_learned_probe_chain, tiny_config

from jaxrl_fast import train
from jaxrl_fast.agent import iqn, make_agent
from jaxrl_fast.agent.losses import LossInput
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import DQNConfig, NetworkConfig
from jaxrl_fast.config.sections import AlgoConfig
from jaxrl_fast.envs import make_probe_env
from jaxrl_fast.types import Batch

B, A, N, N2 = 5, 3, 6, 4


def _numpy_loss(theta_all, taus, a, r, discount, target_all, a_next, kappa):
    """Dabney et al. 2018b, eq. (3), one row, one pair of levels at a time."""
    out = []
    for b in range(len(a)):
        total = 0.0
        for i in range(theta_all.shape[2]):
            for j in range(target_all.shape[2]):
                d = r[b] + discount[b] * target_all[b, a_next[b], j] - theta_all[b, a[b], i]
                huber = 0.5 * d * d if abs(d) <= kappa else kappa * (abs(d) - 0.5 * kappa)
                total += abs(taus[b, i] - (d < 0)) * huber / kappa / target_all.shape[2]
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize(("kappa", "double"), [(1.0, False), (2.0, True)])
def test_loss_matches_the_papers_equation(kappa, double):
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(B, A, N)).astype(np.float32)
    taus = rng.uniform(size=(B, N)).astype(np.float32)
    target = rng.normal(size=(B, A, N2)).astype(np.float32)
    select = rng.normal(size=(B, A, 7)).astype(np.float32)
    a = rng.integers(0, A, B)
    r = rng.uniform(-2, 2, B).astype(np.float32)
    discount = np.array([0.99, 0.0, 0.9, 0.99, 0.5], np.float32)
    out = lambda v: iqn.ImplicitQuantiles(jnp.asarray(v), jnp.zeros(v.shape[::2]))  # noqa: E731
    sel = out(select) if double else None
    loss, td = iqn.iqn_rows(LossInput(
        iqn.ImplicitQuantiles(jnp.asarray(theta), jnp.asarray(taus)), jnp.asarray(a), r,
        discount, out(target), sel, kappa, iqn.IQN.q_values,
    ))  # fmt: skip
    a_next = np.argmax((select if double else target).mean(-1), -1)
    want = _numpy_loss(theta, taus, a, r, discount, target, a_next, kappa)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-5)
    mean_target = r + discount * target[np.arange(B), a_next].mean(-1)
    np.testing.assert_allclose(td, mean_target - theta[np.arange(B), a].mean(-1), rtol=1e-5)


def test_cosine_embedding_and_midpoints():
    taus = jnp.array([[0.25, 0.5]])
    emb = iqn.cosine_embedding(taus, 3)
    want = np.cos(np.pi * np.arange(3)[None, None, :] * np.array([[0.25, 0.5]])[..., None])
    np.testing.assert_allclose(emb, want, atol=1e-6)
    np.testing.assert_allclose(iqn.quantile_levels(None, 2, 4), [[0.125, 0.375, 0.625, 0.875]] * 2)


def _net(embedding=64, **changes):
    cfg = NetworkConfig(hidden_sizes=(16,), head="iqn", **changes)
    algo = AlgoConfig({"iqn": {"samples": (6, 4, 3), "embedding": embedding}})
    return QNetwork.from_config(cfg, make_probe_env("probe-chain", 1).spec, algo)


@pytest.mark.parametrize("dueling", [False, True])
def test_each_pass_samples_its_own_count_and_evaluation_uses_midpoints(dueling):
    net = _net(dueling=dueling, embedding=8)
    assert net.rng_streams == ("taus",)
    obs = jnp.eye(2)[jnp.array([0, 1, 1])]
    params = net.init(jax.random.key(0), obs)
    key = jax.random.key(1)
    for role, n in (("online", 6), ("target", 4), ("select", 3), ("act", 3)):
        out = net.apply(params, obs, role=role, rngs={"taus": key})
        assert out.values.shape == (3, 2, n) and out.taus.shape == (3, n), role
        assert np.all((out.taus >= 0) & (out.taus < 1))
    a = net.apply(params, obs, role="online", rngs={"taus": key})
    b = net.apply(params, obs, role="online", rngs={"taus": jax.random.key(2)})
    assert not np.allclose(a.taus, b.taus)  # fresh levels per key, and per row:
    assert not np.allclose(a.taus[0], a.taus[1])
    fixed = net.apply(params, obs)  # no stream: K midpoints, deterministic
    np.testing.assert_allclose(fixed.taus, [[1 / 6, 0.5, 5 / 6]] * 3, atol=1e-6)
    np.testing.assert_allclose(net.value_head.q_values(fixed), fixed.values.mean(-1))


def test_the_agent_samples_when_acting_and_updating():
    net = _net()
    agent = make_agent(DQNConfig(loss="iqn"), net, 2)
    state = agent.init(jax.random.key(0), jnp.zeros((1, 2)))
    assert state.rng is not None
    eye = jnp.eye(2)[jnp.array([0, 1, 1, 0])]
    a = jnp.array([0, 1, 0, 1])
    batch = Batch(eye, a, jnp.ones(4), jnp.full(4, 0.9), eye, jnp.ones(4), jnp.arange(4))
    update = jax.jit(agent.update)
    new, td, m = update(state, batch)
    _, td_other, _ = update(state.replace(rng=jax.random.key(5)), batch)
    assert np.all(np.isfinite(td)) and float(m.loss) > 0
    assert not np.allclose(td, td_other)  # other levels, other errors
    with pytest.raises(ValueError, match="trains with its own loss"):
        make_agent(DQNConfig(loss="mse"), net, 2)


@pytest.mark.slow
@pytest.mark.learning
def test_iqn_learns_probe_chain_q_star():
    cfg = tiny_config(total_env_steps=8_080, num_chunks=1, eval_episodes=2)
    net = dataclasses.replace(cfg.network, head="iqn")
    cfg = cfg.replace(network=net, dqn=dataclasses.replace(cfg.dqn, loss="iqn"),
                      algo={"iqn": {"samples": (32, 32, 32), "embedding": 32}})  # fmt: skip
    result = train(cfg, progress=False)
    assert_learned_probe_chain(result, cfg)  # the mean over K midpoints: Q*
