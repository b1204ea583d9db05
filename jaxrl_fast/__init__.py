"""jaxrl_fast: deep-Q RL with the whole training loop compiled by JAX.

Examples:
  >>> from jaxrl_fast import presets, train
  >>> config = presets.get("cartpole")            # doctest: +SKIP
  >>> result = train(config)                       # doctest: +SKIP
  >>> result.final_return                          # doctest: +SKIP
"""

from jaxrl_fast.platform import cpu_lowering

cpu_lowering.install()  # the same random bits on the CPU, less to compile (its docstring)

from jaxrl_fast import presets  # noqa: E402
from jaxrl_fast.agent.network import QNetwork  # noqa: E402
from jaxrl_fast.config import (  # noqa: E402
    DemoConfig,
    DQNConfig,
    EnvConfig,
    NetworkConfig,
    PrecisionConfig,
    ReplayConfig,
    ScheduleConfig,
    SelfPlayConfig,
    TrainConfig,
)
from jaxrl_fast.envs import list_envs, make_env  # noqa: E402
from jaxrl_fast.loop import make_train  # noqa: E402
from jaxrl_fast.loop.resolve import resolve  # noqa: E402
from jaxrl_fast.replay import make_buffer  # noqa: E402
from jaxrl_fast.run.train import TrainResult, train  # noqa: E402

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
    "SelfPlayConfig",
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
