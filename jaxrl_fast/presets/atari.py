"""Presets on Atari through envpool (the `atari` extra, `presets.get`).

* `atari-pong`, `atari-breakout` (the `atari` extra): Nature-DQN settings (84x84 grayscale,
  4-frame stacks, frame skip 4, up to 30 no-op starts, episodic life, reward clipping, Nature
  CNN, batch 32, gamma 0.99, Huber loss, double Q) scaled for a 2-core CPU: 8 envs, 100k replay
  (frame-deduplicated: 0.7 GB), 3-step returns, Adam lr 1e-4 (eps 1.5e-4, as Dopamine), one
  update per 8 env steps (Nature: per 4), target copy every 1,000 updates, epsilon 1 -> 0.01
  over the first 25% of the run, 400k env steps (1.6M frames; Nature: 50M); evaluated
  epsilon-greedily with epsilon 0.05, as in Nature.
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


def _atari_base(game: str) -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name=f"envpool:{game}-v5", num_envs=8),  # AtariConfig(): DQN settings
        network=NetworkConfig(kind="nature", hidden_sizes=(512,)),
        replay=ReplayConfig(capacity=100_000, batch_size=32, n_step=3),
        dqn=DQNConfig(
            gamma=0.99,
            learning_rate=1e-4,
            adam_eps=1.5e-4,
            double_q=True,
            loss="huber",
            target_period=8_000,
            max_grad_norm=10.0,
        ),
        schedule=ScheduleConfig(epsilon_start=1.0, epsilon_end=0.01, epsilon_fraction=0.25),
        total_env_steps=400_000,
        learning_starts=20_000,
        train_frequency=32,
        updates_per_block=4,
        eval_episodes=4,
        eval_epsilon=0.05,  # Nature DQN's evaluation policy
    )


def _atari_pong() -> TrainConfig:
    # benchmarks/results/atari/atari.md has the measured learning run.
    return _atari_base("Pong")


def _atari_breakout() -> TrainConfig:
    # Not yet measured on this CPU (benchmarks/atari.py runs Pong).
    return _atari_base("Breakout")


PRESETS: dict[str, Callable[[], TrainConfig]] = {
    "atari-pong": _atari_pong,
    "atari-breakout": _atari_breakout,
}
