"""Environments: one functional `Env` interface over gymnax and probe envs."""

from __future__ import annotations

from jaxrl_fast.envs.base import Env, EnvSpec, EnvState, make_batched_env
from jaxrl_fast.envs.gymnax_env import gymnax_discrete_envs, make_gymnax_env
from jaxrl_fast.envs.probe import PROBE_ENVS, make_probe_env, optimal_q

__all__ = [
    "Env",
    "EnvSpec",
    "EnvState",
    "PROBE_ENVS",
    "list_envs",
    "make_batched_env",
    "make_env",
    "optimal_q",
]


def list_envs() -> list[str]:
    """Return every env name `make_env` accepts (gymnax discrete-action envs and probes)."""
    return gymnax_discrete_envs() + list(PROBE_ENVS)


def make_env(name: str, num_envs: int = 1) -> Env:
    """Build a batched env by name.

    Args:
      name: a gymnax id ("CartPole-v1", optionally "gymnax:CartPole-v1") or a probe env name.
      num_envs: parallel envs.

    Raises:
      ValueError: unknown name (the message lists valid names), or `num_envs < 1`.

    Examples:
      >>> import jax
      >>> env = make_env("CartPole-v1", num_envs=4)
      >>> state, obs = env.reset(jax.random.key(0))
      >>> obs.shape
      (4, 4)
    """
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(
            f"EnvConfig.num_envs={num_envs!r} is not allowed; expected a positive int."
        )
    if name in PROBE_ENVS:
        return make_probe_env(name, num_envs)
    if name.startswith("envpool:"):
        raise ValueError(
            f"EnvConfig.name={name!r}: envpool (Atari) envs are not supported yet; "
            f"use a gymnax env such as 'CartPole-v1'."
        )
    return make_gymnax_env(name.removeprefix("gymnax:"), num_envs)
