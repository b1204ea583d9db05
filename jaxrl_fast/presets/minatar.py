"""Presets on MinAtar (gymnax's `*-MinAtar` envs, `presets.get`).

* `minatar-breakout`: Breakout-MinAtar, CNN (3x3 conv 16 channels, dense 128), 16 envs, 100k
  replay, 2 updates per 16 env steps, lr 2.5e-4 decayed linearly to 0, 154k env steps.
* `minatar-space-invaders`: the `minatar-breakout` settings on SpaceInvaders-MinAtar.
* `minatar-freeway`: the `minatar-breakout` settings on Freeway-MinAtar, 106k env steps.
"""

from __future__ import annotations

from typing import Callable

from jaxrl_fast.config import (
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)

__all__ = ["PRESETS"]


def _minatar_base(name: str) -> TrainConfig:
    # Shared MinAtar settings: 16 envs, 3x3 conv 16 channels + dense 128, 100k replay, two updates
    # per 16 env steps, lr 2.5e-4 decayed linearly to 0, epsilon 1 -> 0.05 over 20% of the run.
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
        schedule=ScheduleConfig(
            epsilon_start=1.0,
            epsilon_end=0.05,
            epsilon_fraction=0.2,
            lr_schedule="linear",
            lr_end_fraction=0.0,
        ),
        total_env_steps=154_000,
        learning_starts=10_000,
        train_frequency=16,
        updates_per_block=2,
    )


def _minatar_breakout() -> TrainConfig:
    # benchmarks/results/presets/presets.md, 154k steps: 2-seed final greedy 8.7, 5.2 (random 0.36),
    # 73 s wall incl. compile on a 2-core CPU.
    return _minatar_base("Breakout-MinAtar")


def _minatar_space_invaders() -> TrainConfig:
    # benchmarks/results/presets/presets.md, 154k steps: 2-seed final greedy 23.0, 23.0 (random
    # 4.2),
    # 103 s wall incl. compile on a 2-core CPU.
    return _minatar_base("SpaceInvaders-MinAtar")


def _minatar_freeway() -> TrainConfig:
    # benchmarks/results/presets/presets.md, 106k steps: 2-seed final greedy 25.6, 35.2 (random
    # 0.53),
    # 72 s wall incl. compile on a 2-core CPU.
    return _minatar_base("Freeway-MinAtar").replace(total_env_steps=106_000)


PRESETS: dict[str, Callable[[], TrainConfig]] = {
    "minatar-breakout": _minatar_breakout,
    "minatar-freeway": _minatar_freeway,
    "minatar-space-invaders": _minatar_space_invaders,
}
