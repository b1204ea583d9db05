"""The fused loop's data: the seeds' state, the scan carry, per-step and per-chunk metrics.

Seeds are a leading `[S]` axis; a leaf whose axis in `TrainFns.seed_axes` is None is shared by
the seeds (the replay's write cursors, a pool env's state).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.agent.dqn import AgentState, UpdateMetrics
from jaxrl_fast.types import Array, PRNGKey, Transition


class SeedState(NamedTuple):
    """Everything the seeds carry. Leaves have a leading `[S]` axis, except those whose axis in
    `TrainFns.seed_axes` is None (the replay's shared cursors, a pool env's state)."""

    agent: AgentState
    replay: Any
    env_state: Any
    obs: Array  # [S, E, *obs_shape]
    key: PRNGKey  # [S]
    carry: Any = ()  # a recurrent agent's state [S, E, 2, H] (zeros at episode starts); ()


class RunnerState(NamedTuple):
    """The scan carry: the seeds' state plus the shared block counter."""

    seeds: SeedState
    block: Array  # [] int32, training blocks done; -1 while the prefill is pending


class StepStats(NamedTuple):
    """Episodes that ended, summed over envs (and steps): `[S]` float32 each."""

    episode_return: Array
    episode_length: Array
    episodes: Array

    @classmethod
    def zeros(cls, num_seeds: int) -> StepStats:
        zeros = jnp.zeros((num_seeds,), jnp.float32)
        return cls(zeros, zeros, zeros)


class ChunkMetrics(NamedTuple):
    """Per-seed means over one chunk (all `[S]` float32; NaN where no episode ended)."""

    episode_return: Array
    episode_length: Array
    episodes: Array
    loss: Array
    q: Array
    abs_td: Array
    skipped: Array  # updates skipped for non-finite gradients in this chunk
    loss_scale: Array  # loss scale at the chunk's end (1.0 without scaling)
    fp32_fallback: Array  # [S] bool: the compute has switched to fp32
    replay: dict  # the buffer's cumulative counters at the chunk's end (`Buffer.counters`)


def example_transition(spec, carry: Any = None) -> Transition:
    """The `Transition` of one collect step of one seed's `spec.num_envs` envs, as structs;
    `carry` a recurrent agent's state for those envs (None: feed-forward)."""
    e, sds = spec.num_envs, jax.ShapeDtypeStruct
    flag = sds((e,), bool)
    return Transition(
        obs=sds((e, *spec.obs_shape), spec.obs_dtype),
        action=sds((e,), jnp.int32),
        reward=sds((e,), jnp.float32),
        terminated=flag,
        truncated=flag,
        reset=flag,
        carry=None if carry is None else sds(carry.shape, carry.dtype),
    )


def episode_stats(done: Array, info: dict) -> StepStats:
    """Finished episodes' return and length sums and count over the env axis (the last)."""
    return StepStats(
        episode_return=jnp.sum(jnp.where(done, info["episode_return"], 0.0), axis=-1),
        episode_length=jnp.sum(jnp.where(done, info["episode_length"], 0), axis=-1).astype(
            jnp.float32
        ),
        episodes=jnp.sum(done, axis=-1).astype(jnp.float32),
    )


def zero_update_metrics(num_seeds: int) -> UpdateMetrics:
    zeros = jnp.zeros((num_seeds,), jnp.float32)
    return UpdateMetrics(zeros, zeros, zeros, zeros)


def sum_steps(tree: Any) -> Any:
    """Sum a scan's stacked outputs over its steps (the leading axis)."""
    return jax.tree.map(lambda x: jnp.sum(x, axis=0), tree)


def chunk_metrics(
    stats: StepStats, upd: UpdateMetrics, seeds: SeedState, counters: dict, updates: int
) -> ChunkMetrics:
    """A chunk's sums (`updates` gradient steps per seed) as means per episode and per update;
    `counters` the replay's (`Buffer.counters`)."""
    # means over the updates applied (a skipped mixed-precision step reports nothing)
    applied = jnp.where(upd.applied > 0, upd.applied, jnp.nan)
    episodes = jnp.where(stats.episodes > 0, stats.episodes, jnp.nan)
    scale = seeds.agent.loss_scale
    return ChunkMetrics(
        episode_return=stats.episode_return / episodes,
        episode_length=stats.episode_length / episodes,
        episodes=stats.episodes,
        loss=upd.loss / applied,
        q=upd.q / applied,
        abs_td=upd.abs_td / applied,
        skipped=float(updates) - upd.applied,
        loss_scale=scale.scale,
        fp32_fallback=scale.fallback,
        replay=counters,
    )
