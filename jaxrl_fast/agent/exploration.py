"""Exploration: actions from Q-values. `epsilon_greedy` is the library's rule; the loop, the
evaluation and the conventional baseline all act through the agent's one policy
(`Agent.step`), which applies it."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_fast.types import Array, PRNGKey


def epsilon_greedy(
    key: PRNGKey, q: Array, epsilon: Array, num_actions: int, legal: Array | None = None
) -> Array:
    """Epsilon-greedy actions from Q-values `[..., A]`: int32 `[...]`. With `legal [..., A]`
    (bool), both the greedy and the random action are legal ones (the random one uniform over
    them); `q` is then expected masked already (`agent.masks.mask_q`)."""
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    # One draw for both choices (each random-number call is a loop XLA compiles apart).
    bits = jax.random.bits(key, (2, *greedy.shape), jnp.uint32)
    explore = (bits[0] >> 8).astype(jnp.float32) * 2.0**-24 < epsilon  # uniform on [0, 1)
    if legal is None:
        random = (bits[1] % num_actions).astype(jnp.int32)  # bias <= num_actions / 2**32
    else:  # the r-th legal action, r uniform below their count
        count = jnp.maximum(jnp.sum(legal, axis=-1, dtype=jnp.int32), 1)
        r = (bits[1] % count.astype(jnp.uint32)).astype(jnp.int32)
        below = jnp.cumsum(legal, axis=-1, dtype=jnp.int32) <= r[..., None]
        random = jnp.sum(below, axis=-1, dtype=jnp.int32)  # legal actions at or below: r
        random = jnp.where(jnp.any(legal, axis=-1), random, greedy)
    return jnp.where(explore, random, greedy)
