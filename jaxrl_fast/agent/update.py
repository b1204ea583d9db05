"""One gradient step of the Q-learner, with the precision policy inside.

The network computes in the policy's dtype, the loss is scaled and the gradients unscaled in
fp32, a step with non-finite gradients is skipped (parameters and optimiser state bitwise
unchanged), and after the fallback the same compiled update computes in fp32 (a `cond` on a
flag shared by all seeds). Data replicas average gradients through the `Exchange`.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import optax

from jaxrl_fast.agent import precision as mp
from jaxrl_fast.agent.state import AgentState, UpdateMetrics
from jaxrl_fast.parallel.exchange import Exchange
from jaxrl_fast.types import Array, Batch


def make_update(
    loss_lowp: Callable,
    loss_fp32: Callable,
    loss_args: Callable,
    optimizer: Callable,
    precision: mp.PrecisionPolicy,
    exchange: Exchange,
) -> Callable:
    """`update(agent, batch, fp32=None, step=None) -> (agent, td [B], UpdateMetrics)`.

    Args:
      loss_lowp: `(params, target_params, batch, *args) -> (loss, (td, q_mean))` computing in
        the policy's dtype; `loss_fp32` the same in fp32 (the fallback's branch).
      loss_args: `(agent) -> tuple`: the loss's traced arguments after the batch.
      optimizer: `hparams -> optax.GradientTransformation`.
      precision: the precision policy.
      exchange: how data replicas share gradients.
    """
    loss_scale = mp.make_loss_scale(precision)
    grads_lowp = mp.scaled_value_and_grad(loss_lowp, loss_scale)
    grads_fp32 = jax.value_and_grad(loss_fp32, has_aux=True)

    def grads(agent: AgentState, batch: Batch, fp32):
        args = (agent.params, agent.target_params, batch, *loss_args(agent))
        if not precision.fallback:
            return grads_lowp(agent.loss_scale, *args)
        return mp.fallback_cond(
            fp32, lambda: grads_fp32(*args), lambda: grads_lowp(agent.loss_scale, *args)
        )

    def update(
        agent: AgentState, batch: Batch, fp32=None, step=None
    ) -> tuple[AgentState, Array, UpdateMetrics]:
        """One gradient step. Returns the new state, `[B]` TD errors and scalar metrics.

        `step` is the update index shared by all seeds and replicas (1-bit Adam's phase).

        With a precision policy that skips non-finite steps, such a step leaves the parameters
        and optimiser state bitwise unchanged, reports `applied=0` with loss, q and abs_td 0, and
        its TD errors may be non-finite (the buffer then leaves those priorities unchanged).
        """
        fp32 = agent.loss_scale.fallback if fp32 is None else fp32
        (loss, (td, q_mean)), g = grads(agent, batch, fp32)
        g = exchange.grads(g)  # the replicas' mean (fp32 exchange), else local
        extra = {"step": step} if exchange.onebit else {}
        tx = optimizer(agent.hparams)
        updates, opt_state = tx.update(g, agent.opt_state, agent.params, **extra)
        params = optax.apply_updates(agent.params, updates)
        scale_state = agent.loss_scale
        metrics = UpdateMetrics(
            loss=loss,
            q=q_mean,
            abs_td=jnp.sum(jnp.abs(td) * batch.weight) / jnp.maximum(jnp.sum(batch.weight > 0), 1),
            applied=jnp.ones((), jnp.float32),
        )
        if precision.skip_nonfinite:
            finite = exchange.all(mp.all_finite(g))
            scale_state = loss_scale.adjust(scale_state, finite, agent.hparams)
            metrics = jax.tree.map(lambda v: jnp.where(finite, v, 0.0), metrics)
        new = agent.replace(
            params=params,
            opt_state=opt_state,
            grad_steps=agent.grad_steps + 1,
            loss_scale=scale_state,
        )
        return new, td, metrics

    return update
