"""The large-margin term of learning from demonstrations (DQfD, Hester et al. 2018), added to
the TD loss on a batch's demonstration rows (`Batch.demo`, `DemoConfig`):

    mean over demonstration rows of  max_a [Q(s, a) + margin 1(a != a_E)] - Q(s, a_E)  (>= 0)

weighted by `DemoConfig.weight`, decaying linearly to 0 over the first
`DemoConfig.decay_fraction` of the updates (`margin_weight`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxrl_fast.types import Array, Batch


class MarginSpec(NamedTuple):
    """The large-margin term of a run with demonstrations (`make_agent(demo=...)`).

    Attributes:
      margin: the margin on the non-demonstrated actions (`DemoConfig.margin`).
      weight: the term's initial weight (`DemoConfig.weight`).
      decay_updates: updates over which the weight decays linearly to 0.
    """

    margin: float
    weight: float
    decay_updates: int


def margin_term(q_tm1: Array, q_a: Array, batch: Batch, margin: float, weight: Array) -> Array:
    """`weight` x the term (a scalar) for Q-values `q_tm1 [B, A]`, `q_a [B]` those of the taken
    actions."""
    other = jnp.arange(q_tm1.shape[-1])[None, :] != batch.action[:, None]
    gap = jnp.max(q_tm1 + margin * other, axis=-1) - q_a  # >= 0
    demo = batch.demo.astype(jnp.float32)
    return weight * jnp.sum(demo * gap) / jnp.maximum(jnp.sum(demo), 1.0)


def margin_weight(weight: float, decay_updates: int, grad_steps: Array) -> Array:
    """The term's weight after `grad_steps` updates: `weight`, decaying linearly to 0 over
    `decay_updates`."""
    left = 1.0 - grad_steps.astype(jnp.float32) / max(decay_updates, 1)
    return weight * jnp.clip(left, 0.0, 1.0)
