"""The recurrent TD loss over stored sequences (R2D2, Kapturowski et al. 2019), for `dqn`:
unroll a recurrent Q-network over `SequenceBatch` windows from their stored state
(`replay/sequence.py`), burn-in without gradient, and n-step targets inside the window that stop
at episode ends by the same rules as L1 staging (`replay/staging.py`)."""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxrl_fast.config import DQNConfig
from jaxrl_fast.types import Array, SequenceBatch


class SequenceSpec(NamedTuple):
    """The stored sequences a recurrent agent trains on (`make_agent(sequence=...)`).

    Attributes:
      burn_in: steps unrolled without gradient before the loss (`ReplayConfig.burn_in`).
      length: steps per stored sequence (`ReplayConfig.sequence_length`).
      n_step: steps of each target's return (`ReplayConfig.n_step`).
    """

    burn_in: int
    length: int
    n_step: int


def per_item_loss(config: DQNConfig, td: Array, delta=None) -> Array:
    """`config.loss` of each TD error; `delta` (traced) overrides `config.huber_delta`."""
    if config.loss == "huber":
        return optax.huber_loss(td, delta=config.huber_delta if delta is None else delta)
    return 0.5 * jnp.square(td)


# Sequences up to this many steps are unrolled in full (no loop): with a small LSTM a loop
# iteration costs about as much as the step itself on a CPU; compile time grows with the steps.
FULL_UNROLL_MAX = 32


def unroll(net: nn.Module, params, obs: Array, valid: Array, carry: Array):
    """Run a recurrent `net` over `[B, T]` steps from `carry`, zeroing the state after every
    step that is not a transition (a reset step: the next one starts an episode). Returns
    `(q [B, T, A], carry after the last step)`."""

    def one(carry, x):
        o, v = x
        q, carry = net.apply(params, o, carry)
        return jnp.where(v[:, None, None], carry, 0.0), q

    steps = obs.shape[1]
    carry, q = jax.lax.scan(
        one,
        carry,
        (jnp.swapaxes(obs, 0, 1), jnp.swapaxes(valid, 0, 1)),
        unroll=steps if steps <= FULL_UNROLL_MAX else 1,
    )
    return jnp.swapaxes(q, 0, 1), carry


def sequence_targets(
    reward: Array, discount: Array, valid: Array, length: int, n: int, gamma: float
) -> tuple[Array, Array, Array]:
    """n-step targets' parts for the first `length` positions of `[B, length + n]` steps.

    A position's return sums `gamma^k r_{i+k}` over at most `n` steps, stopping after the step
    that ends its episode: one that terminated (`discount` 0) or whose next row is a reset step
    (`valid` False there; after a truncation that row holds the real final observation, as in
    `replay/staging.py`). Returns `(return [B, length], bootstrap offset k [B, length] int32 in
    [1, n], bootstrap factor gamma^k, or 0 after a termination, [B, length])`.
    """
    alive = jnp.ones(reward.shape[:1] + (length,), bool)
    ret = jnp.zeros(alive.shape, jnp.float32)
    offset = jnp.full(alive.shape, n, jnp.int32)
    factor = jnp.zeros(alive.shape, jnp.float32)
    for k in range(n):
        ret = ret + jnp.where(alive, gamma**k * reward[:, k : k + length], 0.0)
        terminated = discount[:, k : k + length] == 0
        ends = terminated | ~valid[:, k + 1 : k + 1 + length]
        last = alive & (ends | (k == n - 1))
        offset = jnp.where(last, k + 1, offset)
        factor = jnp.where(last, jnp.where(terminated, 0.0, gamma ** (k + 1)), factor)
        alive = alive & ~ends
    return ret, offset, factor


def make_sequence_loss(config: DQNConfig, net: nn.Module, burn_in: int, length: int, n: int):
    """The recurrent TD loss over `SequenceBatch` windows (R2D2): the online and target nets
    unroll from the stored state; the first `burn_in` steps only refresh the state (no
    gradient); positions `burn_in .. burn_in + length - 1` that are transitions are trained on
    n-step targets bootstrapped within the window. The `[B]` "TD errors" returned are R2D2's
    sequence priorities, `0.9 max|td| + 0.1 mean|td|` over the trained positions."""

    def loss_fn(params, target_params, batch: SequenceBatch, knobs=None):
        # knobs: `LossKnobs` (huber delta, gamma, ...) of this update (traced); None: the config's
        delta, gamma = (config.huber_delta, config.gamma) if knobs is None else knobs[:2]
        obs, valid, carry = batch.obs, batch.valid, batch.carry
        if burn_in:
            _, carry = unroll(
                net, jax.lax.stop_gradient(params), obs[:, :burn_in], valid[:, :burn_in], carry
            )
            carry = jax.lax.stop_gradient(carry)
        q_online, _ = unroll(net, params, obs[:, burn_in:], valid[:, burn_in:], carry)
        q_target, _ = unroll(net, target_params, obs, valid, batch.carry)
        q_target = q_target[:, burn_in:]
        tail = lambda x: x[:, burn_in:]  # noqa: E731
        ret, offset, factor = sequence_targets(
            tail(batch.reward), tail(batch.discount), tail(valid), length, n, gamma
        )
        position = jnp.arange(length)[None, :] + offset  # [B, L] in the tail
        take = lambda q, idx: jnp.take_along_axis(q, idx[..., None], axis=-1)[..., 0]  # noqa: E731
        q_next_target = jnp.take_along_axis(q_target, position[..., None], axis=1)  # [B, L, A]
        if config.double_q:
            select = jnp.take_along_axis(
                jax.lax.stop_gradient(q_online), position[..., None], axis=1
            )
        else:
            select = q_next_target
        v_next = take(q_next_target, jnp.argmax(select, axis=-1))
        target = jax.lax.stop_gradient(ret + factor * v_next)
        q_a = take(q_online[:, :length], tail(batch.action)[:, :length])
        td = target - q_a  # [B, L]
        mask = tail(valid)[:, :length] & (batch.weight[:, None] > 0)
        w = jnp.where(mask, batch.weight[:, None], 0.0)
        count = jnp.maximum(jnp.sum(mask), 1.0)
        loss = jnp.sum(w * per_item_loss(config, td, delta)) / count
        q_mean = jnp.sum(jnp.where(mask, q_a, 0.0)) / count
        abs_td = jnp.where(mask, jnp.abs(td), 0.0)
        mean = jnp.sum(abs_td, axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1)
        priority = 0.9 * jnp.max(abs_td, axis=1) + 0.1 * mean
        return loss, (priority, q_mean)

    return loss_fn
