"""Legal-action masks (`agent.masks`): exploration draws legal actions only, every loss's
selection and target range over the next state's legal actions (against numpy and rlax), and
in the loop DQN, C51 and PQN learn `probe-masked`'s Q* over legal actions without ever taking
its tempting illegal action."""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from conftest import tiny_config

from jaxrl_fast import train
from jaxrl_fast.agent import distributional as dist
from jaxrl_fast.agent.exploration import epsilon_greedy
from jaxrl_fast.agent.losses import make_loss
from jaxrl_fast.agent.masks import ILLEGAL_Q, legal_actions, mask_q
from jaxrl_fast.config import DQNConfig, TrainConfig
from jaxrl_fast.envs import make_env, optimal_q
from jaxrl_fast.types import Batch

B, A = 6, 4


def _legal(key, shape):
    legal = jax.random.bernoulli(key, 0.5, shape)
    legal = legal.at[..., 1].set(jnp.arange(shape[0]) % 2 == 0)  # action 1 illegal in odd rows
    return legal.at[..., 2].set(True)  # at least one legal action per row


def test_epsilon_greedy_explores_and_exploits_legal_actions_only():
    legal = jnp.array([[True, False, True, False], [False, False, False, True]] * 500)
    q = jnp.tile(jnp.array([0.0, 9.0, 1.0, 0.0]), (1000, 1))  # the best (1) is never legal
    greedy = epsilon_greedy(jax.random.key(0), mask_q(q, legal), 0.0, A, legal)
    np.testing.assert_array_equal(greedy, np.tile([2, 3], 500))
    random = np.asarray(epsilon_greedy(jax.random.key(1), mask_q(q, legal), 1.0, A, legal))
    assert np.all(np.asarray(legal)[np.arange(1000), random])
    counts = np.bincount(random[0::2], minlength=A)  # rows of 2 legal actions: about 250 each
    assert counts[1] == counts[3] == 0 and abs(counts[0] - 250) < 60 and counts.sum() == 500
    unmasked = np.asarray(epsilon_greedy(jax.random.key(1), q, 1.0, A))
    assert set(unmasked.tolist()) == {0, 1, 2, 3}  # without a mask every action is drawn


def test_a_state_without_legal_actions_is_read_unmasked():
    q = jnp.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    legal = jnp.array([[True, False, False], [False, False, False]])
    expected = [[1.0, ILLEGAL_Q, ILLEGAL_Q], [1.0, 2.0, 3.0]]
    np.testing.assert_allclose(mask_q(q, legal), expected, rtol=1e-6)
    # so a target bootstrapping from such a state stays finite
    batch, _ = _masked_batch(jax.random.key(9))
    batch = batch._replace(next_obs=batch.next_obs.at[:, 1:].set(0.0))  # no legal action
    q_t = jax.random.normal(jax.random.key(10), (B, A))
    params = {"cur": q_t, "next": q_t}
    got = _loss("mse", True, lambda x: x, None, params, params, batch)
    unmasked = make_loss(DQNConfig(loss="mse"), _FakeNet(lambda x: x))(params, params, batch)[0]
    np.testing.assert_allclose(got, unmasked, rtol=1e-6)


class _FakeNet:
    """`apply(params, obs)`: `params["cur"]` at the sampled observations (obs[:, 0] == 0) and
    `params["next"]` at the next ones, wrapped by `make_out`; so a test sets each pass's
    output (the online net's "next" is the double-Q selector)."""

    def __init__(self, make_out):
        self.make_out = make_out

    def apply(self, params, obs):
        nxt = obs[:, 0] == 1
        pick = lambda c, n: jnp.where(nxt.reshape((-1,) + (1,) * (c.ndim - 1)), n, c)  # noqa: E731
        return self.make_out(jax.tree.map(pick, params["cur"], params["next"]))


def _masked_batch(key):
    k = jax.random.split(key, 4)
    legal_t, legal_tm1 = _legal(k[0], (B, A)), jnp.ones((B, A), bool)
    obs = jnp.concatenate([jnp.zeros((B, 1)), legal_tm1.astype(jnp.float32)], -1)
    next_obs = jnp.concatenate([jnp.ones((B, 1)), legal_t.astype(jnp.float32)], -1)
    batch = Batch(
        obs=obs,
        action=jax.random.randint(k[1], (B,), 0, A),
        reward=jax.random.uniform(k[2], (B,), minval=-1.0, maxval=1.0),
        discount=jnp.array([0.9, 0.0, 0.9, 0.81, 0.9, 0.5], jnp.float32),
        next_obs=next_obs,
        weight=jnp.ones((B,), jnp.float32),
        index=jnp.arange(B, dtype=jnp.int32),
    )
    return batch, legal_t


