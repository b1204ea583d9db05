"""The rollout learner (`TrainConfig.learner="rollout"`, PQN): its config checks, its store, the
rows and lambda-returns it trains on, its minibatch schedule, and in the fused loop: probe-chain's
Q*, resume and the presets."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import StopRun, assert_learned_probe_chain, params_hashes, stop_at, tiny_config

from jaxrl_fast import presets
from jaxrl_fast.agent.dqn import make_agent
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.agent.returns import lambda_returns
from jaxrl_fast.agent.schedules import make_schedules
from jaxrl_fast.config import DQNConfig, NetworkConfig
from jaxrl_fast.config.hparams import hparams_of, kinds_of
from jaxrl_fast.envs import make_probe_env
from jaxrl_fast.loop import make_train
from jaxrl_fast.loop.rollout import minibatch_indices, rollout_targets
from jaxrl_fast.run.train import train
from jaxrl_fast.types import Transition


def tiny_pqn(**changes):
    """probe-chain, 4 envs x 4-step rollouts, 2 epochs of 2 minibatches (8 rows)."""
    base = dict(
        learner="rollout",
        learning_starts=0,
        train_frequency=16,
        updates_per_block=4,
        total_env_steps=1_600,
        dqn={"loss": "regression", "double_q": False, "target_period": 16, "optimizer": "radam"},
        algo={"rollout": {"num_minibatches": 2, "td_lambda": 0.5}},
        network={"layer_norm": True},
    )  # fmt: skip
    return tiny_config(**{**base, **changes})


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"learning_starts": 16}, r"learning_starts=16 is not allowed with learner='rollout'"),
        ({"algo": {"rollout": {"num_minibatches": 3}}}, r"num_minibatches=3 is not allowed"),
        ({"replay": {"prioritised": True}}, r"not from a replay buffer"),
        ({"replay": {"n_step": 3}}, r"n_step 1 \(its lambda-returns"),
        ({"learner": "offline"}, r"TrainConfig.learner='offline'.*'replay', 'rollout'"),
    ],
)
def test_config_refuses(changes, match):
    with pytest.raises(ValueError, match=match):
        tiny_pqn(**changes)


def test_loss_and_learner_must_agree_before_compiling():
    with pytest.raises(ValueError, match=r"learner='rollout'.*loss='regression'"):
        make_train(tiny_pqn(dqn={"loss": "mse", "target_period": 16}))
    with pytest.raises(ValueError, match=r"loss='regression'.*replay learner"):
        make_train(tiny_config(dqn={"loss": "regression", "target_period": 40}))


def test_minibatches_use_every_row_once_per_epoch():
    idx = np.asarray(minibatch_indices(jax.random.key(0), 48, 4, 3))
    assert idx.shape == (3, 4, 12)
    for epoch in idx:
        np.testing.assert_array_equal(np.sort(epoch.ravel()), np.arange(48))
    assert not np.array_equal(idx[0], idx[1])  # a fresh permutation each epoch


def _agent_and_schedules(cfg):
    spec = make_probe_env("probe-chain", 3).spec
    net = QNetwork.from_config(cfg.network, spec, cfg.algo)
    agent = make_agent(cfg.dqn, net, spec.num_actions, hparams=hparams_of(cfg))
    return agent, make_schedules(cfg, kinds_of(hparams_of(cfg)))


def test_rows_are_the_rollouts_with_their_lambda_returns():
    """The learner's rows: each step's observation and action, its lambda-return from the
    online net's max Q at the step's successor row (the last step: the observation after the
    rollout), weight 0 on reset steps; row order t * E + e."""
    cfg = tiny_pqn(network={"hidden_sizes": (8,)})
    agent, schedules = _agent_and_schedules(cfg)
    t, e = 5, 3
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(t, e, 2)).astype(np.float32)
    last = rng.normal(size=(e, 2)).astype(np.float32)
    term = np.zeros((t, e), bool)
    trunc = np.zeros((t, e), bool)
    reset = np.zeros((t, e), bool)
    term[1, 0], reset[2, 0] = True, True  # env 0: ends at step 1, step 2 is its reset step
    trunc[2, 1], reset[3, 1] = True, True  # env 1: cut at step 2 (bootstrap from row 3's obs)
    steps = Transition(obs, rng.integers(0, 2, (t, e)).astype(np.int32),
                       rng.normal(size=(t, e)).astype(np.float32), term, trunc, reset)  # fmt: skip
    state = agent.init(jax.random.key(1), obs[0])
    batch = rollout_targets(agent, schedules)(state, steps, last, 0, False)
    q_next = np.asarray(agent.q_values(state.params, np.concatenate([obs[1:], last[None]])
                                       .reshape(-1, 2))).max(-1).reshape(t, e)  # fmt: skip
    want = lambda_returns(
        steps.reward, term, trunc, q_next, cfg.dqn.gamma, cfg.algo.rollout.td_lambda
    )
    np.testing.assert_allclose(np.asarray(batch.reward), np.asarray(want).ravel(), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(batch.obs), obs.reshape(-1, 2))
    np.testing.assert_array_equal(np.asarray(batch.action), steps.action.ravel())
    np.testing.assert_array_equal(np.asarray(batch.weight), np.where(reset, 0.0, 1.0).ravel())
    # the terminated step's target is its reward; the truncated one bootstraps from row 3
    g = np.asarray(batch.reward).reshape(t, e)
    np.testing.assert_allclose(g[1, 0], steps.reward[1, 0], rtol=1e-6)
    np.testing.assert_allclose(g[2, 1], steps.reward[2, 1] + cfg.dqn.gamma * q_next[2, 1],
                               rtol=1e-5)  # fmt: skip


def test_one_block_stores_the_rollout_and_trains():
    cfg = tiny_pqn(num_chunks=1, total_env_steps=16)
    fns = make_train(cfg)
    runner = jax.jit(fns.init)(jax.random.split(jax.random.key(0), 2))
    before = runner.seeds.agent.params
    runner, metrics = jax.jit(fns.run_chunk)(runner)
    store = runner.seeds.replay
    assert store.steps.obs.shape == (2, 4, 4, 2) and int(store.cursor) == 0
    # probe-chain alternates state 0 and 1 (a reset step after each end): rows 0..3 cover both
    assert np.asarray(store.steps.obs)[..., 0].sum() > 0 and np.asarray(store.steps.reset).any()
    assert int(runner.seeds.agent.grad_steps[0]) == 4  # 2 epochs x 2 minibatches
    assert np.isfinite(np.asarray(metrics.loss)).all()
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), before, runner.seeds.agent.params)
    assert all(jax.tree.leaves(moved))


@pytest.mark.slow
@pytest.mark.learning
def test_pqn_learns_probe_chain_q_star():
    # lambda 0: one-step Q-learning without a target network, whose fixed point is Q*. (With
    # lambda > 0 the returns follow the epsilon-greedy actions, Peng's Q(lambda): Q(0, .) is
    # pulled to gamma (1 - lambda eps / 2), and at a small final epsilon the rarely taken
    # actions get few targets: 0.04-0.2 off in trials at lambda 0.1-1. The returns themselves
    # are checked against rlax and the forward view in tests/agent/test_returns.py.)
    # the learning rate decays linearly to 0, as the PQN presets' (a constant one left
    # Q(1, 0) 0.04-0.05 off on one of 4 seeds in a trial)
    cfg = tiny_pqn(total_env_steps=12_000, num_chunks=1, eval_episodes=2,
                   schedule={"epsilon_end": 0.2, "epsilon_fraction": 0.3,
                             "lr_schedule": "linear", "lr_end_fraction": 0.0})  # fmt: skip
    cfg = cfg.replace(dqn={"learning_rate": 3e-3}, algo={"rollout": {"td_lambda": 0.0}})
    result = train(cfg, progress=False)
    assert_learned_probe_chain(result, cfg)
    np.testing.assert_allclose(result.final_return, [1.0, 1.0])


@pytest.mark.slow
@pytest.mark.gpu
def test_pqn_resumes_bitwise(tmp_path):
    cfg = tiny_pqn(total_env_steps=1_600, num_chunks=4)
    full = train(cfg, progress=False, run_dir=tmp_path / "full", checkpoint_every=400)
    with pytest.raises(StopRun):
        train(cfg, progress=False, run_dir=tmp_path / "cut", checkpoint_every=400,
              on_chunk=stop_at(2))  # fmt: skip
    train(cfg, progress=False, run_dir=tmp_path / "cut", resume=True)
    assert params_hashes(tmp_path / "cut") == params_hashes(tmp_path / "full")
    assert full.history[-1]["loss"] is not None


def test_presets_carry_purejaxqls_settings():
    cp = presets.get("pqn-cartpole")
    assert (cp.env.num_envs, cp.train_frequency // cp.env.num_envs) == (32, 64)
    mb = cp.algo.rollout.num_minibatches
    assert (cp.updates_per_block // mb, mb) == (4, 16)
    assert cp.network.layer_norm and cp.network.hidden_sizes == (256, 256)
    assert (cp.dqn.optimizer, cp.dqn.learning_rate, cp.algo.rollout.td_lambda) == (
        "radam",
        1e-4,
        0.95,
    )
    assert cp.env.reward_shaping == "scale:0.1" and cp.schedule.epsilon_end == 0.2
    for game in ("asterix", "breakout", "freeway", "space-invaders"):
        m = presets.get(f"pqn-minatar-{game}")
        assert (m.env.num_envs, m.train_frequency // m.env.num_envs) == (128, 32)
        mb = m.algo.rollout.num_minibatches
        assert (m.updates_per_block // mb, mb) == (2, 32)
        assert (m.dqn.learning_rate, m.algo.rollout.td_lambda, m.learner) == (5e-4, 0.65, "rollout")
    pong = presets.get("pqn-atari-pong")
    assert pong.env.name == "envpool:Pong-v5" and pong.network.kind == "nature"
    assert (pong.dqn.learning_rate, pong.schedule.epsilon_end) == (2.5e-4, 0.001)


def test_layer_norm_sits_before_every_hidden_relu():
    spec = make_probe_env("probe-chain", 1).spec
    net = QNetwork.from_config(NetworkConfig(hidden_sizes=(8, 8), layer_norm=True), spec)
    params = net.init(jax.random.key(0), jnp.zeros((1, 2)))["params"]
    assert sorted(k for k in params if k.startswith("LayerNorm")) == ["LayerNorm_0", "LayerNorm_1"]
    h = jnp.asarray([[3.0, -1.0]])
    plain = QNetwork.from_config(NetworkConfig(hidden_sizes=(8, 8)), spec)
    assert not np.allclose(net.apply({"params": params}, h),
                           plain.apply({"params": {k: v for k, v in params.items()
                                                   if k.startswith("Dense")}}, h))  # fmt: skip


def test_radam_is_optax_radam():
    from jaxrl_fast.agent.optim import make_optimizer

    tx = make_optimizer(DQNConfig(optimizer="radam", max_grad_norm=None), 1e-2)
    ref = __import__("optax").radam(1e-2)
    p = {"w": jnp.ones(3)}
    g = {"w": jnp.asarray([0.5, -1.0, 2.0])}
    u, _ = tx.update(g, tx.init(p), p)
    v, _ = ref.update(g, ref.init(p), p)
    np.testing.assert_array_equal(u["w"], v["w"])


def test_a_sweep_over_lambda_is_one_program():
    cfg = tiny_pqn(num_chunks=1, total_env_steps=160)
    swept = train(
        cfg, sweep={"algo.rollout.td_lambda": [0.0, 0.9]}, seeds_per_point=1, progress=False
    )
    params = jax.tree.leaves(swept.result.runner.seeds.agent.params)
    assert all(p.shape[0] == 2 for p in params)
    assert any(not np.allclose(p[0], p[1]) for p in params)  # the lambdas trained apart
    np.testing.assert_allclose(
        swept.result.runner.seeds.agent.hparams.algo["rollout"]["td_lambda"], [0.0, 0.9]
    )


@pytest.mark.slow
def test_pqn_trains_in_bf16_with_noisy_layers_and_a_dueling_head():
    """The rollout learner is the agent's update: the precision policy, a dense kind that
    draws noise and the dueling head come with it."""
    cfg = tiny_pqn(num_chunks=1, total_env_steps=320, precision={"compute": "bf16"},
                   network={"layer_norm": True, "dense": "noisy", "dueling": True})  # fmt: skip
    result = train(cfg, progress=False)
    assert np.isfinite(np.asarray(result.history[-1]["loss"])).all()
    assert "bf16" in result.precision
