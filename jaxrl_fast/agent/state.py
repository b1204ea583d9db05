"""The learner's state of one seed, and the metrics of one gradient step."""

from __future__ import annotations

from typing import NamedTuple

import optax
from flax import struct

from jaxrl_fast.agent import precision as mp
from jaxrl_fast.config.hparams import HParams
from jaxrl_fast.types import Array, Params, PRNGKey


@struct.dataclass
class AgentState:
    """Learner state of one seed."""

    params: Params
    target_params: Params
    opt_state: optax.OptState
    grad_steps: Array  # [] int32
    loss_scale: mp.LossScaleState  # scale, overflow counters, fp32 fallback flag
    hparams: HParams  # this seed's traced hyperparameters (`jaxrl_fast.config.hparams`)
    # the key of the network's random draws in updates (noisy layers: `agent.dense`); None for
    # a network that draws nothing
    rng: PRNGKey | None = None


class LossKnobs(NamedTuple):
    """What one update's loss reads besides the parameters and the batch (traced): the Huber
    delta, gamma, the seed's `HParams` (a loss's own settings, `losses.Loss.settings`) and the key
    of the network's random draws (`AgentState.rng`; None for a network that draws nothing)."""

    delta: Array
    gamma: Array
    hparams: HParams | None = None
    key: PRNGKey | None = None


class UpdateMetrics(NamedTuple):
    """Scalar metrics of one gradient step (float32; all 0 for a skipped step)."""

    # mean over the batch's valid rows (weight > 0) of w_i * l(td_i), w the importance weights
    # (1 without PER): the textbook PER loss (Schaul et al. 2016, as Dopamine), so the step size
    # does not depend on the batch's weights summing to anything
    loss: Array
    q: Array  # mean Q of the taken actions over the batch's valid rows
    abs_td: Array  # mean of w_i * |td_i| over the batch's valid rows
    applied: Array  # 1.0 if the step was applied, 0.0 if skipped (non-finite gradients)
