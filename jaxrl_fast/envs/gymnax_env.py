"""Adapter from gymnax (>= 1.0, terminated and truncated kept apart) to the `Env` interface."""

from __future__ import annotations

import difflib
import functools

import jax
import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, make_batched_env

# gymnax ids with a discrete action space that run offline (MNISTBandit downloads MNIST at
# construction, which this library never does).
_EXCLUDED = {"MNISTBandit-bsuite"}


@functools.lru_cache(maxsize=1)
def _discrete_envs() -> tuple[str, ...]:
    """Return the gymnax env ids with discrete actions that jaxrl_fast can train on."""
    import gymnax
    from gymnax.environments import spaces

    names = []
    for name in gymnax.registered_envs:
        if name in _EXCLUDED:
            continue
        try:
            env, params = gymnax.make(name)
        except Exception:  # noqa: BLE001 - an env that cannot be built is not offered
            continue
        if isinstance(env.action_space(params), spaces.Discrete):
            names.append(name)
    return tuple(names)


def gymnax_discrete_envs() -> list[str]:
    """Return the gymnax env ids with discrete actions that jaxrl_fast can train on."""
    return list(_discrete_envs())


def make_gymnax_env(name: str, num_envs: int) -> Env:
    """Build a batched gymnax env.

    Args:
      name: gymnax id, e.g. "CartPole-v1".
      num_envs: parallel envs.

    Returns:
      An `Env`. Scalar discrete observations (FrozenLake) are one-hot encoded.

    Raises:
      ValueError: unknown or non-discrete-action env id (the message lists the valid ones).
    """
    import gymnax
    from gymnax.environments import spaces

    # Cheap check first; the full list (which builds every gymnax env) only for the error.
    ok = name in gymnax.registered_envs and name not in _EXCLUDED
    if ok:
        env, params = gymnax.make(name)
        ok = isinstance(env.action_space(params), spaces.Discrete)
    if not ok:
        valid = gymnax_discrete_envs()
        close = difflib.get_close_matches(name, valid, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"EnvConfig.name={name!r} is not a gymnax discrete-action env.{hint} "
            f"Valid names: {', '.join(valid)} (and the probe envs 'probe-bandit', 'probe-chain')."
        )
    obs_space = env.observation_space(params)
    one_hot = isinstance(obs_space, spaces.Discrete)
    n_obs = obs_space.n if one_hot else None

    def encode(obs):
        if one_hot:
            return jax.nn.one_hot(obs, n_obs, dtype=jnp.float32)
        return obs

    def reset_one(key):
        obs, state = env.reset_env(key, params)
        return state, encode(obs)

    def step_one(key, state, action):
        obs, state, reward, terminated, _ = env.step_env(key, state, action, params)
        truncated = env.is_truncated(state, params)
        return (
            state,
            encode(obs),
            reward,
            jnp.asarray(terminated, bool),
            jnp.asarray(truncated, bool),
        )

    example = jax.eval_shape(lambda k: reset_one(k)[1], jax.random.key(0))
    spec = EnvSpec(
        name=name,
        obs_shape=tuple(example.shape),
        obs_dtype=example.dtype,
        num_actions=int(env.action_space(params).n),
        num_envs=num_envs,
        max_episode_steps=int(params.max_steps_in_episode),
    )
    return make_batched_env(spec, reset_one, step_one)
