"""Demonstrations as the loop reads them (DQfD, `DemoConfig`): env steps played by a scripted
controller or recorded from a trained agent (`jaxrl_fast.trained.demos.record`), kept in an
`.npz`, turned into replay rows when a run is resolved (`load_demos`).

An `.npz` holds the raw steps in the loop's layout (`obs, action, reward, terminated, truncated,
reset`, each `[T, E, ...]`, next-step auto-reset: `envs/base.py`) and what they were recorded
on (`env`, `discretise`, `observe`, `num_actions`), so the rows are rebuilt for the run's own
`n_step` and `gamma` (`replay.demo.demo_rows`), and a file from another env is refused.
"""

from __future__ import annotations

import math
import os
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs import make_env
from jaxrl_fast.envs.scripted import scripted_policy
from jaxrl_fast.platform.paths import write_npz
from jaxrl_fast.replay.demo import DemoRows, demo_rows
from jaxrl_fast.types import Array, Transition

FORMAT = 1
_STEP_KEYS = Transition._fields[:6]


def env_of(config: TrainConfig):
    """One env of `config`'s kind (its discretisation and observation choice), for playing and
    checking demonstrations; a pool of host-stepped envs (envpool) is refused."""
    e = config.env
    env = make_env(e.name, e.num_envs, discretise=e.discretise, observe=e.observe)
    if not env.spec.seed_vmappable:
        raise ValueError(
            f"demonstrations are played on JAX envs; EnvConfig.name={e.name!r} is a pool of "
            "host-stepped envs (envpool)."
        )
    return env


def play(config: TrainConfig, policy: Callable[[Array, Array], Array], steps: int, seed: int):
    """`ceil(steps / num_envs)` steps of `config.env`'s `num_envs` envs under
    `policy(key, obs [E, ...]) -> actions [E]`, as a numpy `Transition` `[T, E, ...]`."""
    env = env_of(config)
    num = math.ceil(steps / env.spec.num_envs)

    @jax.jit
    def run(key):
        key_reset, key_steps = jax.random.split(key)
        state, obs = env.reset(key_reset)

        def one(carry, key):
            state, obs = carry
            key_act, key_env = jax.random.split(key)
            action = policy(key_act, obs).astype(jnp.int32)
            state, next_obs, reward, _, info = env.step(key_env, state, action)
            step = Transition(
                obs, action, reward, info["terminated"], info["truncated"], info["reset"]
            )
            return (state, next_obs), step

        _, out = jax.lax.scan(one, (state, obs), jax.random.split(key_steps, num))
        return out

    return Transition(*(np.asarray(x) for x in run(jax.random.key(seed))[:6]))


def scripted_steps(config: TrainConfig, steps: int | None = None) -> Transition:
    """`config.demo.steps` (or `steps`) env steps of the env's scripted controller
    (`envs.scripted.scripted_policy`)."""
    policy = scripted_policy(config.env.name, config.env.discretise)
    return play(
        config,
        lambda key, obs: jax.vmap(policy)(obs),
        config.demo.steps if steps is None else steps,
        config.seed + 2,
    )


def _meta(config: TrainConfig, num_actions: int) -> dict:
    return {
        "format": np.int64(FORMAT),
        "env": np.str_(config.env.name.removeprefix("gymnax:")),
        "discretise": np.int64(config.env.discretise or 0),
        "observe": np.asarray(config.env.observe, np.int64),
        "num_actions": np.int64(num_actions),
    }


def save(path: str | os.PathLike, steps: Transition, config: TrainConfig) -> None:
    """Write recorded `steps` of `config.env` to `path` (`.npz`), atomically: a crash leaves
    the old file or none, never half of one."""
    path = os.fspath(path)
    meta = _meta(config, env_of(config).spec.num_actions)
    arrays = {k: np.asarray(getattr(steps, k)) for k in _STEP_KEYS}
    write_npz(path, {**arrays, **meta}, compressed=True)


def load(path: str | os.PathLike, config: TrainConfig) -> Transition:
    """The recorded steps in `path`, checked against `config.env`.

    Raises:
      ValueError: a missing or unreadable file, or one recorded on another env, observation
        or action grid (the message names the field and both values).
    """
    where = f"DemoConfig.source={os.fspath(path)!r}"
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise ValueError(
            f"{where}: no such file; record one with jaxrl_fast.trained.demos.record."
        ) from None
    except Exception as err:  # a truncated or corrupt archive
        raise ValueError(f"{where} cannot be read as an .npz of steps: {err}") from err
    missing = [k for k in (*_STEP_KEYS, *_meta(config, 0)) if k not in data]
    if missing:
        raise ValueError(f"{where} is not a demonstrations file; it lacks {missing}.")
    env = env_of(config)
    want = _meta(config, env.spec.num_actions)
    for key in ("env", "discretise", "observe", "num_actions"):
        if not np.array_equal(data[key], want[key]):
            raise ValueError(
                f"{where} was recorded with {key}={data[key].tolist()!r}; this run has "
                f"{key}={want[key].tolist()!r}."
            )
    steps = Transition(*(data[k] for k in _STEP_KEYS))
    shape = (*steps.reward.shape[:2], *env.spec.obs_shape)
    if steps.obs.shape != shape or steps.obs.dtype != np.dtype(env.spec.obs_dtype):
        raise ValueError(
            f"{where}: observations {steps.obs.shape} {steps.obs.dtype}; expected [T, E] + "
            f"{env.spec.obs_shape} {np.dtype(env.spec.obs_dtype)}."
        )
    if steps.action.min() < 0 or steps.action.max() >= env.spec.num_actions:
        raise ValueError(f"{where}: actions outside 0 .. {env.spec.num_actions - 1}.")
    return steps


def load_demos(config: TrainConfig) -> DemoRows | None:
    """The run's demonstration rows (`DemoConfig.source`: scripted or an `.npz`), for its
    `n_step` and `gamma`; None when `source` is ""."""
    source = config.demo.source
    if not source:
        return None
    steps = scripted_steps(config) if source == "scripted" else load(source, config)
    return demo_rows(steps, gamma=config.dqn.gamma, n_step=config.replay.n_step)
