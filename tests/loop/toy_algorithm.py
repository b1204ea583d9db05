"""A toy algorithm in its own module, as a user would add one (tests/loop/test_toy_algorithm.py):
a loss with its own knob (a config section), and a preset. Nothing of the library is edited.

The loss is the MSE on the one-step TD error, times `scale`: `TrainConfig.algo.toy.scale`,
traced (a sweep varies it in one program), `--algo.toy.scale` on the command line. `scale=0`
makes every update's gradient zero, so the parameters never move.
"""

from __future__ import annotations

import dataclasses

from jaxrl_fast import presets
from jaxrl_fast.agent import losses
from jaxrl_fast.config import EnvConfig, NetworkConfig, ReplayConfig, TrainConfig
from jaxrl_fast.config.fields import config_class, is_num, knob, require
from jaxrl_fast.config.sections import register_section


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyConfig:
    """The toy loss's settings: `TrainConfig.algo.toy`.

    Attributes:
      scale: the factor on the loss (>= 0).
    """

    scale: float = knob(1.0, sweep=True, resume=True)

    def __post_init__(self) -> None:
        require(self, "scale", is_num(self.scale) and self.scale >= 0, "a float >= 0")


def _rows(x: losses.LossInput):
    td = losses.td_errors(x.q_tm1(), x.action, x.reward, x.discount, x.q_t(), x.q_t_select())
    return x.settings[0] * 0.5 * td**2, td


def _settings(hparams):
    return (hparams.algo["toy"]["scale"],)


def _toy_probe() -> TrainConfig:
    return TrainConfig(
        env=EnvConfig(name="probe-chain", num_envs=4),
        network=NetworkConfig(hidden_sizes=(32,)),
        replay=ReplayConfig(capacity=400, batch_size=16),
        dqn={"loss": "toy-scaled-mse", "learning_rate": 1e-3, "target_period": 40},
        total_env_steps=880,
        learning_starts=80,
        train_frequency=4,
        num_chunks=2,
        eval_episodes=0,
    )


register_section("toy", ToyConfig)
losses.register("toy-scaled-mse", losses.Loss("toy-scaled-mse", _rows, settings=_settings))
presets.register("toy-probe", _toy_probe)
