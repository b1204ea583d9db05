"""L2 device ring buffer: each observation stored once, in the env's own dtype.

Rows are laid out `[T, E]` (time slot, env): one `add` writes one time slot for all `E` envs with a
single `dynamic_update_slice`. The transition of row `(t, e)` goes from `obs[t, e]` to
`obs[t + 1, e]` (mod `T`): envs auto-reset on the *next* step (see `envs/base.py`), so the next row
of the same env always holds the same episode's next observation, the real final one at a
truncation included. Rows written by a reset step start a new episode and are not transitions of
their own: they are sampled with weight 0. The newest slot has no successor yet and is never drawn.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay.base import Buffer
from jaxrl_fast.types import Array, Batch, PRNGKey, Transition


class RingState(NamedTuple):
    """Device ring (L2). Row `(t, e)` holds what env `e` saw at the `t`-th written slot mod `T`."""

    obs: Array  # [T, E, *obs_shape], env dtype
    action: Array  # [T, E] int32
    reward: Array  # [T, E] float32
    terminated: Array  # [T, E] bool
    reset: Array  # [T, E] bool, row written by a reset step (not a transition)
    insert_pos: Array  # [] int32, next time slot to write
    size: Array  # [] int32, time slots holding data (<= T)


def make_ring_buffer(config: ReplayConfig, example: Transition) -> Buffer:
    """Build a uniform ring buffer.

    Args:
      config: capacity (rows over all envs) and batch size.
      example: a `Transition` with leading `[num_envs]` axis (arrays or `ShapeDtypeStruct`s),
        giving shapes and dtypes.

    Raises:
      ValueError: capacity not a multiple of `num_envs`, or fewer than two slots.
    """
    num_envs = example.obs.shape[0]
    if config.capacity % num_envs or config.capacity < 2 * num_envs:
        raise ValueError(
            f"ReplayConfig.capacity={config.capacity} is not allowed; expected a multiple of "
            f"num_envs={num_envs} of at least {2 * num_envs}."
        )
    slots = config.capacity // num_envs
    batch_size = config.batch_size
    obs_shape, obs_dtype = tuple(example.obs.shape[1:]), example.obs.dtype

    def init() -> RingState:
        z = lambda dt: jnp.zeros((slots, num_envs), dt)  # noqa: E731
        return RingState(
            obs=jnp.zeros((slots, num_envs, *obs_shape), obs_dtype),
            action=z(jnp.int32),
            reward=z(jnp.float32),
            terminated=z(bool),
            reset=z(bool),
            insert_pos=jnp.zeros((), jnp.int32),
            size=jnp.zeros((), jnp.int32),
        )

    def add(state: RingState, tr: Transition) -> RingState:
        chex.assert_shape(tr.obs, (num_envs, *obs_shape))
        chex.assert_type(tr.obs, obs_dtype)
        pos = state.insert_pos

        def put(buf, row, dtype):
            return jax.lax.dynamic_update_index_in_dim(buf, row.astype(dtype), pos, 0)

        return RingState(
            obs=put(state.obs, tr.obs, obs_dtype),
            action=put(state.action, tr.action, jnp.int32),
            reward=put(state.reward, tr.reward, jnp.float32),
            terminated=put(state.terminated, tr.terminated, bool),
            reset=put(state.reset, tr.reset, bool),
            insert_pos=(pos + 1) % slots,
            size=jnp.minimum(state.size + 1, slots),
        )

    def sample(state: RingState, key: PRNGKey) -> Batch:
        # Slots with a successor: the (size - 1) before the newest one.
        n_rows = jnp.maximum(state.size - 1, 1) * num_envs
        u = jax.random.randint(key, (batch_size,), 0, n_rows)
        back, env = u // num_envs, u % num_envs
        t = (state.insert_pos - 2 - back) % slots
        t_next = (t + 1) % slots
        flat = t * num_envs + env
        flat_next = t_next * num_envs + env
        rows = lambda x: x.reshape((slots * num_envs,) + x.shape[2:])  # noqa: E731
        obs = rows(state.obs)
        valid = jnp.logical_and(~rows(state.reset)[flat], state.size >= 2)
        return Batch(
            obs=obs[flat],
            action=rows(state.action)[flat],
            reward=rows(state.reward)[flat],
            terminated=rows(state.terminated)[flat],
            next_obs=obs[flat_next],
            weight=valid.astype(jnp.float32),
            index=flat.astype(jnp.int32),
        )

    def update_priorities(state: RingState, index: Array, td_error: Array) -> RingState:
        del index, td_error
        return state

    def can_sample(state: RingState) -> Array:
        return state.size >= 2

    axes = RingState(obs=0, action=0, reward=0, terminated=0, reset=0, insert_pos=None, size=None)
    return Buffer(init, add, sample, update_priorities, can_sample, seed_axes=axes)
