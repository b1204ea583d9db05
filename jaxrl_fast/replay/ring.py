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

**Frame deduplication** (`frame_stack=k`, for observations that stack the last `k` frames on
the last axis, as Atari's `[84, 84, 4]`): a row stores only its newest frame and a `fresh`
flag, and `gather` rebuilds both `obs` and `next_obs` stacks from the frames of the rows before
them. `add` compares each observation with the env's previous one: it *continues* the previous
stack when its first `k - 1` frames are the previous stack's last `k - 1`; otherwise the row is
`fresh` and its stack is `k` copies of its frame (how envpool starts a game). Rebuilding walks
back from a row, staying on a fresh row: by induction every rebuilt stack equals the stored
observation bitwise, and `add` counts any observation that is neither (`stack_mismatches`,
0 for envpool). Zero-initialised slots make the first rows rebuild correctly too. Once the
ring is full the `k - 1` oldest slots have lost their predecessors and are not sampled.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxrl_fast.replay.layout import stored_fields
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
    # frame deduplication only (None otherwise); `obs` then holds [T, E, *frame_shape]
    fresh: Array | None = None  # [T, E] bool, the row's stack is copies of its frame
    last: Array | None = None  # [E, *obs_shape], the previous observation added
    stack_mismatches: Array | None = None  # [] int32, stacks neither continued nor fresh


RING_SEED_AXES = RingState(
    obs=0,
    action=0,
    reward=0,
    discount=0,
    offset=0,
    valid=0,
    insert_pos=None,
    size=None,
    fresh=0,
    last=0,
    stack_mismatches=0,
)


def forget_newest(state: RingState, count: int) -> RingState:
    """`state` (one seed) with its newest `count` slots out of sampling (`valid = False`).

    The newest `n_step` rows bootstrap from observations not yet written; when the envs
    restart outside the loop (a resumed envpool run) those observations would come from new
    games, so the rows are dropped instead.
    """
    slots = state.valid.shape[0]
    index = (state.insert_pos - 1 - jnp.arange(count)) % slots
    return state._replace(valid=state.valid.at[index].set(False))


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
    frame_stack: int = 0


def _frames_per_stack(
    capacity: int, num_envs: int, obs_shape: tuple[int, ...], n_step: int, frame_stack: int
) -> int:
    """`make_ring`'s checks of its sizes; returns the frames per rebuilt stack (0: whole
    observations are stored)."""
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
    k = frame_stack
    if k == 1:
        k = 0  # a one-frame "stack" is the observation itself
    if k and (len(obs_shape) < 2 or obs_shape[-1] != k):
        raise ValueError(
            f"frame_stack={frame_stack} needs observations whose last axis stacks {frame_stack} "
            f"frames; got shape {obs_shape}."
        )
    if k and slots < n_step + k + 1:
        raise ValueError(
            f"ReplayConfig.capacity={capacity} is not allowed with {k}-frame deduplication; "
            f"expected at least {(n_step + k + 1) * num_envs} rows (n_step + {k + 1} slots of "
            f"num_envs={num_envs})."
        )
    return k


def make_ring(
    capacity: int,
    num_envs: int,
    obs_shape: tuple[int, ...],
    obs_dtype,
    n_step: int = 1,
    frame_stack: int = 0,
) -> Ring:
    """Build the ring's functions.

    Args:
      capacity: rows over all envs; a multiple of `num_envs`.
      num_envs: envs per seed (`E`).
      obs_shape, obs_dtype: one observation.
      n_step: the largest bootstrap offset; the newest `n_step` slots are never sampled.
      frame_stack: `k > 1` stores one frame per row and rebuilds `k`-frame stacks (the last
        axis of `obs_shape`, which must be `k`); 0 stores whole observations.

    Raises:
      ValueError: capacity not a multiple of `num_envs`, or fewer than `n_step + 1` slots.
    """
    slots, obs_shape = capacity // num_envs, tuple(obs_shape)
    k = _frames_per_stack(capacity, num_envs, obs_shape, n_step, frame_stack)
    fields = stored_fields(obs_shape, obs_dtype, k)
    # Once full, the k - 1 oldest slots have lost the frames their stacks need.
    lost = max(k - 1, 0)

    def init() -> RingState:
        rows = {name: jnp.zeros((slots, num_envs, *s), dt) for name, (s, dt) in fields.items()}
        rows["offset"] = jnp.ones_like(rows["offset"])  # a placeholder bootstraps one slot on
        return RingState(
            **rows,
            insert_pos=jnp.zeros((), jnp.int32),
            size=jnp.zeros((), jnp.int32),
            last=jnp.zeros((num_envs, *obs_shape), obs_dtype) if k else None,
            stack_mismatches=jnp.zeros((), jnp.int32) if k else None,
        )

    def add(state: RingState, row: StoredRow) -> RingState:
        chex.assert_shape(row.obs, (num_envs, *obs_shape))
        pos = state.insert_pos

        def put(buf, x):
            return jax.lax.dynamic_update_index_in_dim(buf, x.astype(buf.dtype), pos, 0)

        extra = {}
        obs = row.obs
        if k:
            axes = tuple(range(1, obs.ndim))
            continues = jnp.all(obs[..., :-1] == state.last[..., 1:], axis=axes)
            copies = jnp.all(obs == obs[..., -1:], axis=axes)
            extra = dict(
                fresh=put(state.fresh, jnp.logical_not(continues)),
                last=obs.astype(state.last.dtype),
                stack_mismatches=state.stack_mismatches
                + jnp.sum(jnp.logical_not(continues | copies)).astype(jnp.int32),
            )
            obs = obs[..., -1]
        return state._replace(
            obs=put(state.obs, obs),
            action=put(state.action, row.action),
            reward=put(state.reward, row.reward),
            discount=put(state.discount, row.discount),
            offset=put(state.offset, row.offset),
            valid=put(state.valid, row.valid),
            insert_pos=(pos + 1) % slots,
            size=jnp.minimum(state.size + 1, slots),
            **extra,
        )

    def sampleable_slots(state: RingState) -> Array:
        """Slots whose bootstrap row is written: all but the newest `n_step` (and, with frame
        deduplication in a full ring, all but the `frame_stack - 1` oldest)."""
        lost_now = jnp.where(state.size >= slots, lost, 0) if lost else 0
        return jnp.maximum(state.size - n_step - lost_now, 0)

    def _stacks(state: RingState, t: Array, env: Array) -> Array:
        """Rebuilt `[B, *obs_shape]` stacks of rows `(t, env)`: walk back from each row, one
        slot per frame, but stay on a fresh row (its stack repeats its frame)."""
        frames, idx = [state.obs[t, env]], t
        for _ in range(k - 1):
            idx = jnp.where(state.fresh[idx, env], idx, (idx - 1) % slots)
            frames.append(state.obs[idx, env])
        return jnp.stack(frames[::-1], axis=-1)

    def gather(state: RingState, flat: Array) -> Batch:
        """Transitions at flat rows `t * E + e` (`[B]` int32); weight = valid."""
        t, env = flat // num_envs, flat % num_envs
        rows = lambda x: x.reshape((slots * num_envs,) + x.shape[2:])  # noqa: E731
        t_next = (t + rows(state.offset)[flat].astype(jnp.int32)) % slots
        if k:
            obs, next_obs = _stacks(state, t, env), _stacks(state, t_next, env)
        else:
            stored = rows(state.obs)
            obs, next_obs = stored[flat], stored[t_next * num_envs + env]
        return Batch(
            obs=obs,
            action=rows(state.action)[flat],
            reward=rows(state.reward)[flat],
            discount=rows(state.discount)[flat],
            next_obs=next_obs,
            weight=rows(state.valid)[flat].astype(jnp.float32),
            index=flat.astype(jnp.int32),
        )

    def sample_uniform(state: RingState, key: PRNGKey, batch_size: int) -> Batch:
        n_rows = jnp.maximum(sampleable_slots(state), 1) * num_envs
        # One bits draw (randint makes two): modulo bias <= n_rows / 2**32 relative per row.
        bits = jax.random.bits(key, (batch_size,), jnp.uint32)
        u = (bits % n_rows.astype(jnp.uint32)).astype(jnp.int32)
        back, env = u // num_envs, u % num_envs
        t = (state.insert_pos - 1 - n_step - back) % slots
        batch = gather(state, t * num_envs + env)
        ok = sampleable_slots(state) > 0
        return batch._replace(weight=jnp.where(ok, batch.weight, 0.0))

    return Ring(init, add, gather, sample_uniform, sampleable_slots, slots, num_envs, n_step, k)
