"""Lambda-returns over a rollout, the targets of the rollout learner (PQN).

`lambda_returns(reward, terminated, truncated, next_value, gamma, lam)` computes, backward over
the time axis (the first),

    G_t = r_t + gamma_t ((1 - lam_t) v_{t+1} + lam_t G_{t+1}),    G_T = v_T

with `v_{t+1} = max_a Q(s_{t+1}, a)` (`next_value[t]`), `gamma_t = 0` where step t terminated the
episode (no bootstrap) and `lam_t = 0` where it truncated it (bootstrap from the episode's real
final observation, whose value `next_value[t]` is, and never from the next episode's G). So a
return never crosses an episode boundary. It is `rlax.lambda_returns(r, gamma (1 - terminated),
v, lam (1 - truncated))` with the truncation kept apart (the test's oracle).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_fast.types import Array

__all__ = ["lambda_returns"]


def lambda_returns(
    reward: Array, terminated: Array, truncated: Array, next_value: Array, gamma, lam
) -> Array:
    """`[T, ...]` lambda-returns (module docstring); inputs `[T, ...]`, `gamma` and `lam`
    scalars (traced) in [0, 1]. Float32, and no gradient flows into them."""
    reward = reward.astype(jnp.float32)
    next_value = jax.lax.stop_gradient(next_value.astype(jnp.float32))
    discount = jnp.where(terminated, 0.0, jnp.asarray(gamma, jnp.float32))
    lam_t = jnp.where(truncated, 0.0, jnp.asarray(lam, jnp.float32))

    def back(g_next, step):
        r, d, lam_step, v = step
        g = r + d * ((1.0 - lam_step) * v + lam_step * g_next)
        return g, g

    _, returns = jax.lax.scan(
        back, next_value[-1], (reward, discount, lam_t, next_value), reverse=True
    )
    return returns