def _loss(loss: str, double: bool, make_out, q_values, online, target, batch):
    cfg = DQNConfig(loss=loss, double_q=double)
    legal = partial(legal_actions, num_actions=A)
    fn = make_loss(cfg, _FakeNet(make_out), None, q_values, legal)
    return fn(online, target, batch)[0]


@pytest.mark.parametrize("double", [False, True])
def test_td_loss_bootstraps_from_the_best_legal_action(double):
    batch, legal_t = _masked_batch(jax.random.key(0))
    k = jax.random.split(jax.random.key(1), 3)
    q_tm1, q_t, q_sel = (jax.random.normal(x, (B, A)) for x in k)
    q_t = q_t.at[:, 1].set(50.0)  # a tempting value, legal or not
    q_sel = q_sel.at[:, 1].set(50.0)
    online, target = {"cur": q_tm1, "next": q_sel}, {"cur": q_tm1, "next": q_t}
    got = _loss("mse", double, lambda x: x, None, online, target, batch)
    select = np.where(np.asarray(legal_t), np.asarray(q_sel if double else q_t), -np.inf)
    a_t = select.argmax(-1)
    v_t = np.asarray(q_t)[np.arange(B), a_t]
    td = np.asarray(batch.reward) + np.asarray(batch.discount) * v_t - np.asarray(q_tm1)[
        np.arange(B), np.asarray(batch.action)]  # fmt: skip
    np.testing.assert_allclose(got, np.mean(0.5 * td**2), rtol=1e-5)
    unmasked = make_loss(DQNConfig(loss="mse", double_q=double), _FakeNet(lambda x: x))
    assert not np.isclose(unmasked(online, target, batch)[0], got)  # the mask mattered


@pytest.mark.parametrize("double", [False, True])
def test_c51_loss_selects_a_legal_action_as_rlax_does_with_a_masked_selector(double):
    batch, legal_t = _masked_batch(jax.random.key(2))
    atoms = jnp.linspace(-2.0, 2.0, 11)
    k = jax.random.split(jax.random.key(3), 3)
    l_tm1, l_t, l_sel = (jax.random.normal(x, (B, A, 11)) * 2 for x in k)
    l_t = l_t.at[:, 1, -1].set(30.0)  # action 1: nearly all mass on the top atom
    l_sel = l_sel.at[:, 1, -1].set(30.0)
    make = lambda x: dist.Categorical(x, atoms, jnp.float32(0.0))  # noqa: E731
    online, target = {"cur": l_tm1, "next": l_sel}, {"cur": l_tm1, "next": l_t}
    got = _loss("c51", double, make, dist.C51.q_values, online, target, batch)
    selector = dist.C51.q_values(make(l_sel if double else l_t))
    selector = jnp.where(legal_t, selector, ILLEGAL_Q)
    expected = jax.vmap(rlax.categorical_double_q_learning, (None, 0, 0, 0, 0, None, 0, 0))(
        atoms, l_tm1, batch.action, batch.reward, batch.discount, atoms, l_t, selector
    )
    np.testing.assert_allclose(got, expected.mean(), rtol=1e-5)


@pytest.mark.parametrize("double", [False, True])
def test_qr_loss_selects_a_legal_action_as_rlax_does_with_a_masked_selector(double):
    batch, legal_t = _masked_batch(jax.random.key(4))
    n = 8
    k = jax.random.split(jax.random.key(5), 3)
    th_tm1, th_t, th_sel = (jax.random.normal(x, (B, A, n)) for x in k)
    th_t, th_sel = th_t.at[:, 1].add(20.0), th_sel.at[:, 1].add(20.0)
    online, target = {"cur": th_tm1, "next": th_sel}, {"cur": th_tm1, "next": th_t}
    got = _loss("qr-dqn", double, dist.Quantiles, dist.QR.q_values, online, target, batch)
    selector = jnp.where(legal_t[:, :, None], th_sel if double else th_t, ILLEGAL_Q)
    t = lambda x: jnp.swapaxes(x, 1, 2)  # noqa: E731  rlax: [N, A]
    expected = jax.vmap(rlax.quantile_q_learning, (0, None, 0, 0, 0, 0, 0, None))(
        t(th_tm1), dist.quantile_midpoints(n), batch.action, batch.reward, batch.discount,
        t(selector), t(th_t), 1.0,
    )  # fmt: skip
    np.testing.assert_allclose(got, expected.mean(), rtol=1e-5)


