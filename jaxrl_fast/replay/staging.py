"""L1 staging: a per-env window of the last `n` steps that turns raw steps into n-step rows.

Each `stage` call appends one env step (`Transition`, leading `[E]`) and commits the oldest
step of the window, whose next `n - 1` steps are now known, as a `StoredRow`:

- its return sums `gamma^i r_{t+i}` over the steps up to and including the first one that ends
  the episode (terminated or truncated), at most `n` of them (`L` steps);
- it bootstraps from the observation `L` rows later, with discount `gamma^L`, or not at all
  (discount 0) if the episode terminated within those steps. After a truncation the row `L`
  later is the reset step that holds the real final observation (next-step auto-reset, see
  `envs/base.py`), so truncation bootstraps from the right state;
- a reset step (its action was ignored) is not a transition: `valid = False`.

Two episodes are never mixed: the sum stops at the first step that ends an episode. The window
starts filled with invalid rows, so the first `n - 1` commits are invalid placeholders; this
keeps every commit unconditional (no per-step `cond`) and the L2 slot of step `t` at `t`.
With `n = 1` a step is committed at once with `reward = r`, `discount = gamma * (1 - term)`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.replay.ring import StoredRow
from jaxrl_fast.types import Transition


class StagingState(NamedTuple):
    """The last `n` steps per env, oldest first (all leaves `[n, E, ...]`)."""

    window: Transition


def init(n: int, example: Transition) -> StagingState:
    """An empty window of `n` steps for a `Transition` with leading `[E]` (arrays or structs).

    Placeholder steps are reset steps: they commit as invalid rows.
    """
    window = jax.tree.map(lambda x: jnp.zeros((n, *x.shape), x.dtype), example)
    return StagingState(window._replace(reset=jnp.ones((n, *example.reset.shape), bool)))


def stage(state: StagingState, step: Transition, gamma: float) -> tuple[StagingState, StoredRow]:
    """Append `step` (leading `[E]`) and commit the window's oldest step.

    Returns:
      The new window and the committed `StoredRow` (leading `[E]`) of the step `n - 1` steps
      before `step`.
    """
    window = jax.tree.map(
        lambda w, x: jnp.concatenate([w[1:], x[None].astype(w.dtype)], axis=0), state.window, step
    )
    n = window.reward.shape[0]
    ends = jnp.logical_or(window.terminated, window.truncated)  # [n, E]
    # A step counts if no earlier step in the window ended the episode.
    ended_before = jnp.cumsum(ends, axis=0) - ends.astype(jnp.int32)
    counts = ended_before == 0  # [n, E]
    if isinstance(gamma, (int, float)):
        powers = jnp.asarray([gamma**i for i in range(n)], jnp.float32)[:, None]
    else:  # a traced gamma (`HParams`): the powers in float32
        powers = jnp.power(jnp.asarray(gamma, jnp.float32), jnp.arange(n, dtype=jnp.float32))
        powers = powers[:, None]
    ret = jnp.sum(jnp.where(counts, powers * window.reward.astype(jnp.float32), 0.0), axis=0)
    steps = jnp.sum(counts, axis=0).astype(jnp.int32)  # L in [1, n]
    terminal = jnp.any(jnp.logical_and(counts, window.terminated), axis=0)
    discount = jnp.where(terminal, 0.0, jnp.power(jnp.float32(gamma), steps.astype(jnp.float32)))
    row = StoredRow(
        obs=window.obs[0],
        action=window.action[0].astype(jnp.int32),
        reward=ret,
        discount=discount.astype(jnp.float32),
        offset=steps,
        valid=jnp.logical_not(window.reset[0]),
    )
    return StagingState(window), row
