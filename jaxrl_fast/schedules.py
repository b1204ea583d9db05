"""Schedules as `env_step -> value` functions (optax schedules where they exist)."""

from __future__ import annotations

from typing import Callable, NamedTuple

import optax

from jaxrl_fast.config import TrainConfig


class Schedules(NamedTuple):
    """`epsilon(env_step)` for exploration, `learning_rate(grad_step)` for Adam."""

    epsilon: Callable
    learning_rate: Callable


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
    return Schedules(epsilon=epsilon, learning_rate=learning_rate)
