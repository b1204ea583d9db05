"""Env construction and the next-step auto-reset contract (`jaxrl_fast.envs`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import EnvConfig
from jaxrl_fast.envs import (
    EnvSpec,
    list_envs,
    make_batched_env,
    make_env,
    make_seeded,
    make_seeded_env,
)

# --------------------------------------------------------------------------- names


def test_unknown_name_lists_valid_names_and_suggests_close_match():
    with pytest.raises(ValueError, match=r"EnvConfig\.name='CartPol-v1'") as err:
        make_env("CartPol-v1")
    msg = str(err.value)
    assert "Did you mean 'CartPole-v1'" in msg
    assert "Valid names: " in msg
    for name in ("CartPole-v1", "Breakout-MinAtar", "probe-bandit", "probe-chain"):
        assert name in msg


def test_unknown_name_without_close_match_has_no_suggestion():
    with pytest.raises(ValueError, match=r"Valid names: .*CartPole-v1") as err:
        make_env("zzzzzz")
    assert "Did you mean" not in str(err.value)


@pytest.mark.parametrize(
    "name, why",
    [
        ("Pendulum-v1", "has a continuous action space"),
        ("MountainCarContinuous-v0", "has a continuous action space"),
        ("MNISTBandit-bsuite", "downloads data"),
    ],
)
def test_continuous_or_excluded_env_is_rejected(name, why):
    with pytest.raises(ValueError, match=rf"EnvConfig\.name='{name}' {why}.*Valid names: "):
        make_env(name)


def test_bad_name_is_refused_without_building_any_env(monkeypatch):
    """The did-you-mean list comes from a fixed list, not from constructing every gymnax env
    (seconds): a bad name builds nothing."""
    import gymnax

    def no_build(*args, **kwargs):
        raise AssertionError("gymnax.make called while refusing a bad name")

    monkeypatch.setattr(gymnax, "make", no_build)
    for name in ("CartPol-v1", "Pendulum-v1", "MNISTBandit-bsuite"):
        with pytest.raises(ValueError, match=r"Valid names: CartPole-v1"):
            make_env(name)


def test_fixed_discrete_list_matches_gymnax():
    """`DISCRETE_ENVS` is exactly gymnax's registered envs with a discrete action space (all but
    the excluded one, which would download data)."""
    import gymnax
    from gymnax.environments import spaces

    from jaxrl_fast.envs.gymnax_env import DISCRETE_ENVS, EXCLUDED_ENVS

    found = []
    for name in gymnax.registered_envs:
        if name in EXCLUDED_ENVS:
            continue
        env, params = gymnax.make(name)
        if isinstance(env.action_space(params), spaces.Discrete):
            found.append(name)
    assert sorted(found) == sorted(DISCRETE_ENVS)


def test_envpool_without_the_atari_extra_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "envpool", None)  # as if envpool were not installed
    with pytest.raises(ImportError, match=r"pip install 'jaxrl-fast\[atari\]'"):
        make_env("envpool:Pong-v5")


@pytest.mark.parametrize("num_envs", [0, -1, 2.0])
def test_bad_num_envs(num_envs):
    with pytest.raises(ValueError, match=r"EnvConfig\.num_envs="):
        make_env("CartPole-v1", num_envs=num_envs)


def test_list_envs():
    names = list_envs()
    assert "CartPole-v1" in names
    assert "Breakout-MinAtar" in names
    assert "probe-bandit" in names and "probe-chain" in names
    # Downloads data at construction.
    assert "MNISTBandit-bsuite" not in names
    # Continuous actions.
    for name in ("Pendulum-v1", "MountainCarContinuous-v0", "Reacher-misc", "Swimmer-misc"):
        assert name not in names
    assert len(names) == len(set(names))


def test_specs():
    spec = make_env("gymnax:CartPole-v1", num_envs=3).spec
    assert spec == EnvSpec(
        name="CartPole-v1",
        obs_shape=(4,),
        obs_dtype=jnp.float32,
        num_actions=2,
        num_envs=3,
        max_episode_steps=500,
    )
    spec = make_env("Breakout-MinAtar", num_envs=2).spec
    assert spec.obs_shape == (10, 10, 4) and spec.num_actions == 3 and spec.num_envs == 2
    spec = make_env("probe-chain", num_envs=5).spec
    assert spec.obs_shape == (2,) and spec.num_actions == 2 and spec.num_envs == 5


@pytest.mark.slow
def test_frozen_lake_obs_is_one_hot_float():
    env = make_env("FrozenLake-misc", num_envs=3)
    assert env.spec.obs_shape == (16,)
    assert env.spec.obs_dtype == jnp.float32
    state, obs = env.reset(jax.random.key(0))
    for _ in range(3):
        obs = np.asarray(obs)
        assert obs.shape == (3, 16) and obs.dtype == np.float32
        assert set(np.unique(obs)) <= {0.0, 1.0}
        np.testing.assert_array_equal(obs.sum(axis=1), 1.0)
        state, obs, *_ = env.step(jax.random.key(1), state, jnp.array([0, 1, 2]))
    # Reset puts every env on the start cell.
    _, obs = env.reset(jax.random.key(3))
    np.testing.assert_array_equal(np.asarray(obs).argmax(axis=1), 0)


# --------------------------------------------------------------------------- auto-reset


def _rollout(env, actions_fn, num_steps, seed=0):
    """Step `env` `num_steps` times in one scan.

    Returns `(obs0, obs [T, E, ...], reward, done, info)` as numpy.
    """

    def body(carry, key):
        state, obs = carry
        state, obs_next, reward, done, info = env.step(key, state, actions_fn(obs))
        return (state, obs_next), (obs_next, reward, done, info)

    @jax.jit
    def run(key):
        key_reset, key_steps = jax.random.split(key)
        state, obs0 = env.reset(key_reset)
        _, out = jax.lax.scan(body, (state, obs0), jax.random.split(key_steps, num_steps))
        return obs0, out

    obs0, (obs, reward, done, info) = run(jax.random.key(seed))
    return (
        np.asarray(obs0),
        np.asarray(obs),
        np.asarray(reward),
        np.asarray(done),
        jax.tree.map(np.asarray, info),
    )


def test_probe_bandit_alternates_real_and_reset_steps():
    num_steps = 6
    # Pick the action the obs says is rewarded: every real step earns 1.
    obs0, obs, reward, done, info = _rollout(
        make_env("probe-bandit", num_envs=4), lambda o: jnp.argmax(o, -1), num_steps
    )
    real = np.arange(num_steps) % 2 == 0  # steps 0, 2, 4 are real; 1, 3, 5 are reset steps
    for t in range(num_steps):
        if real[t]:
            np.testing.assert_array_equal(info["reset"][t], False)
            np.testing.assert_array_equal(info["terminated"][t], True)
            np.testing.assert_array_equal(done[t], True)
            np.testing.assert_array_equal(reward[t], 1.0)
            np.testing.assert_array_equal(info["episode_return"][t], 1.0)
            np.testing.assert_array_equal(info["episode_length"][t], 1)
            # The real final obs is the state the action was taken in.
            prev = obs0 if t == 0 else obs[t - 1]
            np.testing.assert_array_equal(obs[t], prev)
        else:
            np.testing.assert_array_equal(info["reset"][t], True)
            np.testing.assert_array_equal(info["terminated"][t], False)
            np.testing.assert_array_equal(info["truncated"][t], False)
            np.testing.assert_array_equal(done[t], False)
            np.testing.assert_array_equal(reward[t], 0.0)
            np.testing.assert_array_equal(info["episode_return"][t], 0.0)
            np.testing.assert_array_equal(info["episode_length"][t], 0)
        np.testing.assert_array_equal(obs[t].sum(-1), 1.0)
    np.testing.assert_array_equal(info["truncated"], False)
    assert reward.dtype == np.float32 and done.dtype == np.bool_


def test_probe_bandit_wrong_action_earns_nothing():
    _, _, reward, _, info = _rollout(
        make_env("probe-bandit", num_envs=4), lambda o: 1 - jnp.argmax(o, -1), 4
    )
    np.testing.assert_array_equal(reward, 0.0)
    np.testing.assert_array_equal(info["episode_return"], 0.0)


@pytest.mark.slow
def test_cartpole_next_step_auto_reset():
    num_envs, num_steps = 3, 40
    # Always push right: the pole falls within ~10 steps, so every env finishes episodes.
    obs0, obs, reward, done, info = _rollout(
        make_env("CartPole-v1", num_envs=num_envs),
        lambda o: jnp.ones(o.shape[0], jnp.int32),
        num_steps,
    )
    assert done[:-1].any(axis=0).all(), "every env should finish an episode"
    np.testing.assert_array_equal(info["truncated"], False)
    np.testing.assert_array_equal(done, info["terminated"])
    # reset[t] is exactly done[t - 1] (the first step follows env.reset, not a done).
    np.testing.assert_array_equal(info["reset"][0], False)
    np.testing.assert_array_equal(info["reset"][1:], done[:-1])
    np.testing.assert_array_less(np.abs(obs0), 0.05 + 1e-6)

    episodes = 0
    for e in range(num_envs):
        ep_return, ep_length = 0.0, 0
        for t in range(num_steps):
            if info["reset"][t, e]:
                # A reset step: fresh obs (gymnax samples the state in [-0.05, 0.05]), no reward.
                assert reward[t, e] == 0.0
                assert not info["terminated"][t, e] and not done[t, e]
                np.testing.assert_array_less(np.abs(obs[t, e]), 0.05 + 1e-6)
                assert info["episode_return"][t, e] == 0.0 and info["episode_length"][t, e] == 0
                ep_return, ep_length = 0.0, 0
                continue
            ep_return += reward[t, e]
            ep_length += 1
            assert reward[t, e] == 1.0
            assert info["episode_return"][t, e] == pytest.approx(ep_return)
            assert info["episode_length"][t, e] == ep_length
            if done[t, e]:
                episodes += 1
                # The real final observation: out of bounds (x beyond 2.4 or theta beyond 12 deg).
                x, theta = obs[t, e, 0], obs[t, e, 2]
                assert abs(x) > 2.4 or abs(theta) > 12 * 2 * np.pi / 360
                assert ep_length > 1
    assert episodes >= num_envs


def _counting_env(num_envs, truncate_at, terminate_at=None):
    """Obs is the step count; truncates after `truncate_at` steps (terminates at `terminate_at`)."""

    def reset_one(key):
        t = jnp.zeros((), jnp.int32)
        return t, t[None].astype(jnp.float32)

    def step_one(key, t, action):
        t = t + 1
        terminated = jnp.array(False) if terminate_at is None else t >= terminate_at
        reward = jnp.float32(1.0) + action
        return t, t[None].astype(jnp.float32), reward, terminated, t >= truncate_at

    spec = EnvSpec(
        name="counter",
        obs_shape=(1,),
        obs_dtype=jnp.float32,
        num_actions=2,
        num_envs=num_envs,
        max_episode_steps=truncate_at,
    )
    return make_batched_env(spec, reset_one, step_one)


def test_truncation_then_reset_step():
    # Action 1 makes the reward 2 per step; the reset step must ignore it (reward 0).
    obs0, obs, reward, done, info = _rollout(
        _counting_env(2, truncate_at=3), lambda o: jnp.ones(o.shape[0], jnp.int32), 9
    )
    np.testing.assert_array_equal(obs0[:, 0], 0.0)
    # Per step (same for both envs): obs 1, 2, 3 (truncated), 0 (reset), 1, 2, 3, 0, 1.
    np.testing.assert_array_equal(obs[:, :, 0].T, [[1, 2, 3, 0, 1, 2, 3, 0, 1]] * 2)
    trunc = np.array([0, 0, 1, 0, 0, 0, 1, 0, 0], bool)
    resets = np.array([0, 0, 0, 1, 0, 0, 0, 1, 0], bool)
    for e in range(2):
        np.testing.assert_array_equal(info["truncated"][:, e], trunc)
        np.testing.assert_array_equal(info["terminated"][:, e], False)
        np.testing.assert_array_equal(done[:, e], trunc)
        np.testing.assert_array_equal(info["reset"][:, e], resets)
        np.testing.assert_array_equal(reward[:, e], [2, 2, 2, 0, 2, 2, 2, 0, 2])
        np.testing.assert_array_equal(info["episode_length"][:, e], [1, 2, 3, 0, 1, 2, 3, 0, 1])
        np.testing.assert_array_equal(info["episode_return"][:, e], [2, 4, 6, 0, 2, 4, 6, 0, 2])


def test_terminated_wins_over_truncated_on_the_same_step():
    _, obs, _, done, info = _rollout(
        _counting_env(1, truncate_at=2, terminate_at=2),
        lambda o: jnp.zeros(o.shape[0], jnp.int32),
        4,
    )
    np.testing.assert_array_equal(info["terminated"][:, 0], [False, True, False, False])
    np.testing.assert_array_equal(info["truncated"][:, 0], False)
    np.testing.assert_array_equal(done[:, 0], [False, True, False, False])
    np.testing.assert_array_equal(info["reset"][:, 0], [False, False, True, False])
    np.testing.assert_array_equal(obs[:, 0, 0], [1, 2, 0, 1])


def test_envs_in_a_batch_are_independent():
    # Different reset keys per env: the CartPole start states differ across the batch.
    env = make_env("CartPole-v1", num_envs=4)
    _, obs = env.reset(jax.random.key(0))
    obs = np.asarray(obs)
    assert len({tuple(row) for row in obs}) == 4


# --------------------------------------------------------------------------- SeededEnv


@pytest.mark.slow
def test_seeded_env_steps_every_seed_as_its_own_env():
    """A vmapped `SeededEnv` gives each seed what that seed's own env gives for its key."""
    env = make_env("CartPole-v1", num_envs=3)
    seeded = make_seeded_env(env, num_seeds=2)
    assert seeded.spec.num_envs == 3 and seeded.state_axes == 0 and not seeded.single_device
    keys = jax.random.split(jax.random.key(0), 2)
    state, obs = seeded.reset(keys)
    assert obs.shape == (2, 3, 4)
    action = jnp.array([[0, 1, 1], [1, 0, 0]], jnp.int32)
    state, obs2, reward, done, info = seeded.step(keys, state, action)
    assert obs2.shape == (2, 3, 4) and reward.shape == done.shape == info["reset"].shape == (2, 3)
    for s in range(2):
        st, o = env.reset(keys[s])
        np.testing.assert_allclose(obs[s], o, rtol=1e-6)
        _, o2, r, d, _ = env.step(keys[s], st, action[s])
        np.testing.assert_allclose(obs2[s], o2, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(reward[s], r)
    assert not np.allclose(obs[0], obs[1])  # the seeds' envs are different


def test_make_seeded_builds_the_configured_envs():
    seeded = make_seeded(EnvConfig(name="probe-chain", num_envs=5), num_seeds=3, num_envs=2)
    assert seeded.num_seeds == 3 and seeded.spec.num_envs == 2
    _, obs = seeded.reset(jax.random.split(jax.random.key(1), 3))
    assert obs.shape == (3, 2, 2)
