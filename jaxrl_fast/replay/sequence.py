"""Sequence replay for a recurrent agent (R2D2's stored-state replay, Kapturowski et al. 2019).

Rows live in the L2 ring (`replay/ring.py`), laid out `[T, E]`: one time slot per collect step
and one column per env, so the steps `t, t + 1, ...` of column `e` are the env's consecutive
steps. Each row is one raw step, committed at once (no n-step staging): the observation, the
action, the one-step reward, a continuation flag (`discount` 0 where the step terminated, else
1; the loss applies gamma), `valid` (False for a reset step and never-written rows) and, next
to the ring, the recurrent state the agent acted from (`Transition.carry`).

A sample is `batch_size` windows of `W = burn_in + sequence_length + n_step` consecutive rows
of one env column each, starting at a uniformly drawn slot whose whole window is written (the
ring is built with `n_step = W - 1`, so its newest `W - 1` slots are never a start), with the
recurrent state stored at the window's first row. Windows may cross episode boundaries: the
loss resets the state after a reset step and masks what is not a transition
(`agent/sequence_loss.py`).

Not supported (refused by `TrainConfig`): prioritised sampling, the L3 host tier and frame
deduplication.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay.base import Buffer, require_resolved_capacity
from jaxrl_fast.replay.layout import dedup_stack
from jaxrl_fast.replay.ring import RING_SEED_AXES, RingState, StoredRow, forget_newest, make_ring
from jaxrl_fast.types import Array, PRNGKey, SequenceBatch, Transition


class SequenceState(NamedTuple):
    """One seed's sequence replay."""

    ring: RingState  # raw steps, `[T, E]`
    carry: Array  # [T, E, 2, H] float32, the recurrent state each step was acted from
    updates: Array  # [] int32 shared: batches sampled and used


def window_length(config: ReplayConfig) -> int:
    """Steps in one sampled sequence: burn-in, trained positions and the last targets' n-step."""
    return config.burn_in + config.sequence_length + config.n_step


def make_sequence_buffer(config: ReplayConfig, example: Transition, *, frame_stack: int = 0):
    """Build the sequence buffer (a `Buffer` whose `sample` gives a `SequenceBatch`).

    Args:
      config: replay settings with `sequence_length > 0`; `capacity` resolved to an int.
      example: a `Transition` with leading `[num_envs]` whose `carry` is `[num_envs, 2, H]`.
      frame_stack: the env's frame stack (frame deduplication is refused with sequences).

    Raises:
      ValueError: no `carry` in `example`, frame deduplication asked for, or a capacity
        below one window of every env.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxrl_fast.config import ReplayConfig
      >>> flags = [jnp.zeros(2, bool)] * 3
      >>> ex = Transition(jnp.zeros((2, 3)), jnp.zeros(2, jnp.int32), jnp.zeros(2), *flags,
      ...                 carry=jnp.zeros((2, 2, 8)))
      >>> buf = make_sequence_buffer(ReplayConfig(capacity=20, batch_size=4, sequence_length=4), ex)
      >>> state = buf.init()
      >>> for _ in range(6):
      ...     state = buf.add(state, ex)
      >>> buf.sample(state, jax.random.key(0)).obs.shape  # [B, 4 + n_step, 3]
      (4, 5, 3)
    """
    require_resolved_capacity(config)
    if example.carry is None:
        raise ValueError(
            "ReplayConfig.sequence_length > 0 stores sequences for a recurrent agent, but the "
            "example Transition has no carry; set NetworkConfig.lstm."
        )
    if dedup_stack(config.dedup_frames, frame_stack):
        raise ValueError(
            f"ReplayConfig.sequence_length={config.sequence_length} is not allowed with frame "
            f"deduplication (dedup_frames=True on a {frame_stack}-frame env); set "
            "dedup_frames=False."
        )
    num_envs = example.obs.shape[0]
    obs_shape, obs_dtype = tuple(example.obs.shape[1:]), example.obs.dtype
    carry_shape, window = tuple(example.carry.shape[1:]), window_length(config)
    # lag W - 1: a start slot's whole window is written
    ring = make_ring(config.capacity, num_envs, obs_shape, obs_dtype, n_step=window - 1)
    slots, batch = ring.slots, config.batch_size

    def init() -> SequenceState:
        return SequenceState(
            ring=ring.init(),
            carry=jnp.zeros((slots, num_envs, *carry_shape), jnp.float32),
            updates=jnp.zeros((), jnp.int32),
        )

    def add(state: SequenceState, step: Transition, gamma: Any = None) -> SequenceState:
        del gamma  # raw steps: the loss applies gamma
        row = StoredRow(
            obs=step.obs,
            action=step.action.astype(jnp.int32),
            reward=step.reward.astype(jnp.float32),
            discount=1.0 - step.terminated.astype(jnp.float32),
            offset=jnp.ones((num_envs,), jnp.int32),
            valid=jnp.logical_not(step.reset),
        )
        carry = jax.lax.dynamic_update_index_in_dim(
            state.carry, step.carry.astype(jnp.float32), state.ring.insert_pos, 0
        )
        return state._replace(ring=ring.add(state.ring, row), carry=carry)

    def sample(state: SequenceState, key: PRNGKey, hp: Any = None) -> SequenceBatch:
        del hp  # uniform
        r = state.ring
        starts = ring.sampleable_slots(r)
        n_rows = jnp.maximum(starts, 1) * num_envs
        # one bits draw: modulo bias <= n_rows / 2**32 relative per start
        u = (jax.random.bits(key, (batch,), jnp.uint32) % n_rows.astype(jnp.uint32)).astype(
            jnp.int32
        )
        back, env = u // num_envs, u % num_envs
        first = (r.insert_pos - window - back) % slots  # the newest start is W slots back
        t = (first[:, None] + jnp.arange(window)) % slots  # [B, W]
        e = env[:, None]
        return SequenceBatch(
            obs=r.obs[t, e],
            action=r.action[t, e],
            reward=r.reward[t, e],
            discount=r.discount[t, e],
            valid=r.valid[t, e],
            carry=state.carry[first, env],
            weight=jnp.where(starts > 0, 1.0, 0.0) * jnp.ones((batch,), jnp.float32),
            index=(first * num_envs + env).astype(jnp.int32),
        )

    def update_priorities(
        state: SequenceState, index: Array, td_error: Array, hp: Any = None
    ) -> SequenceState:
        del index, td_error, hp  # uniform sampling
        return state._replace(updates=state.updates + 1)

    def can_sample(state: SequenceState) -> Array:
        return ring.sampleable_slots(state.ring) > 0

    def restart_envs(state: SequenceState, fresh: SequenceState) -> SequenceState:
        # the newest row's successor comes from a new game: end the episode there
        del fresh
        return state._replace(ring=forget_newest(state.ring, 1))

    seed_axes = SequenceState(ring=RING_SEED_AXES, carry=0, updates=None)
    return Buffer(
        init, add, sample, update_priorities, can_sample, seed_axes, restart_envs=restart_envs
    )
