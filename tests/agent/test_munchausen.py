"""Munchausen targets (`agent.munchausen`, the loss "m-dqn"): the target against a numpy
transcription of the paper's equation, its limits (DQN's target at alpha = 0 and a vanishing
temperature), the loss reading the target network at `s` and its settings from the traced
`HParams`, the config's checks, and learning the M-DQN operator's fixed point on probe-chain
(computed by tabular iteration of the same operator)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from jaxrl_fast import train
from jaxrl_fast.agent import munchausen as m
from jaxrl_fast.agent.losses import make_loss, td_errors
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.agent.state import LossKnobs
from jaxrl_fast.config import (
    AlgoConfig,
    DQNConfig,
    NetworkConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)
from jaxrl_fast.config.hparams import hparams_from_parts
from jaxrl_fast.envs import make_probe_env
from jaxrl_fast.types import Batch

B, A = 7, 4


def _numpy_targets(q_s, a, r, discount, q_next, alpha, tau, l0):
    """Vieillard et al. 2020, eq. (2), one row and one action at a time."""
    out = []
    for i in range(len(a)):
        z = q_s[i] / tau
        log_pi_s = z - (np.max(z) + np.log(np.sum(np.exp(z - np.max(z)))))
        z = q_next[i] / tau
        log_pi_n = z - (np.max(z) + np.log(np.sum(np.exp(z - np.max(z)))))
        soft = sum(
            np.exp(log_pi_n[b]) * (q_next[i, b] - tau * log_pi_n[b]) for b in range(q_next.shape[1])
        )
        bonus = alpha * min(max(tau * log_pi_s[a[i]], l0), 0.0)
        out.append(r[i] + bonus + discount[i] * soft)
    return np.array(out)


def _rows(seed=0):
    rng = np.random.default_rng(seed)
    q_s = rng.normal(size=(B, A)).astype(np.float32)
    q_next = rng.normal(size=(B, A)).astype(np.float32)
    a = rng.integers(0, A, B).astype(np.int32)
    r = rng.uniform(-1, 1, B).astype(np.float32)
    discount = np.array([0.99, 0.0, 0.9, 0.99, 0.5, 0.99, 0.0], np.float32)
    return q_s, a, r, discount, q_next


@pytest.mark.parametrize(("alpha", "tau", "l0"), [(0.9, 0.03, -1.0), (0.5, 1.0, -0.3)])
def test_targets_match_the_papers_equation(alpha, tau, l0):
    # tau = 0.03: most log-policies fall below l0 (the clip); tau = 1: few do
    q_s, a, r, discount, q_next = _rows()
    got = m.munchausen_targets(q_s, a, r, discount, q_next, alpha, tau, l0)
    want = _numpy_targets(q_s, a, r, discount, q_next, alpha, tau, l0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_without_the_bonus_and_temperature_the_target_is_dqns():
    q_s, a, r, discount, q_next = _rows(1)
    got = m.munchausen_targets(q_s, a, r, discount, q_next, 0.0, 1e-4, -1.0)
    q_a = np.take_along_axis(q_s, a[:, None], -1)[:, 0]
    dqn = np.asarray(td_errors(q_s, a, r, discount, q_next)) + q_a  # r + discount * max Q
    np.testing.assert_allclose(got, dqn, atol=1e-3)


class _Linear:
    """A network whose 'params' are a `[2, A]` table indexed by a one-hot observation."""

    @staticmethod
    def apply(params, obs):
        return obs @ params


def test_the_loss_reads_the_target_net_at_s_and_the_traced_settings():
    config = DQNConfig(loss="m-dqn", huber_delta=100.0)
    rng = np.random.default_rng(2)
    params, target = rng.normal(size=(2, 2, A)).astype(np.float32)
    obs = np.eye(2, dtype=np.float32)[[0, 1, 1, 0]]
    nxt = np.eye(2, dtype=np.float32)[[1, 1, 0, 0]]
    batch = Batch(obs, jnp.array([0, 3, 1, 2]), jnp.array([0.5, 1.0, 0.0, -1.0]),
                  jnp.array([0.9, 0.0, 0.9, 0.9]), nxt, jnp.ones(4), jnp.arange(4))  # fmt: skip
    algo = AlgoConfig({"munchausen": {"alpha": 0.3, "tau": 0.5}})
    hp = hparams_from_parts(config, ScheduleConfig(), ReplayConfig(), algo=algo)
    knobs = LossKnobs(jnp.float32(100.0), jnp.float32(0.9), hp)
    loss, (td, _) = make_loss(config, _Linear)(params, target, batch, knobs)
    y = _numpy_targets(obs @ target, np.asarray(batch.action), np.asarray(batch.reward),
                       np.asarray(batch.discount), nxt @ target, 0.3, 0.5, -1.0)  # fmt: skip
    q_a = np.take_along_axis(obs @ params, np.asarray(batch.action)[:, None], -1)[:, 0]
    np.testing.assert_allclose(td, y - q_a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, np.mean(0.5 * (y - q_a) ** 2), rtol=1e-5)  # Huber, |td| < 100
    # without knobs: the config's own settings (alpha 0.9, tau 0.03)
    _, (td0, _) = make_loss(config, _Linear)(params, target, batch)
    y0 = _numpy_targets(obs @ target, np.asarray(batch.action), np.asarray(batch.reward),
                        np.asarray(batch.discount), nxt @ target, 0.9, 0.03, -1.0)  # fmt: skip
    np.testing.assert_allclose(td0, y0 - q_a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("field", "value"), [("alpha", 1.5), ("tau", 0.0), ("l0", 0.0)])
def test_bad_settings_are_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"MunchausenConfig.{field}="):
        TrainConfig(algo={"munchausen": {field: value}})
    with pytest.raises(ValueError, match=f"MunchausenConfig.{field}="):
        TrainConfig().replace(algo={"munchausen": {field: value}})


def _fixed_point(gamma, alpha, tau, l0, iters=500):
    """The M-DQN operator iterated on probe-chain's table (state 0 -> state 1 with reward 0;
    state 1 ends the episode with reward 1 for action 1): q_{k+1} = T(q_k), the target net q_k."""
    q = np.zeros((2, 2))
    for _ in range(iters):
        new = np.zeros_like(q)
        for s in range(2):
            for a in range(2):
                r, nxt, discount = (0.0, 1, gamma) if s == 0 else (float(a == 1), 0, 0.0)
                row = (q[[s]], np.array([a]), np.array([r]), np.array([discount]), q[[nxt]])
                new[s, a] = _numpy_targets(*row, alpha, tau, l0)[0]
        q = new
    return q


@pytest.mark.slow
@pytest.mark.learning
def test_m_dqn_learns_its_fixed_point_on_probe_chain():
    cfg = tiny_config(total_env_steps=8_080, num_chunks=1, eval_episodes=2)
    cfg = cfg.replace(dqn=dataclasses.replace(cfg.dqn, loss="m-dqn"))
    result = train(cfg, progress=False)
    m = cfg.algo.munchausen
    want = _fixed_point(cfg.dqn.gamma, m.alpha, m.tau, m.l0)
    # the action gap widened by the bonus: Q(1, 0) = alpha * l0 = -0.9, not Q*'s 0
    assert want[1, 0] == pytest.approx(-0.9, abs=1e-3) and want[1, 1] == pytest.approx(1.0)
    net = QNetwork.from_config(cfg.network, make_probe_env("probe-chain", 1).spec, cfg.algo)
    for s in range(cfg.num_seeds):
        params = jax.tree.map(lambda x, s=s: x[s], result.runner.seeds.agent.params)
        q = np.asarray(net.apply(params, np.eye(2, dtype=np.float32)))
        np.testing.assert_allclose(q, want, atol=0.01)
    np.testing.assert_allclose(result.final_return, [1.0, 1.0])


def test_m_dqn_trains_a_q_head_and_refuses_a_distributional_one():
    from jaxrl_fast.agent import make_agent

    with pytest.raises(ValueError, match="head='c51' trains with its own loss"):
        make_agent(DQNConfig(loss="m-dqn"), QNetwork(num_actions=2, head="c51"), 2)
    net = QNetwork.from_config(NetworkConfig(dueling=True), make_probe_env("probe-chain", 1).spec)
    agent = make_agent(DQNConfig(loss="m-dqn"), net, 2)
    state = agent.init(jax.random.key(0), jnp.zeros((1, 2)))
    eye = jnp.eye(2)[jnp.array([0, 1, 1, 0])]
    batch = Batch(
        eye, jnp.array([0, 1, 0, 1]), jnp.ones(4), jnp.full(4, 0.9), eye, jnp.ones(4), jnp.arange(4)
    )
    new, td, metrics = jax.jit(agent.update)(state, batch)
    assert int(new.grad_steps) == 1 and np.all(np.isfinite(td)) and float(metrics.loss) > 0
