"""The DQN learner's settings: gamma, Adam, double Q, the loss, the target network, clipping."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from jaxrl_fast.config.fields import Traced, config_class, is_int, is_num, knob, require
from jaxrl_fast.config.registry import LOSSES

OPTIMIZERS = ("adam", "radam")


def _inf_if_none(value: float | None, sections) -> tuple:
    """`max_grad_norm` traced: `inf` for no clip."""
    return (np.float32(math.inf if value is None else value),)


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class DQNConfig:
    """Q-learning settings.

    Attributes:
      gamma: discount factor in [0, 1].
      learning_rate: Adam step size (initial value when `ScheduleConfig.lr_schedule="linear"`).
      adam_eps: Adam epsilon (RAdam's too).
      optimizer: "adam", or "radam" (rectified Adam, Liu et al. 2020: PQN's default).
      double_q: select the bootstrap action with the online net, evaluate with the target net.
      loss: "mse" (default, as CleanRL/PureJaxRL) or "huber" on the TD error, or a loss added
        with `jaxrl_fast.agent.losses.register` (a registered name). Huber with Adam
        over-estimated and diverged on CartPole in our runs (Q grew to 1e6); it suits Atari rewards.
      huber_delta: Huber transition point.
      target_period: env steps between target-network updates (a multiple of the block).
      tau: 1.0 copies the online net (hard update); < 1 is a Polyak step every `target_period`.
      max_grad_norm: global-norm gradient clip; None disables clipping.
    """

    gamma: float = knob(0.99, sweep=Traced(()), resume=True)  # gamma_schedule's first phase
    learning_rate: float = knob(2.5e-4, sweep=True, resume=True)
    adam_eps: float = knob(1e-8, resume=True)
    optimizer: str = "adam"
    double_q: bool = knob(True, resume=True)
    loss: str = knob("mse", resume=True)
    huber_delta: float = knob(1.0, sweep=True, resume=True)
    target_period: int = 500
    tau: float = knob(1.0, sweep=True, resume=True)
    max_grad_norm: float | None = knob(10.0, sweep=Traced(("max_grad_norm",), _inf_if_none))

    def __post_init__(self) -> None:
        require(self, "gamma", is_num(self.gamma) and 0.0 <= self.gamma <= 1.0, "a float in [0, 1]")
        require(
            self,
            "learning_rate",
            is_num(self.learning_rate) and self.learning_rate > 0,
            "a float > 0",
        )
        require(self, "adam_eps", is_num(self.adam_eps) and self.adam_eps > 0, "a float > 0")
        require(self, "optimizer", self.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}")
        require(self, "double_q", isinstance(self.double_q, bool), "True or False")
        require(self, "loss", self.loss in LOSSES, LOSSES.allowed())
        require(
            self, "huber_delta", is_num(self.huber_delta) and self.huber_delta > 0, "a float > 0"
        )
        require(
            self,
            "target_period",
            is_int(self.target_period) and self.target_period > 0,
            "a positive int",
        )
        require(self, "tau", is_num(self.tau) and 0.0 < self.tau <= 1.0, "a float in (0, 1]")
        require(
            self,
            "max_grad_norm",
            self.max_grad_norm is None or (is_num(self.max_grad_norm) and self.max_grad_norm > 0),
            "None or a float > 0",
        )
