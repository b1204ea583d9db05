"""The composed replay buffer, composition only: L1 staging (`staging`) -> L2 device ring
(`ring`), uniform or prioritised (`prioritised.make_per`) -> L3 host tier (`l3.make_l3`), as
one `Buffer` (docs/replay-tiers.md); or, for a recurrent agent (`ReplayConfig.sequence_length`), the
sequence buffer (`sequence`). The loop never knows which tiers are on.

Per seed (vmapped by the loop): `add` stages a step and commits one `StoredRow` to L2 (PER
then updates the priorities of the rows that left and of the row that became complete);
`sample` draws a batch from L2 (uniformly, or by priority with importance weights) and, when L3
is on, mixes in prefetched L3 rows; `update_priorities` writes the TD errors' priorities for
the L2 rows and advances the shared sample counter. Once per loop iteration, outside the seed
vmap, `spill` makes L3's host callbacks (the identity without L3).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay import demo, prioritised, staging
from jaxrl_fast.replay.base import Buffer, require_resolved_capacity
from jaxrl_fast.replay.demo import DemoRows
from jaxrl_fast.replay.l3 import L3, L3_SEED_AXES, make_l3
from jaxrl_fast.replay.layout import dedup_stack
from jaxrl_fast.replay.ring import RING_SEED_AXES, forget_newest, make_ring
from jaxrl_fast.replay.sequence import make_sequence_buffer
from jaxrl_fast.types import Array, Batch, PRNGKey, Transition


class ReplayState(NamedTuple):
    """State of the composed buffer (one seed; the loop stacks seeds)."""

    staging: staging.StagingState
    ring: Any  # RingState
    priorities: Any  # PER sampler state, or None when uniform
    max_priority: Array  # [] float32 (1.0 when uniform)
    updates: Array  # [] int32 shared: batches sampled and used
    l3: Any  # l3.L3State, or None when L3 is off
    demo: Any = None  # demo.DemoRows shared by the seeds, or None without demonstrations


def _check_tier(tier: L3, *want: Any) -> None:
    """Raise unless `tier` was built for `(num_seeds, num_envs, obs_shape, obs_dtype,
    frame_stack)` = `want`."""
    s = tier.store
    got = (s.num_seeds, s.num_envs, s.obs_shape, s.obs_dtype, s.frame_stack)
    if got != want:
        raise ValueError(
            f"make_buffer: l3_tier was built for (num_seeds, num_envs, obs_shape, obs_dtype, "
            f"frame_stack)={got}, this buffer has {want}; build it with make_buffer's arguments."
        )


def _restart_envs(state: ReplayState, fresh: ReplayState, n_step: int) -> ReplayState:
    """`Buffer.restart_envs`: the staging of `fresh`, the newest `n_step` rows out of sampling."""
    return state._replace(staging=fresh.staging, ring=forget_newest(state.ring, n_step))


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
    l3_tier: L3 | None = None,
    demos: DemoRows | None = None,
    demo_rows_per_batch: int = 0,
) -> Buffer:
    """Build the buffer a `ReplayConfig` describes.

    Args:
      config: replay settings; `capacity` must be resolved to an int (see `replay.sizing`).
      example: a `Transition` with leading `[num_envs]` (arrays or `ShapeDtypeStruct`s).
      gamma: discount for the n-step returns.
      num_seeds: seeds stacked by the loop (L3 stores all of them).
      sync_every: slots committed between two `spill` calls (collect steps per block).
      updates_per_sync: batches sampled between two `spill` calls.
      total_updates: batches over the run; PER's beta reaches 1 there (None: beta stays fixed).
      prefetch: L3 reads one call ahead (False: synchronous reads, for tests).
      seed: seeds the host's draws of L3 rows (with the read count).
      frame_stack: `k > 1` for observations that stack `k` frames on the last axis: L2 (and L3)
        store one frame per row and rebuild the stacks (`ring.make_ring`, `spill.HostStore`),
        if `dedup_frames`.
      l3_tier: an L3 tier from `l3.make_l3(config, example, ...)` with the same arguments, to
        keep a handle on its host store and layout; None builds it here when L3 is on.
      demos: demonstration rows (`demo.demo_rows`, numpy), kept in the state (shared by the
        seeds); the last `demo_rows_per_batch` rows of every batch are drawn from them.

    Raises:
      ValueError: an unresolved capacity, capacities the ring or L3 reject, or an `l3_tier`
        built for other seeds, envs or observations.

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
    require_resolved_capacity(config)
    if config.sequence_length:  # a recurrent agent's sequences (L2 only)
        return make_sequence_buffer(config, example, frame_stack=frame_stack)
    num_envs = example.obs.shape[0]
    obs_shape, obs_dtype = tuple(example.obs.shape[1:]), example.obs.dtype
    frame_stack = dedup_stack(config.dedup_frames, frame_stack)
    ring = make_ring(config.capacity, num_envs, obs_shape, obs_dtype, config.n_step, frame_stack)
    per = None
    if config.prioritised:
        per = prioritised.make_per(
            config,
            slots=ring.slots,
            num_envs=num_envs,
            frame_stack=frame_stack,
            total_updates=total_updates,
        )
    if l3_tier is None:
        l3_tier = make_l3(config, example, num_seeds=num_seeds, sync_every=sync_every,
                          updates_per_sync=updates_per_sync, prefetch=prefetch, seed=seed,
                          frame_stack=frame_stack)  # fmt: skip
    else:
        _check_tier(l3_tier, num_seeds, num_envs, obs_shape, np.dtype(obs_dtype), frame_stack)
    k_demo = _demo_rows_per_batch(config, demos, demo_rows_per_batch, l3_tier)
    step_example = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), example)
    t = _Tiers(config, gamma, step_example, ring, per, l3_tier, demos, k_demo)
    fns = Buffer(
        functools.partial(_init, t),
        functools.partial(_add, t),
        functools.partial(_sample, t),
        functools.partial(_update_priorities, t),
        functools.partial(_can_sample, t),
        _seed_axes(t),
        restart_envs=functools.partial(_restart_envs, n_step=config.n_step),
    )
    return fns if l3_tier is None else _with_l3(fns, l3_tier)


