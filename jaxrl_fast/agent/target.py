"""The target network's update: a Polyak step, or a copy (`tau = 1`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_fast.agent.state import AgentState


def update_target(agent: AgentState) -> AgentState:
    """Polyak step `tau * online + (1 - tau) * target` with the seed's `tau`; `tau = 1` copies
    (bitwise)."""
    tau = agent.hparams.tau
    return agent.replace(
        target_params=jax.tree.map(
            lambda p, t: jnp.where(tau >= 1.0, p, tau * p + (1.0 - tau) * t),
            agent.params,
            agent.target_params,
        )
    )
