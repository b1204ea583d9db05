"""Schedules as `env_step -> value` functions (optax schedules where they exist)."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp
import optax

from jaxrl_fast.config import TrainConfig


class Schedules(NamedTuple):
    """`epsilon(env_step)` for exploration, `learning_rate(grad_step)` for Adam, and
    `collect_epsilon(collect_index)`: the epsilon of collect step `collect_index` (int32, all
    envs of a seed step once per collect step), which the fused loop and the baseline share."""

    epsilon: Callable
    learning_rate: Callable
    collect_epsilon: Callable


def make_schedules(config: TrainConfig) -> Schedules:
    """Build the run's schedules.

    Epsilon decays linearly from `epsilon_start` to `epsilon_end` over
    `epsilon_fraction * total_env_steps` env steps, as in CleanRL and PureJaxRL.
    """
    s = config.schedule
    decay_steps = max(1, int(s.epsilon_fraction * config.total_env_steps))
    epsilon = optax.linear_schedule(s.epsilon_start, s.epsilon_end, decay_steps)
    lr = config.dqn.learning_rate
    if s.lr_schedule == "linear":
        learning_rate = optax.linear_schedule(lr, lr * s.lr_end_fraction, config.total_updates)
    else:
        learning_rate = optax.constant_schedule(lr)
    num_envs = config.env.num_envs

    def collect_epsilon(collect_index):
        # env steps as float32: an int32 product would overflow past 2^31 env steps.
        env_steps = jnp.asarray(collect_index).astype(jnp.float32) * num_envs
        return epsilon(env_steps).astype(jnp.float32)

    return Schedules(epsilon=epsilon, learning_rate=learning_rate, collect_epsilon=collect_epsilon)
