"""Legal-action masks: where an env allows only some actions (board games, Jumanji, Pgx's 2048).

A masked env (`EnvSpec.action_mask`) appends its legal-action mask to its flat observations: the
last `num_actions` entries of each observation are nonzero exactly where the action is legal. So
the replay stores each state's mask with its observation, once, and the next state's mask comes
with the next observation (the row the target reads), the real final one included; evaluation,
exported policies and both learners read it from the observation they already hold.

An agent built with `action_mask=True` masks every Q-value it computes from an observation
(`mask_q`): greedy actions, double-Q selection and target maxima range over legal actions only,
in every head and loss (they all read Q through the agent's `q_values`), and the epsilon-greedy
draw picks a uniformly random *legal* action (`agent.exploration`). An illegal action's Q-value
becomes `ILLEGAL_Q`, finite, so that softmax policies (Munchausen's) give it probability 0
without NaNs.

    >>> import jax.numpy as jnp
    >>> obs = jnp.array([[0.5, 0.2, 1.0, 0.0, 1.0]])   # 2 features, then the mask of 3 actions
    >>> legal = legal_actions(obs, 3)
    >>> legal.tolist()
    [[True, False, True]]
    >>> int(jnp.argmax(mask_q(jnp.array([[1.0, 5.0, 2.0]]), legal), -1)[0])
    2
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrl_fast.types import Array

ILLEGAL_Q = -1e30  # far below any return; finite, so that softmax and its log stay finite


def legal_actions(obs: Array, num_actions: int) -> Array:
    """`[..., A]` bool: the legal-action mask a masked env appends to its flat observations
    `[..., D]` (their last `num_actions` entries)."""
    return obs[..., obs.shape[-1] - num_actions :] != 0


def mask_q(q: Array, legal: Array | None) -> Array:
    """`q [..., A]` with the illegal actions' values set to `ILLEGAL_Q` (`legal=None`: all
    legal). A state without any legal action (a trapped Snake, which its env ends at the next
    step) is read unmasked: its mask says nothing, and `ILLEGAL_Q` must never become a target."""
    if legal is None:
        return q
    legal = legal | ~jnp.any(legal, axis=-1, keepdims=True)
    return jnp.where(legal, q, jnp.asarray(ILLEGAL_Q, q.dtype))
