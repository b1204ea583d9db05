"""L2 device ring buffer: each observation stored once, in the env's own dtype.

Rows are laid out `[T, E]` (time slot, env): one `add` writes one time slot for all `E` envs with
a single `dynamic_update_slice` per field. A row holds a committed `StoredRow` (see
`replay/staging.py`): the observation the action was taken in, the action, the n-step return,
the bootstrap discount and the offset `k` of the slot whose observation to bootstrap from. That
observation is in row `(t + k, e)` of the same env column: envs auto-reset on the *next* step
(see `envs/base.py`), so the same column holds the same episode's later observations, the real
final one at a truncation included.

A row may be sampled once its bootstrap row is written: slots older than the newest `n_step`
ones. Rows that are not transitions (reset steps, the staging window's warm-up, unwritten
slots) have `valid == False` and are sampled with weight 0 (priority 0 under PER).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.types import Array, Batch, PRNGKey

MAX_ROWS = 2**30  # flat row indices and sum-tree nodes (2 x rows) stay within int32


class StoredRow(NamedTuple):
    """What L1 commits to L2 for one env (leading `[E]` axis when added).

    Attributes:
      obs: observation the action was taken in.
      action: int32 action.
      reward: float32 n-step return `sum_i gamma^i r_{t+i}` up to the episode's end.
      discount: float32 `gamma^k` for the bootstrap, 0 where the episode terminated.
      offset: int32 `k` in `[1, n_step]`, slots ahead of the row whose obs bootstraps.
      valid: bool, the row is a transition (False for reset steps and warm-up rows).
    """

    obs: Array
    action: Array
    reward: Array
    discount: Array
    offset: Array
    valid: Array


class RingState(NamedTuple):
    """Device ring (L2). Row `(t, e)` holds what env `e` committed at the `t`-th slot mod `T`."""

    obs: Array  # [T, E, *obs_shape], env dtype
    action: Array  # [T, E] int32
    reward: Array  # [T, E] float32, n-step return
    discount: Array  # [T, E] float32
    offset: Array  # [T, E] int8, bootstrap row offset k
    valid: Array  # [T, E] bool
    insert_pos: Array  # [] int32, next slot to write
    size: Array  # [] int32, slots holding data (<= T)


RING_SEED_AXES = RingState(
    obs=0, action=0, reward=0, discount=0, offset=0, valid=0, insert_pos=None, size=None
)


def row_bytes(obs_shape: tuple[int, ...], obs_dtype) -> int:
    """Device bytes of one L2 row: the observation once plus action, reward, discount, offset
    and flag."""
    return int(math.prod(obs_shape)) * np.dtype(obs_dtype).itemsize + 4 + 4 + 4 + 1 + 1


class Ring(NamedTuple):
    """The ring's pure functions. `slots = capacity // num_envs`; `lag = n_step`."""

    init: object
    add: object
    gather: object
    sample_uniform: object
    sampleable_slots: object
    slots: int
    num_envs: int
    lag: int


def make_ring(
    capacity: int, num_envs: int, obs_shape: tuple[int, ...], obs_dtype, n_step: int = 1
) -> Ring:
    """Build the ring's functions.

    Args:
      capacity: rows over all envs; a multiple of `num_envs`.
      num_envs: envs per seed (`E`).
      obs_shape, obs_dtype: one observation.
      n_step: the largest bootstrap offset; the newest `n_step` slots are never sampled.

    Raises:
      ValueError: capacity not a multiple of `num_envs`, or fewer than `n_step + 1` slots.
    """
    if capacity % num_envs or capacity < (n_step + 1) * num_envs:
        raise ValueError(
            f"ReplayConfig.capacity={capacity} is not allowed; expected a multiple of "
            f"num_envs={num_envs} of at least {(n_step + 1) * num_envs} (n_step + 1 slots)."
        )
    if capacity > MAX_ROWS:
        raise ValueError(
            f"ReplayConfig.capacity={capacity} is not allowed; expected at most {MAX_ROWS} rows "
            f"per seed (row indices are int32)."
        )
    slots = capacity // num_envs
    obs_shape = tuple(obs_shape)

    def init() -> RingState:
        z = lambda dt: jnp.zeros((slots, num_envs), dt)  # noqa: E731
        return RingState(
            obs=jnp.zeros((slots, num_envs, *obs_shape), obs_dtype),
            action=z(jnp.int32),
            reward=z(jnp.float32),
            discount=z(jnp.float32),
            offset=jnp.ones((slots, num_envs), jnp.int8),
            valid=z(bool),
            insert_pos=jnp.zeros((), jnp.int32),
            size=jnp.zeros((), jnp.int32),
        )

    def add(state: RingState, row: StoredRow) -> RingState:
        chex.assert_shape(row.obs, (num_envs, *obs_shape))
        pos = state.insert_pos

        def put(buf, x):
            return jax.lax.dynamic_update_index_in_dim(buf, x.astype(buf.dtype), pos, 0)

        return RingState(
            obs=put(state.obs, row.obs),
            action=put(state.action, row.action),
            reward=put(state.reward, row.reward),
            discount=put(state.discount, row.discount),
            offset=put(state.offset, row.offset),
            valid=put(state.valid, row.valid),
            insert_pos=(pos + 1) % slots,
            size=jnp.minimum(state.size + 1, slots),
        )

    def sampleable_slots(state: RingState) -> Array:
        """Slots whose bootstrap row is written: all but the newest `n_step`."""
        return jnp.maximum(state.size - n_step, 0)

    def gather(state: RingState, flat: Array) -> Batch:
        """Transitions at flat rows `t * E + e` (`[B]` int32); weight = valid."""
        t, env = flat // num_envs, flat % num_envs
        rows = lambda x: x.reshape((slots * num_envs,) + x.shape[2:])  # noqa: E731
        flat_next = ((t + rows(state.offset)[flat].astype(jnp.int32)) % slots) * num_envs + env
        obs = rows(state.obs)
        return Batch(
            obs=obs[flat],
            action=rows(state.action)[flat],
            reward=rows(state.reward)[flat],
            discount=rows(state.discount)[flat],
            next_obs=obs[flat_next],
            weight=rows(state.valid)[flat].astype(jnp.float32),
            index=flat.astype(jnp.int32),
        )

    def sample_uniform(state: RingState, key: PRNGKey, batch_size: int) -> Batch:
        n_rows = jnp.maximum(sampleable_slots(state), 1) * num_envs
        u = jax.random.randint(key, (batch_size,), 0, n_rows)
        back, env = u // num_envs, u % num_envs
        t = (state.insert_pos - 1 - n_step - back) % slots
        batch = gather(state, t * num_envs + env)
        ok = sampleable_slots(state) > 0
        return batch._replace(weight=jnp.where(ok, batch.weight, 0.0))

    return Ring(init, add, gather, sample_uniform, sampleable_slots, slots, num_envs, n_step)
