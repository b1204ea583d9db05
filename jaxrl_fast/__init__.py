"""jaxrl_fast: deep-Q RL with the whole training loop compiled by JAX.

Examples:
  >>> from jaxrl_fast import presets, train
  >>> config = presets.get("cartpole")            # doctest: +SKIP
  >>> result = train(config)                       # doctest: +SKIP
  >>> result.final_return                          # doctest: +SKIP
"""

from jaxrl_fast import presets
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import (
    DemoConfig,
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    PrecisionConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)
from jaxrl_fast.envs import list_envs, make_env
from jaxrl_fast.loop import make_train
from jaxrl_fast.replay import make_buffer
from jaxrl_fast.resolve import resolve
from jaxrl_fast.train import TrainResult, train

__version__ = "0.1.0"

__all__ = [
    "DQNConfig",
    "DemoConfig",
    "EnvConfig",
    "NetworkConfig",
    "PrecisionConfig",
    "QNetwork",
    "ReplayConfig",
    "ScheduleConfig",
    "TrainConfig",
    "TrainResult",
    "list_envs",
    "make_buffer",
    "make_env",
    "make_train",
    "presets",
    "resolve",
    "train",
]
