"""Named `TrainConfig` presets.

* `cartpole` (default): tuned for wall time to solve CartPole-v1 on a small CPU.
* `cartpole-cleanrl`: exactly the CleanRL / PureJaxRL DQN hyperparameters (10 envs, buffer 10,000,
  batch 128, lr 2.5e-4, learning starts 10,000, one update per 10 env steps, target copy every 500
  env steps, epsilon 1 -> 0.05 over half the run, gamma 0.99, MLP 120-84, MSE loss, no double-Q,
  no gradient clipping, 500k env steps).
* one preset per other gymnax env this library has made learn (see README's preset table).
"""

from __future__ import annotations

import difflib
from typing import Callable

from jaxrl_fast.config import (
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)


def _cartpole_cleanrl() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="CartPole-v1", num_envs=10),
        network=NetworkConfig(kind="mlp", hidden_sizes=(120, 84)),
        replay=ReplayConfig(capacity=10_000, batch_size=128),
        dqn=DQNConfig(
            gamma=0.99,
            learning_rate=2.5e-4,
            double_q=False,
            loss="mse",
            target_period=500,
            tau=1.0,
            max_grad_norm=None,
        ),
        schedule=ScheduleConfig(epsilon_start=1.0, epsilon_end=0.05, epsilon_fraction=0.5),
        total_env_steps=500_000,
        learning_starts=10_000,
        train_frequency=10,
    )


def _cartpole() -> TrainConfig:
    # Tuned for wall time to a solved agent: short prefill, higher learning rate decayed to 0
    # (a stable final greedy policy), faster epsilon decay; 4 of 4 seeds >= 475 at 201k steps.
    return TrainConfig(
        env=EnvConfig(name="CartPole-v1", num_envs=10),
        network=NetworkConfig(kind="mlp", hidden_sizes=(120, 84)),
        replay=ReplayConfig(capacity=10_000, batch_size=128),
        dqn=DQNConfig(
            gamma=0.99,
            learning_rate=1e-3,
            double_q=True,
            loss="mse",
            target_period=500,
            max_grad_norm=10.0,
        ),
        schedule=ScheduleConfig(
            epsilon_start=1.0,
            epsilon_end=0.05,
            epsilon_fraction=0.25,
            lr_schedule="linear",
            lr_end_fraction=0.0,
        ),
        total_env_steps=201_000,
        learning_starts=1_000,
        train_frequency=10,
    )


def _minatar(name: str) -> Callable[[], TrainConfig]:
    def make() -> TrainConfig:
        return TrainConfig(
            env=EnvConfig(name=name, num_envs=16),
            network=NetworkConfig(kind="cnn", conv_channels=(16,), hidden_sizes=(128,)),
            replay=ReplayConfig(capacity=100_000, batch_size=64),
            dqn=DQNConfig(
                gamma=0.99,
                learning_rate=2.5e-4,
                double_q=True,
                loss="mse",
                target_period=1_024,
                max_grad_norm=10.0,
            ),
            schedule=ScheduleConfig(epsilon_start=1.0, epsilon_end=0.05, epsilon_fraction=0.2),
            total_env_steps=1_000_000,
            learning_starts=10_000,
            train_frequency=16,
            updates_per_block=2,
        )

    return make


_PRESETS: dict[str, Callable[[], TrainConfig]] = {
    "cartpole": _cartpole,
    "cartpole-cleanrl": _cartpole_cleanrl,
    "minatar-breakout": _minatar("Breakout-MinAtar"),
}

DEFAULT = "cartpole"


def names() -> list[str]:
    """Return the preset names."""
    return sorted(_PRESETS)


def get(name: str = DEFAULT) -> TrainConfig:
    """Return the named preset.

    Raises:
      ValueError: unknown name, with a did-you-mean suggestion and the valid names.

    Examples:
      >>> get("cartpole-cleanrl").replay.batch_size
      128
    """
    if name not in _PRESETS:
        close = difflib.get_close_matches(name, list(_PRESETS), n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown preset {name!r}.{hint} Valid presets: {', '.join(names())}.")
    return _PRESETS[name]()