class _Tiers(NamedTuple):
    """What the composed buffer's functions close over."""

    config: ReplayConfig
    gamma: float
    step_example: Any
    ring: Any
    per: Any  # prioritised.PER or None (uniform)
    tier: L3 | None
    demos: DemoRows | None
    k_demo: int  # demonstration rows per batch (0: none)


def _demo_rows_per_batch(config: ReplayConfig, demos, rows: int, tier: L3 | None) -> int:
    k_demo = rows if demos is not None else 0
    if k_demo and (tier is not None or not 0 < k_demo < config.batch_size):
        raise ValueError(
            f"make_buffer: {k_demo} demonstration rows per batch of {config.batch_size} "
            f"(l3={config.l3!r}); expected 1 .. batch_size - 1 of them, with l3='off'."
        )
    return k_demo


def _init(t: _Tiers) -> ReplayState:
    per, tier = t.per, t.tier
    return ReplayState(
        staging=staging.init(t.config.n_step, t.step_example),
        ring=t.ring.init(),
        priorities=per.init() if per is not None else None,
        max_priority=jnp.ones((), jnp.float32),
        updates=jnp.zeros((), jnp.int32),
        l3=tier.init() if tier is not None else None,
        demo=jax.tree.map(jnp.asarray, t.demos) if t.k_demo else None,
    )


def _add(t: _Tiers, state: ReplayState, step: Transition, step_gamma: Array | None = None):
    # the n-step return and discount take the gamma of this step (traced), else `gamma`
    gamma = t.gamma if step_gamma is None else step_gamma
    stage, row = staging.stage(state.staging, step, gamma)
    ring_state = t.ring.add(state.ring, row)
    priorities = state.priorities
    if t.per is not None:
        pos = state.ring.insert_pos
        priorities = t.per.on_add(priorities, state.max_priority, pos, ring_state)
    l3 = t.tier.on_add(state.l3) if t.tier is not None else None
    return state._replace(staging=stage, ring=ring_state, priorities=priorities, l3=l3)


def _sample(t: _Tiers, state: ReplayState, key: PRNGKey, hp: Any = None) -> Batch:
    per, tier = t.per, t.tier
    if t.k_demo:
        key, key_demo = jax.random.split(key)
    if per is not None:
        index, w = per.draw(state.priorities, key, state.updates, hp)
        batch = t.ring.gather(state.ring, index)
        batch = batch._replace(weight=w * batch.weight)  # w = 0 while the total is 0
    else:
        batch = t.ring.sample_uniform(state.ring, key, t.config.batch_size)
    if t.k_demo:
        return demo.mix(state.demo, batch, key_demo, t.k_demo)
    if tier is None:
        return batch
    return tier.mix(state.l3, batch, per.l3_weights if per is not None else None)


def _update_priorities(
    t: _Tiers, state: ReplayState, index: Array, td_error: Array, hp: Any = None
) -> ReplayState:
    priorities, max_p = state.priorities, state.max_priority
    if t.per is not None:
        priorities, max_p = t.per.update(priorities, max_p, index, td_error, hp)
    l3 = t.tier.on_update(state.l3, index) if t.tier is not None else None
    return state._replace(
        priorities=priorities, max_priority=max_p, updates=state.updates + 1, l3=l3
    )


def _can_sample(t: _Tiers, state: ReplayState) -> Array:
    return t.ring.sampleable_slots(state.ring) > 0


def _seed_axes(t: _Tiers) -> ReplayState:
    return ReplayState(
        staging=0,
        ring=RING_SEED_AXES,
        priorities=0 if t.per is not None else None,
        max_priority=0,
        updates=None,
        l3=L3_SEED_AXES if t.tier is not None else None,
        demo=None,
    )


def _with_l3(fns: Buffer, tier: L3) -> Buffer:
    """`fns` with L3's host callbacks, counters, report and host state."""
    return fns._replace(
        spill=lambda state: state._replace(l3=tier.spill(state.l3, state.ring)),
        counters=lambda state: tier.counters(state.l3),
        report=tier.report,
        close=tier.store.close,
        single_device=True,
        host_state=tier.host_state,
        load_host_state=lambda host, replay_state=None: tier.load_host_state(
            host, None if replay_state is None else replay_state.l3
        ),
    )
