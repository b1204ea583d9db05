"""Munchausen targets (M-DQN; Vieillard, Pietquin and Geist 2020): the loss "m-dqn".

M-DQN adds the scaled log-policy of the action taken to the reward and bootstraps from the soft
value of the next state, both under the target network's softmax policy
`pi(.|s) = softmax(q_target(s, .) / tau)`:

    y = r + alpha * clip(tau * ln pi(a|s), l0, 0)
          + discount * sum_a' pi(a'|s') * (q_target(s', a') - tau * ln pi(a'|s'))

and regresses `q(s, a)` on `y` with the Huber loss (threshold `DQNConfig.huber_delta`), as the
paper and Dopamine do. `alpha`, `tau` and `l0` are this module's own config section,
`TrainConfig.algo.munchausen` (`MunchausenConfig`; `--algo.munchausen.alpha` on the command
line), traced (a sweep varies them in one program). With n-step returns
(`ReplayConfig.n_step > 1`) `r` is the n-step return and `discount` its `gamma^n`: the
Munchausen term is the first step's. The loss reads Q-values through the value head's
`q_values`, so it works with the scalar and dueling heads; it needs no double-Q selection (its
bootstrap is the soft value), and the TD error it reports to prioritised replay is
`y - q(s, a)`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxrl_fast.agent import losses
from jaxrl_fast.agent.sequence_loss import per_item_loss
from jaxrl_fast.config import DQNConfig
from jaxrl_fast.config.fields import config_class, is_num, knob, require
from jaxrl_fast.config.sections import register_section
from jaxrl_fast.types import Array

__all__ = ["MunchausenConfig", "munchausen_rows", "munchausen_targets"]


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class MunchausenConfig:
    """The "m-dqn" loss's settings: `TrainConfig.algo.munchausen`.

    Attributes:
      alpha: the Munchausen term's weight (0.9 in M-DQN).
      tau: the entropy temperature of M-DQN's softmax policy (0.03 in M-DQN).
      l0: the lower clip of the scaled log-policy `tau ln pi` (-1 in M-DQN).
    """

    alpha: float = knob(0.9, sweep=True, resume=True)
    tau: float = knob(0.03, sweep=True, resume=True)
    l0: float = knob(-1.0, sweep=True, resume=True)

    def __post_init__(self) -> None:
        alpha, tau, l0 = self.alpha, self.tau, self.l0
        require(self, "alpha", is_num(alpha) and 0 <= alpha <= 1, "a float in [0, 1]")
        require(self, "tau", is_num(tau) and tau > 0, "a float > 0")
        require(self, "l0", is_num(l0) and l0 < 0, "a float < 0")


register_section("munchausen", MunchausenConfig)

_HUBER = DQNConfig(loss="huber")


def munchausen_targets(q_tm1_target, a_tm1, r_t, discount_t, q_t_target, alpha, tau, l0):
    """M-DQN's targets `[B]` (module docstring), under `stop_gradient`.

    Args:
      q_tm1_target: `[B, A]` target-network Q at the sampled observations.
      a_tm1: `[B]` int actions taken.
      r_t, discount_t: `[B]` rewards and discounts (0 where the episode terminated).
      q_t_target: `[B, A]` target-network Q at the next observations.
      alpha, tau, l0: the Munchausen weight, the temperature and the log-policy's lower clip.
    """
    log_pi_tm1 = jax.nn.log_softmax(q_tm1_target / tau, axis=-1)
    a = a_tm1[:, None].astype(jnp.int32)
    bonus = alpha * jnp.clip(tau * jnp.take_along_axis(log_pi_tm1, a, axis=-1)[:, 0], l0, 0.0)
    log_pi_t = jax.nn.log_softmax(q_t_target / tau, axis=-1)
    soft_v = jnp.sum(jnp.exp(log_pi_t) * (q_t_target - tau * log_pi_t), axis=-1)
    return jax.lax.stop_gradient(r_t + bonus + discount_t * soft_v)


def _settings(hp) -> tuple[Array, Array, Array]:
    knobs = hp.algo["munchausen"]
    return knobs["alpha"], knobs["tau"], knobs["l0"]


def munchausen_rows(x: losses.LossInput):
    """The "m-dqn" loss's rows (`losses.Loss`): Huber on `y - q(s, a)` and that TD error (the
    soft value needs no selection: `out_t_select` is not read)."""
    a_tm1 = x.action
    y = munchausen_targets(x.q_target_tm1(), a_tm1, x.reward, x.discount, x.q_t(), *x.settings)
    td = y - jnp.take_along_axis(x.q_tm1(), a_tm1[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return per_item_loss(_HUBER, td, x.delta), td


MUNCHAUSEN = losses.Loss("m-dqn", munchausen_rows, target_tm1=True, settings=_settings)
losses.LOSSES.register("m-dqn", MUNCHAUSEN, builtin=True)
