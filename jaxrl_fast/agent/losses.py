"""TD losses over transitions: a loss is a module plugged in by name (`DQNConfig.loss`).

A `Loss(name, rows)` gives each batch row's loss and TD error from the network's outputs:

    rows(out_tm1, a_tm1, r_t, discount_t, out_t_target, out_t_select, q_values, delta)
        -> (loss [B], td [B])

`out_*` are the network's outputs (its value head's: Q-values `[B, A]` for the scalar and
dueling heads) at the sampled observations (online), the next observations (target) and, with
double Q, the next observations (online, under `stop_gradient`; else None); `q_values(out)`
turns an output into Q-values `[B, A]`; `delta` is the Huber threshold (traced). `td` is what
prioritised replay and the `abs_td` metric read. `make_loss` weights the rows (importance
weights, 0 on padding rows) and adds the added terms (the demonstrations' large-margin term,
`agent.margin`).

The library's losses are "mse" (`0.5 td^2`) and "huber" (`optax.huber_loss`) on the one-step or
n-step TD error with double-Q selection, and the distributional heads' losses
(`agent.distributional`: "c51", "qr-dqn", "hl-gauss"); `register(name, loss)` adds one:

    >>> import jax.numpy as jnp
    >>> from jaxrl_fast.agent import losses
    >>> def abs_rows(out_tm1, a, r, d, out_t, out_sel, q_values, delta):   # L1 on the TD error
    ...     td = losses.td_errors(q_values(out_tm1), a, r, d, q_values(out_t))
    ...     return jnp.abs(td), td
    >>> losses.register("doc-l1", losses.Loss("doc-l1", abs_rows))
    >>> losses.get("doc-l1").name
    'doc-l1'
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.agent.sequence_loss import per_item_loss
from jaxrl_fast.config import DQNConfig
from jaxrl_fast.registry import LOSSES
from jaxrl_fast.types import Array, Batch


def td_errors(q_tm1, a_tm1, r_t, discount_t, q_t_target, q_t_select=None):
    """One-step TD errors.

    Args:
      q_tm1: `[B, A]` online Q at the sampled observations.
      a_tm1: `[B]` int actions taken.
      r_t: `[B]` rewards.
      discount_t: `[B]` gamma, or 0 where the episode terminated.
      q_t_target: `[B, A]` target-net Q at the next observations.
      q_t_select: `[B, A]` online Q at the next observations; given, the bootstrap action is its
        argmax (double Q-learning), else the argmax of `q_t_target`.

    Returns:
      `[B]` TD errors `target - q_tm1[a_tm1]`, the target under `stop_gradient`.
    """
    select = q_t_target if q_t_select is None else q_t_select
    a_t = jnp.argmax(select, axis=-1)
    v_t = jnp.take_along_axis(q_t_target, a_t[:, None], axis=-1)[:, 0]
    target = jax.lax.stop_gradient(r_t + discount_t * v_t)
    q_a = jnp.take_along_axis(q_tm1, a_tm1[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return target - q_a


class Loss(NamedTuple):
    """A TD loss: `rows(...) -> (loss [B], td [B])` (module docstring); `head`: the value head
    whose output it reads (None: any head, through `q_values`)."""

    name: str
    rows: Callable[..., tuple[Array, Array]]
    head: str | None = None


def _td_rows(kind: str) -> Callable:
    config = DQNConfig(loss=kind)

    def rows(out_tm1, a_tm1, r_t, discount_t, out_t_target, out_t_select, q_values, delta):
        select = None if out_t_select is None else q_values(out_t_select)
        td = td_errors(q_values(out_tm1), a_tm1, r_t, discount_t, q_values(out_t_target), select)
        return per_item_loss(config, td, delta), td

    return rows


TD_LOSSES = ("mse", "huber")  # the losses on the TD error of Q-values
for _name in TD_LOSSES:
    LOSSES.register(_name, Loss(_name, _td_rows(_name)), builtin=True)
BUILTIN = LOSSES.builtin


def register(name: str, loss: Loss) -> None:
    """Make `loss` available as `DQNConfig(loss=name)` in this process.

    Raises:
      ValueError: `name` is empty or a built-in loss's, or is taken by another loss.
      TypeError: `loss` is not a `Loss`.
    """
    if not isinstance(loss, Loss):
        raise TypeError(f"register({name!r}, ...): expected a losses.Loss, got {type(loss)}.")
    LOSSES.register(name, loss)


names = LOSSES.names
get = LOSSES.get


def _identity(x: Any) -> Any:
    return x


def make_loss(
    config: DQNConfig,
    net: Any,
    margin: float | None = None,
    q_values: Callable[[Any], Array] | None = None,
):
    """The TD loss of `net` for a batch: `(params, target_params, batch, knobs=None,
    margin_weight=0) -> (loss, (td [B], mean Q of the taken actions))`.

    The loss is `config.loss`'s (`get`) per-row loss weighted by `batch.weight` (importance
    weights; 0: padding) and averaged over the valid rows. `knobs` are `(huber delta, gamma)` of
    this update (traced `HParams`; gamma is already in `batch.discount` here); None: the
    config's. With a `margin` (demonstrations, DQfD) it adds `margin_weight` x the large-margin
    term over the batch's demonstration rows (`agent.margin`). `q_values` maps the network's
    output to Q-values (default: the output is the Q-values).
    """
    from jaxrl_fast.agent.margin import margin_term

    loss_rows = get(config.loss).rows
    q_values = q_values or _identity

    def loss_fn(params, target_params, batch: Batch, knobs=None, margin_weight=0.0):
        delta = config.huber_delta if knobs is None else knobs[0]
        out_tm1 = net.apply(params, batch.obs)
        out_t_target = net.apply(target_params, batch.next_obs)
        out_t_select = (
            net.apply(jax.lax.stop_gradient(params), batch.next_obs) if config.double_q else None
        )
        per_item, td = loss_rows(
            out_tm1,
            batch.action,
            batch.reward,
            batch.discount,
            out_t_target,
            out_t_select,
            q_values,
            delta,
        )
        w = batch.weight
        valid = (w > 0).astype(jnp.float32)
        rows = jnp.maximum(jnp.sum(valid), 1.0)
        loss = jnp.sum(w * per_item) / rows
        q_tm1 = q_values(out_tm1)
        q_a = jnp.take_along_axis(q_tm1, batch.action[:, None], -1)[:, 0]
        q_mean = jnp.sum(valid * q_a) / rows
        if margin is not None and batch.demo is not None:
            loss = loss + margin_term(q_tm1, q_a, batch, margin, margin_weight)
        return loss, (td, q_mean)

    return loss_fn
