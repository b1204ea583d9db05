"""Probe environments with known optimal Q-values, for tests and for checking a new setup.

* `probe-bandit`: one step; obs is one-hot of a random bit `s`; reward 1 if the action equals `s`,
  else 0; then terminal. `Q*(s, a) = 1[a == s]`.
* `probe-chain`: two steps; obs one-hot(0) then one-hot(1); at state 0 every action gives reward 0
  and moves to state 1; at state 1 action 1 gives reward 1, action 0 gives 0; then terminal.
  `Q*(0, a) = gamma`, `Q*(1, 1) = 1`, `Q*(1, 0) = 0`.
* `probe-masked`: probe-chain with 3 actions and a legal-action mask (`EnvSpec.action_mask`):
  obs one-hot(s) then the mask; at state 0 every action is legal, gives 0 and moves to state 1;
  at state 1 action 1 is *illegal* and would pay 5, action 2 pays 1, action 0 pays 0.3; then
  terminal. Over legal actions `Q*(0, a) = gamma`, `Q*(1, 0) = 0.3`, `Q*(1, 2) = 1`; a learner
  that ignored the mask would find 5 (and `5 gamma` at state 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, append_legal, make_batched_env

PROBE_ENVS = ("probe-bandit", "probe-chain", "probe-masked")


def optimal_q(name: str, gamma: float) -> dict[int, list[float]]:
    """Return the known optimal Q-values per state index of a probe env."""
    if name == "probe-bandit":
        return {0: [1.0, 0.0], 1: [0.0, 1.0]}
    if name == "probe-chain":
        return {0: [gamma, gamma], 1: [0.0, 1.0]}
    if name == "probe-masked":  # the illegal action's entry: None
        return {0: [gamma, gamma, gamma], 1: [0.3, None, 1.0]}
    raise ValueError(f"unknown probe env {name!r}; expected one of {PROBE_ENVS}")


def make_probe_env(name: str, num_envs: int, *, on_step=None) -> Env:
    """Build a probe env. `on_step`, if given, is called each time `step` is *traced*."""
    if name not in PROBE_ENVS:
        raise ValueError(f"unknown probe env {name!r}; expected one of {PROBE_ENVS}")
    if name == "probe-masked":
        return _make_masked_probe(num_envs)

    def obs_of(s):
        return jax.nn.one_hot(s, 2, dtype=jnp.float32)

    if name == "probe-bandit":

        def reset_one(key):
            s = jax.random.bernoulli(key).astype(jnp.int32)
            return s, obs_of(s)

        def step_one(key, s, action):
            if on_step is not None:
                on_step()
            reward = (action == s).astype(jnp.float32)
            return s, obs_of(s), reward, jnp.array(True), jnp.array(False)

    else:

        def reset_one(key):
            s = jnp.zeros((), jnp.int32)
            return s, obs_of(s)

        def step_one(key, s, action):
            if on_step is not None:
                on_step()
            reward = jnp.where(s == 1, (action == 1).astype(jnp.float32), 0.0)
            terminated = s == 1
            nxt = jnp.minimum(s + 1, 1)
            return nxt, obs_of(nxt), reward, terminated, jnp.array(False)

    spec = EnvSpec(
        name=name,
        obs_shape=(2,),
        obs_dtype=jnp.float32,
        num_actions=2,
        num_envs=num_envs,
        max_episode_steps=2,
    )
    return make_batched_env(spec, reset_one, step_one)


def _make_masked_probe(num_envs: int) -> Env:
    legal = jnp.array([[True, True, True], [True, False, True]])
    pays = jnp.array([0.3, 5.0, 1.0], jnp.float32)

    def obs_of(s):
        return append_legal(jax.nn.one_hot(s, 2, dtype=jnp.float32), legal[s])

    def reset_one(key):
        s = jnp.zeros((), jnp.int32)
        return s, obs_of(s)

    def step_one(key, s, action):
        reward = jnp.where(s == 1, pays[action], 0.0)
        nxt = jnp.minimum(s + 1, 1)
        return nxt, obs_of(nxt), reward, s == 1, jnp.array(False)

    spec = EnvSpec("probe-masked", (5,), jnp.float32, 3, num_envs, 2, action_mask=True)
    return make_batched_env(spec, reset_one, step_one)