def test_munchausen_soft_values_range_over_legal_actions():
    batch, legal_t = _masked_batch(jax.random.key(6))
    k = jax.random.split(jax.random.key(7), 2)
    q_tm1, q_t = (jax.random.normal(x, (B, A)) for x in k)
    q_t = q_t.at[:, 1].set(40.0)
    online, target = {"cur": q_tm1, "next": q_t}, {"cur": q_tm1, "next": q_t}
    got = _loss("m-dqn", False, lambda x: x, None, online, target, batch)
    alpha, tau, l0 = 0.9, 0.03, -1.0  # the section's defaults
    m = TrainConfig().algo.munchausen
    assert (m.alpha, m.tau, m.l0) == (alpha, tau, l0)
    q_tm1, q_t, legal = (np.asarray(x, np.float64) for x in (q_tm1, q_t, legal_t))
    a, r, d = np.asarray(batch.action), np.asarray(batch.reward), np.asarray(batch.discount)
    log_pi_tm1 = q_tm1 / tau - np.log(np.exp(q_tm1 / tau).sum(-1, keepdims=True))
    bonus = alpha * np.clip(tau * log_pi_tm1[np.arange(B), a], l0, 0.0)
    z = np.where(legal > 0, q_t / tau, -np.inf)
    pi = np.exp(z - z.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    log_pi = np.where(legal > 0, np.log(np.where(pi > 0, pi, 1.0)), 0.0)
    soft_v = (pi * (q_t - tau * log_pi)).sum(-1)
    td = r + bonus + d * soft_v - q_tm1[np.arange(B), a]
    huber = np.where(np.abs(td) <= 1.0, 0.5 * td**2, np.abs(td) - 0.5)
    np.testing.assert_allclose(got, huber.mean(), rtol=1e-4)
    assert np.isfinite(got)


# ---- in the loop ------------------------------------------------------------------------------
def _probe_masked(**changes):
    cfg = tiny_config(env={"name": "probe-masked", "num_envs": 4}, total_env_steps=6_080,
                      num_chunks=4, eval_episodes=2)  # fmt: skip
    return cfg.replace(**changes)


def _assert_learned_probe_masked(result, cfg):
    """Q* over legal actions (to 0.02), the illegal action never taken (its reward, 5, never
    seen in a training episode) and the greedy return 1."""
    from jaxrl_fast.agent.network import QNetwork

    spec = make_env("probe-masked", 1).spec
    net = QNetwork.from_config(cfg.network, spec, cfg.algo)
    expected = optimal_q("probe-masked", cfg.dqn.gamma)
    obs = np.asarray([[1, 0, 1, 1, 1], [0, 1, 1, 0, 1]], np.float32)
    for s in range(cfg.num_seeds):
        params = jax.tree.map(lambda x, s=s: x[s], result.runner.seeds.agent.params)
        q = np.asarray(net.value_head.q_values(net.apply(params, obs)))
        np.testing.assert_allclose(q[0], expected[0], atol=0.02)
        np.testing.assert_allclose(q[1, [0, 2]], [expected[1][0], expected[1][2]], atol=0.02)
    returns = np.asarray([h["episode_return"] for h in result.history], np.float64)
    assert np.nanmax(returns) <= 1.0 + 1e-6, returns
    np.testing.assert_allclose(result.final_return, 1.0)
    policy = result.policy(0)  # the exported policy masks too
    np.testing.assert_array_equal(policy.act(obs), [int(np.argmax(q[0])), 2])


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize("variant", ["dqn", "c51", "pqn"])
def test_probe_masked_learns_q_star_over_legal_actions(variant, tmp_path):
    cfg = _probe_masked()
    if variant == "c51":
        network = dataclasses.replace(cfg.network, head="c51")
        cfg = cfg.replace(network=network, dqn=dataclasses.replace(cfg.dqn, loss="c51"),
                          algo={"distributional": {"v_min": -1.0, "v_max": 2.0}})  # fmt: skip
    if variant == "pqn":  # as tests/loop/test_rollout.py's probe-chain run (lambda 0)
        cfg = cfg.replace(
            learner="rollout", learning_starts=0, train_frequency=16, updates_per_block=4,
            total_env_steps=12_000, num_chunks=1,
            algo={"rollout": {"num_minibatches": 2, "td_lambda": 0.0}},
            dqn={"loss": "regression", "double_q": False, "target_period": 16,
                 "optimizer": "radam", "learning_rate": 3e-3},
            network={"layer_norm": True},
            schedule={"epsilon_end": 0.2, "epsilon_fraction": 0.3, "lr_schedule": "linear",
                      "lr_end_fraction": 0.0},
        )  # fmt: skip
    result = train(cfg, progress=False)
    _assert_learned_probe_masked(result, cfg)
    if variant == "dqn":  # a saved policy keeps the mask (its spec says so)
        from jaxrl_fast.trained.policy import Policy

        result.policy(0).save(tmp_path / "p.npz")
        loaded = Policy.load(tmp_path / "p.npz")
        assert loaded.spec.action_mask
        tempting = np.asarray([[0, 1, 1, 0, 1]], np.float32)  # state 1: action 1 illegal
        q = np.asarray(loaded.q_values(tempting))
        assert q[0, 1] < -1e29 and int(loaded.act(tempting)[0]) == 2
