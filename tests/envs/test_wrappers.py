"""Action discretisation (`envs.wrappers.ActionGrid`, `EnvConfig.discretise`) and the scripted
controllers (`envs.scripted`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast import presets
from jaxrl_fast.config import EnvConfig
from jaxrl_fast.envs import list_envs, make_env, make_seeded
from jaxrl_fast.envs.scripted import scripted_controller
from jaxrl_fast.envs.wrappers import make_action_grid


def test_grid_values_by_hand():
    grid = make_action_grid([-2.0], [2.0], 9)
    assert grid.num_actions == 9
    np.testing.assert_array_equal(
        np.asarray(grid.to_continuous(jnp.arange(9)))[:, 0],
        [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0],
    )


def test_joint_grid_digit_order_by_hand():
    """Action a = 9 * i0 + i1: dimension 0 is the most significant digit; boxes per dimension."""
    grid = make_action_grid([-1.0, 0.0], [1.0, 4.0], 9)
    assert grid.num_actions == 81
    got = np.asarray(grid.to_continuous(jnp.array([0, 1, 9, 40, 80, 17])))
    want = [[-1.0, 0.0], [-1.0, 0.5], [-0.75, 0.0], [0.0, 2.0], [1.0, 4.0], [-0.75, 4.0]]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_nearest_inverts_the_grid_and_clips():
    grid = make_action_grid([-1.0, -1.0], [1.0, 1.0], 9)
    every = jnp.arange(81)
    np.testing.assert_array_equal(np.asarray(grid.nearest(grid.to_continuous(every))), every)
    # between grid points: the closer one; outside the box: its edge
    got = grid.nearest(jnp.array([[0.1, -0.2], [5.0, -5.0]]))
    np.testing.assert_array_equal(np.asarray(got), [4 * 9 + 3, 8 * 9 + 0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(low=[-1.0], high=[1.0], bins=1), r"discretise=1 is not allowed"),
        (dict(low=[-1.0] * 2, high=[1.0] * 2, bins=65), r"65\^2 = 4,225 joint actions.*<= 64"),
        (dict(low=[-np.inf], high=[1.0], bins=9), r"not bounded"),
    ],
)
def test_bad_grids_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_action_grid(kwargs["low"], kwargs["high"], kwargs["bins"])


def test_discretise_needed_for_continuous_and_refused_for_discrete():
    with pytest.raises(ValueError, match=r"Pendulum-v1'.*set EnvConfig\.discretise=N"):
        make_env("Pendulum-v1")
    with pytest.raises(ValueError, match=r"discretise=9 is for continuous action spaces"):
        make_env("CartPole-v1", discretise=9)
    with pytest.raises(ValueError, match=r"discretise=9 is for continuous-action gymnax envs"):
        make_env("probe-chain", discretise=9)
    with pytest.raises(ValueError, match=r"EnvConfig\.discretise=1 is not allowed"):
        EnvConfig(name="Pendulum-v1", discretise=1)
    with pytest.raises(ValueError, match=r"EnvConfig\.discretise=True is not allowed"):
        EnvConfig(name="Pendulum-v1", discretise=True)
    assert "Reacher-misc" in list_envs(continuous=True)
    assert "Reacher-misc" not in list_envs()


@pytest.mark.slow
def test_discretised_pendulum_applies_the_grid_torque():
    """Action k is torque -2 + 0.5 k: the env's own state records the torque it applied."""
    env = make_env("Pendulum-v1", num_envs=9, discretise=9)
    assert env.spec.num_actions == 9 and env.spec.obs_shape == (3,)
    state, _ = env.reset(jax.random.key(0))
    state, _, reward, _, _ = env.step(jax.random.key(1), state, jnp.arange(9))
    np.testing.assert_allclose(np.asarray(state.inner.last_u), np.arange(9) * 0.5 - 2.0)
    assert reward.dtype == jnp.float32 and reward.shape == (9,)


@pytest.mark.slow
def test_discretised_reacher_moves_each_joint_by_its_digit():
    """Action 9 * i0 + i1 accelerates joint 0 by torque(i0) and joint 1 by torque(i1)."""
    env = make_env("Reacher-misc", num_envs=3, discretise=9)
    assert env.spec.num_actions == 81
    state, _ = env.reset(jax.random.key(0))
    before = np.asarray(state.inner.angle_vels)
    state, _, _, _, _ = env.step(jax.random.key(1), state, jnp.array([0, 8, 9 * 8 + 4]))
    dv = (np.asarray(state.inner.angle_vels) - before) / 0.05  # dt, torque_scale 1
    np.testing.assert_allclose(dv, [[-1.0, -1.0], [-1.0, 1.0], [1.0, 0.0]], atol=1e-4)


def test_seeded_env_and_presets_carry_discretise():
    cfg = presets.get("reacher-81")
    assert cfg.env.discretise == 9 and cfg.env.name == "Reacher-misc"
    env = make_seeded(cfg.env, 2)
    assert env.spec.num_actions == 81
    assert presets.get("pendulum-discrete").env.discretise == 9


def _scripted_return(name: str, episodes: int = 16) -> float:
    import gymnax

    env, params = gymnax.make(name)
    controller = scripted_controller(name)

    def episode(key):
        obs, state = env.reset_env(key, params)

        def step(carry, key):
            obs, state, total = carry
            obs, state, reward, _, _ = env.step_env(key, state, controller(obs), params)
            return (obs, state, total + reward), None

        keys = jax.random.split(key, params.max_steps_in_episode)
        return jax.lax.scan(step, (obs, state, 0.0), keys)[0][2]

    return float(
        jnp.mean(jax.jit(jax.vmap(episode))(jax.random.split(jax.random.key(0), episodes)))
    )


@pytest.mark.slow
def test_scripted_controllers_beat_random_by_far():
    # random: about -1200 (Pendulum) and 13 (Reacher)
    # (benchmarks/results/applications/applications.md)
    assert _scripted_return("Pendulum-v1") > -250.0
    assert _scripted_return("Reacher-misc") > 45.0
    with pytest.raises(ValueError, match=r"no scripted controller for 'CartPole-v1'"):
        scripted_controller("CartPole-v1")


@pytest.mark.slow
@pytest.mark.learning
def test_pendulum_discrete_learns():
    """One seed of `pendulum-discrete` at half its budget swings up and balances: a random
    policy scores about -1200, the scripted controller -128."""
    from jaxrl_fast.run.train import train

    cfg = presets.get("pendulum-discrete").replace(total_env_steps=101_000, num_seeds=1)
    result = train(cfg, progress=False)
    assert float(result.final_return[0]) > -400.0
