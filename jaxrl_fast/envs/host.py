"""`HostEnv`: one seed's envs stepped from a Python loop, for the conventional baseline.

A pure env (gymnax, probes) is stepped by its own `reset` / `step`, each compiled once; an
envpool pool by envpool's ordinary Python API (`envpool_env.HostPool`), with the same flags,
observations and episode statistics as its XLA adapter. `baseline/` sees only `HostEnv`.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.config import EnvConfig
from jaxrl_fast.envs.base import Env, EnvSpec
from jaxrl_fast.envs.seeded import POOL_PREFIX
from jaxrl_fast.types import Array, PRNGKey


class HostEnv(NamedTuple):
    """One seed's `spec.num_envs` envs, called from Python.

    Attributes:
      spec: the envs' spec.
      reset: `key -> (state, obs [E, *obs_shape])`.
      step: `(key, state, action [E]) -> (state, obs, reward [E], done [E], info)` as `Env.step`.
    """

    spec: EnvSpec
    reset: Callable[[PRNGKey], tuple[Any, Array]]
    step: Callable[[PRNGKey, Any, Array], tuple[Any, Array, Array, Array, dict]]


def make_host_env(
    config: EnvConfig, *, seed: int = 0, env: Env | None = None, key_impl: str = "threefry2x32"
) -> HostEnv:
    """Build (and for a pure env, compile) the envs an `EnvConfig` names, for a Python loop.

    Args:
      config: the env's name and settings; `config.num_envs` envs.
      seed: envpool's seed (a pure env takes its randomness from the keys).
      env: a pure `Env` to use instead of `config.name`.
      key_impl: the PRNG implementation of the keys a pure env will be called with
        (`TrainConfig.prng_impl`).

    Raises:
      ValueError: unknown env name; ImportError: envpool without the `atari` extra.
    """
    if env is None and config.name.startswith(POOL_PREFIX):
        from jaxrl_fast.envs.envpool_env import HostPool

        pool = HostPool(config.name, config.num_envs, config.atari, seed=seed)
        return HostEnv(
            spec=pool.spec,
            reset=lambda key: (None, pool.reset()),
            step=lambda key, state, action: pool.step(np.asarray(action)),
        )
    if env is None:
        from jaxrl_fast.envs import make_env

        env = make_env(
            config.name, config.num_envs, discretise=config.discretise, observe=config.observe
        )
    key = jax.random.key(0, impl=key_impl)
    reset = jax.jit(env.reset).lower(key).compile()
    state = jax.eval_shape(env.reset, key)[0]
    action = jax.ShapeDtypeStruct((env.spec.num_envs,), jnp.int32)
    step = jax.jit(env.step).lower(key, state, action).compile()
    return HostEnv(spec=env.spec, reset=reset, step=step)
