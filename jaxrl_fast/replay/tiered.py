"""The composed replay buffer: L1 staging -> L2 device ring (uniform or prioritised) -> L3 host
store, as one `Buffer` (DESIGN §4). The loop never knows which tiers are on.

Per seed (vmapped by the loop): `add` stages a step and commits one `StoredRow` to L2;
`sample` draws a batch from L2 and, when L3 is on, swaps its last `B3` rows for rows that were
prefetched from L3 (rows already evicted from L2); `update_priorities` writes the TD errors'
priorities for the L2 rows and advances the shared sample counter.

Once per loop iteration, on all seeds at once and outside the seed vmap, the loop calls
`host_sync`. With L3 on, it holds the only host callbacks, each behind a `lax.cond` on shared
counters: (1) when `K` new slots are complete in L2, ONE ordered `io_callback` copies that block
of every seed to L3 (long before L2 overwrites it: L3 holds every slot older than the newest
incomplete block, up to its own FIFO horizon); (2) when the prefetched L3 rows are used up, one
`io_callback` sends the next request of L3 rows and receives the previous one (read one call
ahead, `replay/spill.py`). Without L3, `host_sync` is the identity.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import io_callback

from jaxrl_fast.config import ReplayConfig, spill_block_bytes
from jaxrl_fast.replay import prioritised, staging
from jaxrl_fast.replay.base import Buffer
from jaxrl_fast.replay.ring import RING_SEED_AXES, make_ring, row_bytes
from jaxrl_fast.replay.spill import HostStore
from jaxrl_fast.types import Array, Batch, PRNGKey, Transition

READ_BATCHES = 16


class L3State(NamedTuple):
    """Device-side L3 bookkeeping. Counters are shared by all seeds (seeds add in lockstep)."""

    committed: Array  # [] int32, slots ever committed to L2
    spilled: Array  # [] int32, slots copied to L3 (a multiple of K)
    fetches: Array  # [] int32, read calls made
    cursor: Array  # [] int32, prefetched batches used since the last read call
    rows: Batch  # per seed, [M, B3, ...] rows for the next M batches (index unused)
    from_l3: Array  # [] float32 per seed, sampled rows served by L3
    drawn: Array  # [] float32 per seed, rows sampled


class ReplayState(NamedTuple):
    """State of the composed buffer (one seed; the loop stacks seeds)."""

    staging: staging.StagingState
    ring: Any  # RingState
    priorities: Any  # sampler state, or None when uniform
    max_priority: Array  # [] float32 (1.0 when uniform)
    updates: Array  # [] int32 shared: batches sampled and used
    l3: Any  # L3State, or None when L3 is off


class L3Layout(NamedTuple):
    """How L3 is cut: `slots` per seed, `block` slots per spill call, `batches` per read call,
    `rows` (B3) per batch."""

    slots: int
    block: int
    batches: int
    rows: int


def plan_l3(
    config: ReplayConfig,
    *,
    num_envs: int,
    num_seeds: int,
    obs_shape: tuple[int, ...],
    obs_dtype,
    sync_every: int,
    updates_per_sync: int,
    frame_stack: int = 0,
) -> L3Layout | None:
    """The L3 layout a config gives, or None when L3 is off. With `frame_stack` (frame
    deduplication) L3 rows hold one frame, as L2's do.

    The spill block `K` (slots) is the largest that fits in `spill_block` bytes for all seeds,
    at least `sync_every` (one spill per sync keeps up), divides both tiers' slot counts, and
    leaves L2 room to keep the block until it is copied (`2K + sync_every + n_step <= T2`).

    Raises:
      ValueError: capacities that admit no such block, naming the fields and a fix.
    """
    if config.l3 == "off":
        return None
    t2 = config.capacity // num_envs
    if config.l3_capacity % num_envs:
        raise ValueError(
            f"ReplayConfig.l3_capacity={config.l3_capacity} is not allowed; expected a multiple "
            f"of env.num_envs={num_envs}, e.g. {max(1, config.l3_capacity // num_envs) * num_envs}."
        )
    t3 = config.l3_capacity // num_envs
    per_slot = num_seeds * num_envs * row_bytes(obs_shape, obs_dtype, frame_stack)
    target = max(sync_every, spill_block_bytes(config.spill_block) // per_slot)
    limit = min(target, (t2 - sync_every - config.n_step) // 2, t3)
    common = math.gcd(t2, t3)
    block = next(
        (
            d
            for d in range(limit, sync_every - 1, -1)
            if d > 0 and common % d == 0 and d % sync_every == 0
        ),
        None,
    )
    if block is None:
        raise ValueError(
            f"ReplayConfig.capacity={config.capacity} and l3_capacity={config.l3_capacity} "
            f"admit no spill block: expected both to be multiples of num_envs x K for some K "
            f"that is a multiple of {sync_every} (env steps per block / num_envs) with "
            f"2K + {sync_every + config.n_step} <= capacity / num_envs; e.g. capacity="
            f"{4 * sync_every * num_envs * max(1, config.n_step)} and l3_capacity a multiple "
            f"of it."
        )
    # Rows for about READ_BATCHES batches per read call. Measured on CPU (benchmarks/
    # replay_loop.py): the read's cost in the loop is per iteration, not per call (16 or 250
    # batches per call cost the same), so a short prefetch keeps the carry small and rows fresh.
    syncs = min(block // sync_every, max(1, READ_BATCHES // updates_per_sync))
    batches = updates_per_sync * syncs
    return L3Layout(slots=t3, block=block, batches=batches, rows=config.l3_rows_per_batch)


def make_buffer(
    config: ReplayConfig,
    example: Transition,
    *,
    gamma: float = 0.99,
    num_seeds: int = 1,
    sync_every: int = 1,
    updates_per_sync: int = 1,
    total_updates: int | None = None,
    prefetch: bool = True,
    seed: int = 0,
    frame_stack: int = 0,
) -> Buffer:
    """Build the buffer a `ReplayConfig` describes.

    Args:
      config: replay settings; `capacity` must be resolved to an int (see `replay.sizing`).
      example: a `Transition` with leading `[num_envs]` (arrays or `ShapeDtypeStruct`s).
      gamma: discount for the n-step returns.
      num_seeds: seeds stacked by the loop (L3 stores all of them).
      sync_every: slots committed between two `host_sync` calls (collect steps per block).
      updates_per_sync: batches sampled between two `host_sync` calls.
      total_updates: batches over the run; PER's beta reaches 1 there (None: beta stays fixed).
      prefetch: L3 reads one call ahead (False: synchronous reads, for tests).
      seed: seeds the host's draws of L3 rows (with the read count).
      frame_stack: `k > 1` for observations that stack `k` frames on the last axis: L2 (and L3)
        store one frame per row and rebuild the stacks (`ring.make_ring`, `spill.HostStore`),
        if `dedup_frames`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxrl_fast.config import ReplayConfig
      >>> flags = [jnp.zeros(2, bool)] * 3
      >>> ex = Transition(jnp.zeros((2, 3)), jnp.zeros(2, jnp.int32), jnp.zeros(2), *flags)
      >>> buf = make_buffer(ReplayConfig(capacity=8, batch_size=4, n_step=2), ex)
      >>> state = buf.add(buf.init(), ex)
      >>> buf.sample(state, jax.random.key(0)).obs.shape
      (4, 3)
    """
    if not isinstance(config.capacity, int):
        raise ValueError(
            f"ReplayConfig.capacity={config.capacity!r} must be resolved to a number of rows "
            f"before building the buffer (jaxrl_fast.replay.sizing.resolve_capacity)."
        )
    num_envs = example.obs.shape[0]
    obs_shape, obs_dtype = tuple(example.obs.shape[1:]), example.obs.dtype
    n = config.n_step
    frame_stack = frame_stack if config.dedup_frames and frame_stack > 1 else 0
    ring = make_ring(config.capacity, num_envs, obs_shape, obs_dtype, n, frame_stack)
    rows_l2 = ring.slots * num_envs
    batch_size = config.batch_size
    per = config.prioritised
    sampler = prioritised.make_sampler(config.sampler, rows_l2) if per else None
    to_priority = prioritised.priority_fn(config.priority, config.alpha, config.priority_eps)
    layout = plan_l3(
        config,
        num_envs=num_envs,
        num_seeds=num_seeds,
        obs_shape=obs_shape,
        obs_dtype=obs_dtype,
        sync_every=sync_every,
        updates_per_sync=updates_per_sync,
        frame_stack=frame_stack,
    )
    b3 = layout.rows if layout is not None else 0
    store = None
    if layout is not None:
        store = HostStore(
            config.l3,
            num_seeds=num_seeds,
            slots=layout.slots,
            num_envs=num_envs,
            obs_shape=obs_shape,
            obs_dtype=obs_dtype,
            spill_dir=config.spill_dir,
            keep=config.keep_spill,
            prefetch=prefetch,
            seed=seed,
            frame_stack=frame_stack,
        )
    step_example = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), example)

    def _empty_rows(m: int) -> Batch:
        z = lambda shape, dt: jnp.zeros((m, b3, *shape), dt)  # noqa: E731
        return Batch(
            obs=z(obs_shape, obs_dtype),
            action=z((), jnp.int32),
            reward=z((), jnp.float32),
            discount=z((), jnp.float32),
            next_obs=z(obs_shape, obs_dtype),
            weight=z((), jnp.float32),
            index=jnp.full((m, b3), -1, jnp.int32),
        )

    def init() -> ReplayState:
        l3 = None
        if layout is not None:
            zero = jnp.zeros((), jnp.int32)
            l3 = L3State(
                committed=zero,
                spilled=zero,
                fetches=zero,
                cursor=jnp.asarray(layout.batches, jnp.int32),  # used up: the first sync reads
                rows=_empty_rows(layout.batches),
                from_l3=jnp.zeros((), jnp.float32),
                drawn=jnp.zeros((), jnp.float32),
            )
        return ReplayState(
            staging=staging.init(n, step_example),
            ring=ring.init(),
            priorities=sampler.init() if per else None,
            max_priority=jnp.ones((), jnp.float32),
            updates=jnp.zeros((), jnp.int32),
            l3=l3,
        )

    def add(state: ReplayState, step: Transition) -> ReplayState:
        stage, row = staging.stage(state.staging, step, gamma)
        pos = state.ring.insert_pos
        ring_state = ring.add(state.ring, row)
        priorities = state.priorities
        if per:
            # The slot just overwritten leaves; the slot n back now has its bootstrap row.
            env = jnp.arange(num_envs, dtype=jnp.int32)
            ready = (pos - n) % ring.slots
            ready_ok = jnp.logical_and(ring_state.valid[ready], ring_state.size > n)
            # With frame deduplication the next frame_stack - 1 oldest slots also leave: their
            # stacks need the frame just overwritten.
            gone = [(pos + j) % ring.slots for j in range(max(frame_stack, 1))]
            index = jnp.concatenate([g * num_envs + env for g in gone] + [ready * num_envs + env])
            value = jnp.concatenate(
                [jnp.zeros((num_envs * len(gone),)), jnp.where(ready_ok, state.max_priority, 0.0)]
            )
            priorities = sampler.set(priorities, index, value)
        l3 = state.l3
        if l3 is not None:
            l3 = l3._replace(committed=l3.committed + 1)
        return state._replace(staging=stage, ring=ring_state, priorities=priorities, l3=l3)

    def _beta(updates: Array) -> Array:
        if not total_updates:
            return jnp.float32(config.beta)
        frac = jnp.minimum(updates.astype(jnp.float32) / total_updates, 1.0)
        return config.beta + (1.0 - config.beta) * frac

    def sample(state: ReplayState, key: PRNGKey) -> Batch:
        if per:
            index, priority = sampler.draw(state.priorities, key, batch_size)
            batch = ring.gather(state.ring, index)
            # (N P_i)^-beta / max_j (N P_j)^-beta: N and the total cancel, priorities suffice.
            w = prioritised.importance_weights(priority, jnp.float32(1.0), _beta(state.updates))
            batch = batch._replace(weight=w * batch.weight)  # w = 0 while the total is 0
        else:
            batch = ring.sample_uniform(state.ring, key, batch_size)
        if state.l3 is None or b3 == 0:
            return batch
        cur = jnp.minimum(state.l3.cursor, layout.batches - 1)
        extra = jax.tree.map(lambda x: x[cur], state.l3.rows)
        use = extra.weight > 0  # a valid L3 row replaces the L2 row; else the L2 row stays

        def mix(a, b):
            tail = a[batch_size - b3 :]
            m = use.reshape(use.shape + (1,) * (tail.ndim - 1))
            return a.at[batch_size - b3 :].set(jnp.where(m, b.astype(a.dtype), tail))

        if per:  # an L3 row counts as uniform: weight 1 relative to the batch's largest
            extra = extra._replace(weight=jnp.where(use, 1.0, 0.0))
        return jax.tree.map(mix, batch, extra._replace(index=jnp.full((b3,), -1, jnp.int32)))

    def update_priorities(state: ReplayState, index: Array, td_error: Array) -> ReplayState:
        priorities, max_p = state.priorities, state.max_priority
        if per:
            # L3 rows (index -1) have no L2 row: point them at one L2 row of the batch with
            # that row's TD error. A scatter keeps one of the values written to a row, so
            # clamping them to row 0 with its old priority could undo row 0's update.
            anchor = jnp.argmax(index)  # an L2 row of the batch, if it has one
            row = jnp.where(index >= 0, index, index[anchor])
            td = jnp.where(index >= 0, td_error, td_error[anchor])
            safe = jnp.maximum(row, 0)
            current = sampler.get(priorities, safe)
            new = to_priority(td.astype(jnp.float32))
            # Only rows that are live (priority > 0), came from L2 (index >= 0) and got a finite
            # TD error change (a skipped mixed-precision update may return inf/NaN TD errors).
            live = (row >= 0) & (current > 0) & jnp.isfinite(td)
            priorities = sampler.set(priorities, safe, jnp.where(live, new, current))
            max_p = jnp.maximum(max_p, jnp.max(jnp.where(live, new, 0.0)))
        l3 = state.l3
        if l3 is not None:
            l3 = l3._replace(
                cursor=l3.cursor + 1,
                from_l3=l3.from_l3 + jnp.sum(index < 0).astype(jnp.float32),
                drawn=l3.drawn + index.shape[0],
            )
        return state._replace(
            priorities=priorities, max_priority=max_p, updates=state.updates + 1, l3=l3
        )

    def can_sample(state: ReplayState) -> Array:
        return ring.sampleable_slots(state.ring) > 0

    # ---- once per iteration, outside the seed vmap -------------------------------------------
    def host_sync(state: ReplayState) -> ReplayState:
        if state.l3 is None:
            return state
        k = layout.block

        def spill(l3: L3State) -> L3State:
            pos = l3.spilled % ring.slots
            r = state.ring
            fields = (r.obs, r.action, r.reward, r.discount, r.offset, r.valid)
            if frame_stack:  # L3 keeps one frame per row too, and rebuilds stacks on read
                fields += (r.fresh,)
            block = [jax.lax.dynamic_slice_in_dim(x, pos, k, axis=1) for x in fields]
            io_callback(store.write, None, l3.spilled, *block, ordered=True)
            return l3._replace(spilled=l3.spilled + k)

        l3 = jax.lax.cond(state.l3.committed - state.l3.spilled >= k, spill, lambda s: s, state.l3)

        def read(l3: L3State) -> L3State:
            # Rows evicted from L2 whose bootstrap rows are in L3 and not past its horizon.
            # With frame deduplication a row's stack may need the frame_stack - 1 slots before
            # it: once L3 has overwritten a slot, the rows that many slots after it wait too.
            lo = jnp.maximum(l3.spilled - layout.slots + max(frame_stack - 1, 0), 0)
            hi = jnp.minimum(l3.committed - ring.slots, l3.spilled - n)
            count = jnp.maximum(hi - lo, 0) * num_envs
            shape = (layout.batches, b3)
            s = l3.from_l3.shape[0]
            out = jax.ShapeDtypeStruct
            shapes = (
                out((s, *shape, *obs_shape), obs_dtype),
                out((s, *shape), jnp.int32),
                out((s, *shape), jnp.float32),
                out((s, *shape), jnp.float32),
                out((s, *shape, *obs_shape), obs_dtype),
                out((s, *shape), jnp.float32),
            )
            # The host draws the rows (`HostStore.read_uniform`, seeded by the read count), which
            # keeps random-number work out of the compiled loop.
            read_uniform = functools.partial(store.read_uniform, shape=shape)
            got = io_callback(read_uniform, shapes, l3.fetches, lo, count, ordered=True)
            rows = Batch(*got, index=jnp.full((s, *shape), -1, jnp.int32))
            return l3._replace(rows=rows, cursor=jnp.zeros_like(l3.cursor), fetches=l3.fetches + 1)

        if b3 > 0:
            l3 = jax.lax.cond(l3.cursor >= layout.batches, read, lambda s: s, l3)
        return state._replace(l3=l3)

    def metrics(state: ReplayState) -> dict[str, Array]:
        """Cumulative counters: per seed `[S]` or shared `[]` (the loop reports differences)."""
        if state.l3 is None:
            return {}
        l3 = state.l3
        seeds = l3.from_l3.shape[0] if l3.from_l3.ndim else 1
        row = row_bytes(obs_shape, obs_dtype, frame_stack)
        # whole obs and next_obs stacks, action, reward, discount, weight
        read_row = 2 * math.prod(obs_shape) * jnp.dtype(obs_dtype).itemsize + 16
        return {
            "l3_rows_sampled": l3.from_l3,
            "rows_sampled": l3.drawn,
            "blocks_spilled": l3.spilled // layout.block,
            "l3_rows": jnp.minimum(l3.spilled, layout.slots) * num_envs,
            "l3_read_calls": l3.fetches,
            # float32 totals over all seeds (int32 would overflow past 2 GiB)
            "l3_bytes_written": l3.spilled.astype(jnp.float32) * (num_envs * seeds * row),
            "l3_bytes_read": l3.fetches.astype(jnp.float32)
            * (layout.batches * b3 * seeds * read_row),
        }

    state_axes = ReplayState(
        staging=0,
        ring=RING_SEED_AXES,
        priorities=0 if per else None,
        max_priority=0,
        updates=None,
        l3=None
        if layout is None
        else L3State(
            committed=None,
            spilled=None,
            fetches=None,
            cursor=None,
            rows=0,
            from_l3=0,
            drawn=0,
        ),
    )
    return Buffer(
        init=init,
        add=add,
        sample=sample,
        update_priorities=update_priorities,
        can_sample=can_sample,
        seed_axes=state_axes,
        host_sync=host_sync,
        metrics=metrics,
        store=store,
        layout=layout,
    )
