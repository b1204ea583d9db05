"""Presets for Pgx's two-player board games (`envs.pgx_env`, docs/selfplay.md):

* `connect-four`: DQN against the env's own opponent, a random legal player;
* `selfplay-connect-four`: the same learner against a pool of its own snapshots and the random
  player (`SelfPlayConfig`, drawn by "dynamic" sampling).

Both run 648,000 env steps a seed (about 3-5 minutes on 2 CPU cores);
`benchmarks/results/selfplay/` has their measured win rates against the random player and Elo.
"""

from __future__ import annotations

from typing import Callable

from jaxrl_fast.config import TrainConfig


def connect_four() -> TrainConfig:
    return TrainConfig().replace(
        env={"name": "pgx:connect_four", "num_envs": 16},
        network={"kind": "mlp", "hidden_sizes": (256, 256)},
        replay={"capacity": 100_000, "batch_size": 128},
        dqn={"learning_rate": 5e-4, "target_period": 800, "gamma": 0.99},
        schedule={"epsilon_fraction": 0.2, "epsilon_end": 0.05},
        train_frequency=16,
        learning_starts=8_000,
        total_env_steps=648_000,  # 40,000 blocks after the prefill
        num_chunks=20,
        eval_episodes=100,
        eval_every=64_800,
    )


def selfplay_connect_four() -> TrainConfig:
    return connect_four().replace(
        selfplay={"pool_size": 8, "add_every": 2_500, "sampling": "dynamic"}
    )


# The board games' presets by name (they start from `TrainConfig()`, not a base preset).
PRESETS: dict[str, Callable[[], TrainConfig]] = {
    "connect-four": connect_four,
    "selfplay-connect-four": selfplay_connect_four,
}
