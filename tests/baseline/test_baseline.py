"""Tests for the conventional, unfused baseline loop (`jaxrl_fast.baseline`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.baseline import HostReplay, baseline_blocks, train_unfused
from jaxrl_fast.config import (
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)
from jaxrl_fast.envs import make_env, optimal_q
from jaxrl_fast.platform.timing import Timed


def _chain_config(**changes) -> TrainConfig:
    cfg = TrainConfig(
        env=EnvConfig(name="probe-chain", num_envs=4),
        replay=ReplayConfig(capacity=1000, batch_size=32),
        dqn=DQNConfig(learning_rate=1e-3, target_period=100, gamma=0.9),
        network=NetworkConfig(hidden_sizes=(32,)),
        total_env_steps=8_000,
        learning_starts=400,
        train_frequency=4,
        eval_episodes=4,
    )
    return cfg.replace(**changes)


@pytest.mark.slow
@pytest.mark.learning
def test_train_unfused_learns_probe_chain_optimal_q():
    cfg = _chain_config()
    result = train_unfused(cfg)

    # The fused loop's schedule: every env step run, one update per block.
    assert result.env_steps == cfg.total_env_steps
    assert int(result.agent.grad_steps) == cfg.total_updates
    assert result.run_time_s > 0 and result.compile_time_s > 0
    # Every probe-chain episode is two steps with return 0 or 1.
    returns = np.asarray(result.episode_returns)
    assert len(returns) > 0.9 * cfg.total_env_steps / 3  # 2 steps + 1 reset step per episode
    assert set(np.unique(returns)) <= {0.0, 1.0}

    network = QNetwork.from_config(cfg.network, make_env("probe-chain", 1).spec, cfg.algo)
    q = np.asarray(network.apply(result.params, np.eye(2, dtype=np.float32)))
    expected = optimal_q("probe-chain", 0.9)
    for state, values in expected.items():
        np.testing.assert_allclose(q[state], values, atol=0.01, err_msg=f"Q({state}, .)")
    assert result.final_return == pytest.approx(1.0)


def _bandit_steps(num_envs: int, num_steps: int, seed: int = 0):
    """Yield host copies of `num_steps` steps of probe-bandit under random actions."""
    env = make_env("probe-bandit", num_envs)
    step = jax.jit(env.step)
    key = jax.random.key(seed)
    key, key_reset = jax.random.split(key)
    state, obs = env.reset(key_reset)
    for _ in range(num_steps):
        key, key_act, key_env = jax.random.split(key, 3)
        action = jax.random.randint(key_act, (num_envs,), 0, 2, jnp.int32)
        state, next_obs, reward, _, info = step(key_env, state, action)
        yield jax.device_get((obs, action, reward, info["terminated"], next_obs, info["reset"]))
        obs = next_obs


@pytest.mark.slow
def test_host_replay_never_stores_reset_pseudo_transitions():
    # probe-bandit ends every episode after one step, so every other step is a reset step whose
    # row (old state -> new random state, reward 0, not terminated) is not a transition.
    num_envs, num_steps = 8, 20
    replay = HostReplay(1000, (2,), np.float32, seed=0)
    reset_rows = mismatched_reset_rows = 0
    for obs, action, reward, terminated, next_obs, reset in _bandit_steps(num_envs, num_steps):
        reset_rows += int(reset.sum())
        mismatched_reset_rows += int(np.any(obs[reset] != next_obs[reset], axis=-1).sum())
        stored = replay.add(obs, action, reward, terminated, next_obs, reset)
        assert stored == int((~reset).sum())

    # The test is meaningful: half the rows were reset steps and some of them change state.
    assert reset_rows == num_envs * num_steps // 2
    assert mismatched_reset_rows > 0
    assert replay.size == num_envs * num_steps - reset_rows

    n = replay.size
    obs, next_obs = replay.obs[:n], replay.next_obs[:n]
    # Every stored row is a real bandit transition: the state does not change, the episode
    # terminates, and the reward is 1 exactly when the action matches the state.
    np.testing.assert_array_equal(obs, next_obs)
    assert replay.terminated[:n].all()
    state = np.argmax(obs, axis=-1)
    expected_reward = (replay.action[:n] == state).astype(np.float32)
    np.testing.assert_array_equal(replay.reward[:n], expected_reward)

    batch = replay.sample(64)
    np.testing.assert_array_equal(batch.obs, batch.next_obs)
    assert (batch.discount == 0).all()
    np.testing.assert_array_equal(batch.weight, np.ones(64, np.float32))


def test_host_replay_wraps_and_samples_only_filled_rows():
    replay = HostReplay(5, (1,), np.float32, seed=1)
    no_reset = np.zeros(3, bool)
    with pytest.raises(ValueError, match="empty"):
        replay.sample(2)
    for k in range(3):  # rows 0..8: the ring keeps the newest five (4..8)
        vals = np.arange(3 * k, 3 * k + 3, dtype=np.float32)
        obs = vals[:, None]
        replay.add(obs, np.zeros(3, np.int32), vals, no_reset, obs + 1, no_reset)
    assert replay.size == 5 and replay.insert_pos == 4
    assert sorted(replay.reward.tolist()) == [4.0, 5.0, 6.0, 7.0, 8.0]
    np.testing.assert_array_equal(replay.next_obs[:, 0], replay.obs[:, 0] + 1)

    small = HostReplay(10, (1,), np.float32, seed=2)
    small.add(
        np.ones((2, 1), np.float32),
        np.zeros(2, np.int32),
        np.array([7.0, 9.0], np.float32),
        np.zeros(2, bool),
        np.ones((2, 1), np.float32),
        np.zeros(2, bool),
    )
    batch = small.sample(200)
    assert set(batch.reward.tolist()) == {7.0, 9.0}  # both rows drawn, never an empty one
    assert batch.index.max() < 2


@pytest.mark.slow
def test_train_unfused_max_env_steps_rounds_down_to_whole_blocks():
    cfg = _chain_config(
        total_env_steps=800,
        learning_starts=400,
        train_frequency=8,
        dqn=DQNConfig(learning_rate=1e-3, target_period=16, gamma=0.9),
    )
    calls = []
    result = train_unfused(cfg, max_env_steps=431, on_collect=lambda *a: calls.append(a))
    assert result.env_steps == 424  # 400 prefill + 3 blocks of 8
    assert int(result.agent.grad_steps) == 3
    assert result.env_steps_per_s == pytest.approx(424 / result.run_time_s)  # one lane
    assert isinstance(result, Timed) and result.timings()["env_steps_run"] == 424
    assert np.isfinite(result.final_return)
    # the public timing hook: one call per collect step, in order, on the run's clock
    index, started, episodes = map(list, zip(*calls, strict=True))
    assert index == list(range(424 // cfg.env.num_envs))
    assert started == sorted(started) and 0 <= started[0] and started[-1] < result.run_time_s
    assert episodes == sorted(episodes) and episodes[-1] == len(result.episode_returns)
    assert 0 < result.replay_time_s < result.run_time_s


@pytest.mark.parametrize(
    "bad",
    [0, -8, 400, 403, 8_004, 500.0, True, "1000"],
    ids=[
        "zero",
        "negative",
        "prefill-only",
        "under-one-block",
        "over-total",
        "float",
        "bool",
        "str",
    ],
)
def test_train_unfused_rejects_bad_max_env_steps(bad):
    cfg = _chain_config()
    match = r"max_env_steps=.*expected None or an int in \[.*404.*8000"
    with pytest.raises(ValueError, match=match):
        train_unfused(cfg, max_env_steps=bad)


def test_baseline_blocks_matches_config_without_limit():
    cfg = _chain_config()
    assert baseline_blocks(cfg) == cfg.num_blocks == 1900
    assert baseline_blocks(cfg, 408) == 2
    assert baseline_blocks(cfg, 8_000) == cfg.num_blocks


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 0.5], ids=["explore", "half-greedy"])
def test_fused_and_unfused_loops_take_the_same_first_actions(epsilon):
    """Both loops derive the same keys (`seeds.train_keys`), split them the same way and use
    the same epsilon (`Schedules.collect_epsilon`). At epsilon 1 the first actions come from
    the keys alone, so they are equal by construction; at epsilon 0.5 the explore draws are
    equal and only a greedy action over a near-tie could differ (two programs), while keys used
    differently would agree on about 2/3 of the actions."""
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.parallel.seeds import train_keys

    e, steps = 16, 6  # CartPole: no episode ends within 6 steps, so no row is dropped
    cfg = TrainConfig(
        env=EnvConfig(name="CartPole-v1", num_envs=e),
        replay=ReplayConfig(capacity=2 * e * steps, batch_size=8),
        schedule=ScheduleConfig(epsilon_start=epsilon, epsilon_end=epsilon),
        total_env_steps=e * (steps + 1),
        learning_starts=e * steps,
        train_frequency=e,
        dqn=DQNConfig(target_period=e),
        eval_episodes=0,
    )
    fns = make_train(cfg)
    runner, _ = jax.jit(fns.run_chunk)(jax.jit(fns.init)(train_keys(cfg)))  # prefill + 1 block
    fused = np.asarray(runner.seeds.replay.ring.action[0, :steps])  # [steps, E], slot t = step t
    unfused = train_unfused(cfg).replay.action[: steps * e].reshape(steps, e)
    if epsilon == 1.0:
        np.testing.assert_array_equal(fused, unfused)
    else:
        assert np.mean(fused == unfused) >= 0.95, np.mean(fused == unfused)


def test_the_baseline_refuses_a_gamma_schedule():
    from conftest import tiny_config

    cfg = tiny_config(schedule={"gamma_schedule": "0.9:0.5,0.8"})
    with pytest.raises(ValueError, match=r"gamma_schedule='0\.9:0\.5,0\.8'; use 'constant'"):
        train_unfused(cfg)


def test_the_baseline_refuses_the_rollout_learner():
    from jaxrl_fast import presets

    with pytest.raises(ValueError, match=r"learner='rollout' is not supported by the conventional"):
        train_unfused(presets.get("pqn-cartpole"))


def test_the_baseline_refuses_selfplay():
    cfg = _chain_config(selfplay={"pool_size": 4})
    with pytest.raises(
        ValueError, match=r"SelfPlayConfig.pool_size=4 \(self-play\) is not supported"
    ):
        train_unfused(cfg)
