"""Demonstration rows (DQfD, Hester et al. 2018): a fixed set of n-step transitions that a
share of every batch is drawn from (`DemoConfig`).

`demo_rows` turns recorded env steps (a `Transition` with leading `[T, E]`, the layout the loop
adds) into the same n-step rows training stores, by running them through L1 staging and an L2
ring (`staging`, `ring`): a demonstration's return, bootstrap discount and next observation
follow the same episode rules as every other row. The rows live in the replay state, shared by
all seeds (seed axis None), and `mix` puts `k` of them, drawn uniformly, in the last `k` rows
of a batch with `index = -1` (not an L2 row: PER leaves their priorities alone), weight 1 and
`demo = True` (the agent's large-margin loss applies to them only).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.replay import staging
from jaxrl_fast.replay.ring import make_ring
from jaxrl_fast.types import Array, Batch, PRNGKey, Transition


class DemoRows(NamedTuple):
    """n-step demonstration transitions, leading `[N]` (numpy on the host, device arrays in the
    replay state)."""

    obs: Array
    action: Array
    reward: Array  # n-step return
    discount: Array  # gamma^k, 0 where the episode terminated
    next_obs: Array


def demo_rows(steps: Transition, *, gamma: float, n_step: int) -> DemoRows:
    """The n-step rows of recorded steps `[T, E, ...]` (numpy or device arrays), as numpy.

    Every step that is a transition becomes a row once its bootstrap observation is in the
    ring: staging commits step `t` at slot `t + n_step - 1`, so the last `2 n_step - 1` or so
    steps of each env (whose window or bootstrap was not complete) and reset steps do not.

    Raises:
      ValueError: fewer than `n_step + 1` steps, or none of them a transition.
    """
    steps = Transition(*(np.asarray(x) for x in steps[:6]))
    num_steps, num_envs = steps.reward.shape[:2]
    if num_steps < n_step + 1:
        raise ValueError(
            f"demonstrations: {num_steps} steps per env are too few for n_step={n_step}; "
            f"expected at least {n_step + 1}."
        )
    obs_shape, obs_dtype = steps.obs.shape[2:], steps.obs.dtype
    ring = make_ring(num_steps * num_envs, num_envs, obs_shape, obs_dtype, n_step)
    example = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), steps)

    @jax.jit
    def fill(steps: Transition):
        def add(carry, step):
            window, state = carry
            window, row = staging.stage(window, step, gamma)
            return (window, ring.add(state, row)), None

        start = (staging.init(n_step, example), ring.init())
        (_, state), _ = jax.lax.scan(add, start, steps)
        flat = jnp.arange(num_steps * num_envs)
        return state.offset.reshape(-1), ring.gather(state, flat)

    offset, rows = fill(steps)
    # no wrap-around: a row's bootstrap slot (slot + offset) must have been written
    slot = np.arange(num_steps * num_envs) // num_envs
    keep = (np.asarray(rows.weight) > 0) & (slot + np.asarray(offset) <= num_steps - 1)
    if not keep.any():
        raise ValueError("demonstrations: none of the recorded steps is a transition.")
    return DemoRows(
        obs=np.asarray(rows.obs)[keep],
        action=np.asarray(rows.action)[keep],
        reward=np.asarray(rows.reward)[keep],
        discount=np.asarray(rows.discount)[keep],
        next_obs=np.asarray(rows.next_obs)[keep],
    )


def mix(rows: DemoRows, batch: Batch, key: PRNGKey, k: int) -> Batch:
    """`batch` with its last `k` rows replaced by demonstration rows drawn uniformly (with
    replacement), `index = -1`, `weight = 1`, `demo = True` there (False elsewhere)."""
    size = batch.action.shape[0]
    n = rows.action.shape[0]
    pick = (jax.random.bits(key, (k,), jnp.uint32) % jnp.uint32(n)).astype(jnp.int32)
    got = jax.tree.map(lambda x: x[pick], rows)
    extra = Batch(
        obs=got.obs,
        action=got.action,
        reward=got.reward,
        discount=got.discount,
        next_obs=got.next_obs,
        weight=jnp.ones((k,), jnp.float32),
        index=jnp.full((k,), -1, jnp.int32),
        demo=jnp.ones((k,), bool),
    )
    batch = batch._replace(demo=jnp.zeros((size,), bool))
    return jax.tree.map(
        lambda a, b: jnp.concatenate([a[: size - k], b.astype(a.dtype)], axis=0), batch, extra
    )
