"""The device side of the host tier (L3): its layout, state and counters, the `io_callback`s that
spill L2 blocks to the host store and read rows back, and the mixing of those rows into sampled
batches (docs/replay-tiers.md). The host side, `HostStore`, is `replay/spill.py`.

Per seed (vmapped by the loop), `mix` swaps the last `B3` rows of an L2 batch for rows that were
prefetched from L3 (rows already evicted from L2), and `on_add` / `on_update` advance the counters.
Once per block (at the end of its collection), on all seeds at once and outside the seed vmap,
`spill` makes the only host callbacks, each behind a `lax.cond` on shared counters: (1) when `K`
new slots are complete in L2, ONE ordered `io_callback` copies that block of every seed to L3 (long
before L2 overwrites it: L3 holds every slot older than the newest incomplete block, up to its own
FIFO horizon); (2) when the prefetched L3 rows are used up, one `io_callback` sends the next
request of L3 rows and receives the previous one (read one call ahead, `replay/spill.py`).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from jaxrl_fast.config import ReplayConfig, spill_block_bytes
from jaxrl_fast.replay import layout as fields
from jaxrl_fast.replay.base import require_resolved_capacity
from jaxrl_fast.replay.spill import HostStore
from jaxrl_fast.types import Array, Batch, Transition

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


L3_SEED_AXES = L3State(
    committed=None, spilled=None, fetches=None, cursor=None, rows=0, from_l3=0, drawn=0
)


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
    per_slot = num_seeds * num_envs * fields.row_bytes(obs_shape, obs_dtype, frame_stack)
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


class L3(NamedTuple):
    """The L3 tier of one buffer, built once by `make_l3`: its host objects and the device
    functions `replay.tiered.make_buffer` composes.

    Attributes:
      layout: the `L3Layout`.
      store: the `spill.HostStore` behind the callbacks (inspect it in tests; `close()` it, or
        the buffer's `close`, when done).
      init: `() -> L3State` of one seed.
      on_add: `L3State -> L3State`, one slot committed to L2.
      mix: `(L3State, batch [B], l3_weights=None) -> Batch`: the batch with its last `B3` rows
        replaced by the prefetched L3 rows that are valid (index -1); `l3_weights(use [B3])`
        gives their weights (default: the host's 1.0).
      on_update: `(L3State, index [B]) -> L3State`, after a batch was used.
      spill: `(L3State, RingState) -> L3State`, seeds stacked, outside the seed vmap: the host
        callbacks (see the module doc).
      counters: `L3State (seeds stacked) -> dict` of cumulative counters.
      report: `(counters_now, counters_before | None) -> dict` of python numbers and lists.
      host_state: `(*, copy=False) -> dict[str, np.ndarray]`, host side, between chunks: waits
        for the callbacks in flight, then `HostStore.host_state` (what a checkpoint must add
        to the device state).
      load_host_state: `(state, l3_state=None) -> None`, host side, between chunks: waits for
        the callbacks in flight, checks `state` against the store and, when the restored
        `L3State` (seeds stacked) is given, against its counters, then loads it.
    """

    layout: L3Layout
    store: HostStore
    init: Callable[[], L3State]
    on_add: Callable[[L3State], L3State]
    mix: Callable[..., Batch]
    on_update: Callable[[L3State, Array], L3State]
    spill: Callable[[L3State, Any], L3State]
    counters: Callable[[L3State], dict]
    report: Callable[[dict, dict | None], dict]
    host_state: Callable[..., dict[str, np.ndarray]]
    load_host_state: Callable[..., None]


def make_l3(
    config: ReplayConfig,
    example: Transition,
    *,
    num_seeds: int = 1,
    sync_every: int = 1,
    updates_per_sync: int = 1,
    prefetch: bool = True,
    seed: int = 0,
    frame_stack: int = 0,
) -> L3 | None:
    """Build the L3 tier a config describes (None when `config.l3` is "off").

    Takes `make_buffer`'s arguments (see there); pass the result to `make_buffer(...,
    l3_tier=)` built with the same ones to keep a handle on the host store and the layout.

    Raises:
      ValueError: an unresolved capacity, capacities that admit no spill block (`plan_l3`), or
        a `spill_dir` that is missing, not writable or too small.
    """
    require_resolved_capacity(config)
    num_envs = example.obs.shape[0]
    obs_shape, obs_dtype = tuple(example.obs.shape[1:]), example.obs.dtype
    frame_stack = fields.dedup_stack(config.dedup_frames, frame_stack)
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
    if layout is None:
        return None
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
        read_shape=(layout.batches, layout.rows),
    )
    t2, b3, batch_size = config.capacity // num_envs, layout.rows, config.batch_size
    read = fields.read_fields(obs_shape, obs_dtype)

    def _empty_rows() -> Batch:
        lead = (layout.batches, b3)
        rows = {k: jnp.zeros(lead + shape, dt) for k, (shape, dt) in read.items()}
        return Batch(**rows, index=jnp.full(lead, -1, jnp.int32))

    def init() -> L3State:
        zero = jnp.zeros((), jnp.int32)
        return L3State(
            committed=zero,
            spilled=zero,
            fetches=zero,
            cursor=jnp.asarray(layout.batches, jnp.int32),  # used up: the first sync reads
            rows=_empty_rows(),
            from_l3=jnp.zeros((), jnp.float32),
            drawn=jnp.zeros((), jnp.float32),
        )

    def on_add(l3: L3State) -> L3State:
        return l3._replace(committed=l3.committed + 1)

    def mix(l3: L3State, batch: Batch, l3_weights=None) -> Batch:
        if b3 == 0:
            return batch
        cur = jnp.minimum(l3.cursor, layout.batches - 1)
        extra = jax.tree.map(lambda x: x[cur], l3.rows)
        use = extra.weight > 0  # a valid L3 row replaces the L2 row; else the L2 row stays
        if config.l3_hit_rate is not None:  # dynamic share: the first k prefetched rows
            use = use & (jnp.arange(b3) < _dynamic_rows(l3, layout, t2, config))
        if l3_weights is not None:
            extra = extra._replace(weight=l3_weights(use))

        def put(a, b):
            tail = a[batch_size - b3 :]
            m = use.reshape(use.shape + (1,) * (tail.ndim - 1))
            return a.at[batch_size - b3 :].set(jnp.where(m, b.astype(a.dtype), tail))

        return jax.tree.map(put, batch, extra._replace(index=jnp.full((b3,), -1, jnp.int32)))

    def on_update(l3: L3State, index: Array) -> L3State:
        return l3._replace(
            cursor=l3.cursor + 1,
            from_l3=l3.from_l3 + jnp.sum(index < 0).astype(jnp.float32),
            drawn=l3.drawn + index.shape[0],
        )

    spill = _make_spill(layout, store, read, t2=t2, n=config.n_step, num_envs=num_envs)
    counters = _make_counters(layout, obs_shape, obs_dtype, num_envs, frame_stack)
    host_state, load_host_state = _make_host_state(store)
    return L3(
        layout,
        store,
        init,
        on_add,
        mix,
        on_update,
        spill,
        counters,
        report,
        host_state,
        load_host_state,
    )


def _dynamic_rows(l3: L3State, layout: L3Layout, t2: int, config: ReplayConfig) -> Array:
    """Rows of this batch to take from L3 (`ReplayConfig.l3_hit_rate`): the share of the stored
    rows that only L3 holds (as if sampling uniformly over L2 and L3), at most
    `1 - l3_hit_rate` of the batch and the `B3` rows prefetched (`t2`: L2's slots)."""
    batch_size = config.batch_size
    l2_slots = jnp.minimum(l3.committed, t2)
    gone = l3.committed - t2  # slots evicted from L2 (may be < 0)
    only_l3 = jnp.maximum(
        jnp.minimum(l3.spilled, gone) - jnp.maximum(l3.spilled - layout.slots, 0), 0
    )
    share = only_l3 / jnp.maximum(only_l3 + l2_slots, 1).astype(jnp.float32)
    natural = jnp.round(share * batch_size).astype(jnp.int32)
    return jnp.minimum(natural, min(layout.rows, int((1.0 - config.l3_hit_rate) * batch_size)))


def _make_host_state(store: HostStore):
    """`host_state` and `load_host_state` of the L3 tier (see `L3`)."""

    def host_state(*, copy: bool = False) -> dict[str, np.ndarray]:
        jax.effects_barrier()  # every write and read callback of the chunks dispatched is done
        return store.host_state(copy=copy)

    def load_host_state(state: dict[str, Any], l3_state: L3State | None = None) -> None:
        jax.effects_barrier()
        store.check_host_state(state)
        if l3_state is not None:
            # The device counts the slots it spilled and the read calls it made; the store
            # counted the same when the state was taken: both halves come from one chunk.
            pairs = (("spilled", "slots_written"), ("fetches", "read_calls"))
            wrong = []
            for dev, host in pairs:
                on_device, on_host = (
                    int(np.asarray(getattr(l3_state, dev))),
                    int(np.asarray(state[host])),
                )
                if on_device != on_host:
                    wrong.append(f"L3State.{dev}={on_device} but the host state's {host}={on_host}")
            if wrong:
                raise ValueError(
                    "load_host_state: the L3 host state is not from the chunk the replay state "
                    "is from: " + "; ".join(wrong) + ". Save and restore both in one checkpoint."
                )
        store.load_host_state(state)

    return host_state, load_host_state


def _make_spill(
    layout: L3Layout, store: HostStore, read: fields.Fields, *, t2: int, n: int, num_envs: int
):
    """`spill(l3, ring)` for seeds stacked: the spill and read callbacks (module doc); `t2` L2
    slots, `n` the n-step lag."""
    k, lag = layout.block, max(store.frame_stack - 1, 0)

    def write(l3: L3State, ring: Any) -> L3State:
        pos = l3.spilled % t2
        block = [jax.lax.dynamic_slice_in_dim(getattr(ring, f), pos, k, 1) for f in store.fields]
        io_callback(store.write, None, l3.spilled, *block, ordered=True)
        return l3._replace(spilled=l3.spilled + k)

    def fetch(l3: L3State) -> L3State:
        # Rows evicted from L2 whose bootstrap rows are in L3 and not past its horizon. With
        # frame deduplication a row's stack may need the frame_stack - 1 slots before it: once
        # L3 has overwritten a slot, the rows that many slots after it wait too.
        lo = jnp.maximum(l3.spilled - layout.slots + lag, 0)
        hi = jnp.minimum(l3.committed - t2, l3.spilled - n)
        count = jnp.maximum(hi - lo, 0) * num_envs
        lead = (l3.from_l3.shape[0], layout.batches, layout.rows)
        shapes = tuple(jax.ShapeDtypeStruct(lead + s, dt) for s, dt in read.values())
        # The host draws the rows (`HostStore.read_uniform`, seeded by the read count), which
        # keeps random-number work out of the compiled loop.
        read_uniform = functools.partial(store.read_uniform, shape=lead[1:])
        got = io_callback(read_uniform, shapes, l3.fetches, lo, count, ordered=True)
        rows = Batch(*got, index=jnp.full(lead, -1, jnp.int32))
        return l3._replace(rows=rows, cursor=jnp.zeros_like(l3.cursor), fetches=l3.fetches + 1)

    def spill(l3: L3State, ring: Any) -> L3State:
        with jax.named_scope("l3_write"):  # a host callback: the branch is the point
            l3 = jax.lax.cond(l3.committed - l3.spilled >= k, write, lambda s, _: s, l3, ring)
        if layout.rows > 0:
            with jax.named_scope("l3_fetch"):
                l3 = jax.lax.cond(l3.cursor >= layout.batches, fetch, lambda s: s, l3)
        return l3

    return spill


def _make_counters(layout: L3Layout, obs_shape, obs_dtype, num_envs: int, frame_stack: int):
    row = fields.row_bytes(obs_shape, obs_dtype, frame_stack)
    read_row = fields.read_row_bytes(obs_shape, obs_dtype)

    def counters(l3: L3State) -> dict[str, Array]:
        """Cumulative counters: per seed `[S]` or shared `[]` (`report` takes differences)."""
        seeds = l3.from_l3.shape[0] if l3.from_l3.ndim else 1
        return {
            "l3_rows_sampled": l3.from_l3,
            "rows_sampled": l3.drawn,
            "blocks_spilled": l3.spilled // layout.block,
            "l3_rows": jnp.minimum(l3.spilled, layout.slots) * num_envs,
            "l3_read_calls": l3.fetches,
            # float32 totals over all seeds (int32 would overflow past 2 GiB)
            "l3_bytes_written": l3.spilled.astype(jnp.float32) * (num_envs * seeds * row),
            "l3_bytes_read": l3.fetches.astype(jnp.float32)
            * (layout.batches * layout.rows * seeds * read_row),
        }

    return counters


def report(now: dict, before: dict | None = None) -> dict:
    """The counters as python numbers and lists, plus this interval's `l2_hit_rate` per seed:
    the share of sampled rows that L2 served since `before` (1.0 where none were sampled).

    Examples:
      >>> now = {"rows_sampled": np.array([10.0, 8.0]), "l3_rows_sampled": np.array([4.0, 2.0])}
      >>> report(now, {"rows_sampled": np.array([2.0, 0.0]), "l3_rows_sampled": np.zeros(2)})
      {'rows_sampled': [10.0, 8.0], 'l3_rows_sampled': [4.0, 2.0], 'l2_hit_rate': [0.5, 0.75]}
    """
    before = before or {}
    now = {k: np.asarray(v) for k, v in now.items()}
    rec = {k: v.tolist() for k, v in now.items()}
    drawn = now["rows_sampled"] - before.get("rows_sampled", 0.0)
    from_l3 = now["l3_rows_sampled"] - before.get("l3_rows_sampled", 0.0)
    rec["l2_hit_rate"] = np.where(drawn > 0, 1.0 - from_l3 / np.maximum(drawn, 1), 1.0).tolist()
    return rec
