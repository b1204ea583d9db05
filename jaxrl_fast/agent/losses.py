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
n-step TD error with double-Q selection, the distributional heads' losses
(`agent.distributional`: "c51", "qr-dqn", "hl-gauss"), and "regression" (`0.5 (r - Q(s, a))^2`
on a target the learner computed, no bootstrap: the rollout learner's lambda-returns, PQN);
`register(name, loss)` adds one:

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

from jaxrl_fast.agent.dense import rngs
from jaxrl_fast.agent.masks import mask_q
from jaxrl_fast.agent.sequence_loss import per_item_loss
from jaxrl_fast.config import DQNConfig
from jaxrl_fast.config.registry import LOSSES
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
    whose output it reads (None: any head, through `q_values`).

    `bootstrap=False`: the loss reads no next observation (its target is in `batch.reward`, a
    return the learner computed: the rollout learner's lambda-return); the target and selection
    passes are then not computed and `rows` gets None for `out_t_target` and `out_t_select`.

    Two optional inputs, each passed to `rows` as a keyword only when the loss asks for it:
    `target_tm1=True` gives `target_tm1=` the target network's output at the sampled
    observations (Munchausen's policy at `s`); `settings(hparams) -> tuple` picks the loss's own
    traced settings from the seed's `HParams` (fields declared `knob(sweep=True)` in
    `DQNConfig`), passed as `settings=`.
    """

    name: str
    rows: Callable[..., tuple[Array, Array]]
    head: str | None = None
    target_tm1: bool = False
    settings: Callable[[Any], tuple] | None = None
    bootstrap: bool = True


def _td_rows(kind: str) -> Callable:
    config = DQNConfig(loss=kind)

    def rows(out_tm1, a_tm1, r_t, discount_t, out_t_target, out_t_select, q_values, delta):
        select = None if out_t_select is None else q_values(out_t_select)
        td = td_errors(q_values(out_tm1), a_tm1, r_t, discount_t, q_values(out_t_target), select)
        return per_item_loss(config, td, delta), td

    return rows


def _regression_rows(out_tm1, a_tm1, r_t, discount_t, out_t_target, out_t_select, q_values, delta):
    """`0.5 (r_t - Q(s, a))^2`: `r_t` is the learner's own target (a lambda-return)."""
    del discount_t, out_t_target, out_t_select, delta
    q = q_values(out_tm1)
    td = r_t - jnp.take_along_axis(q, a_tm1[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return 0.5 * td**2, td


TD_LOSSES = ("mse", "huber")  # the losses on the TD error of Q-values
for _name in TD_LOSSES:
    LOSSES.register(_name, Loss(_name, _td_rows(_name)), builtin=True)
LOSSES.register("regression", Loss("regression", _regression_rows, bootstrap=False), builtin=True)
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


def _config_hparams(config: DQNConfig):
    """The `HParams` of `config` with the other sections' defaults (a loss called without
    knobs reads its settings from these)."""
    from jaxrl_fast.config import ReplayConfig, ScheduleConfig
    from jaxrl_fast.config.hparams import hparams_from_parts

    return hparams_from_parts(config, ScheduleConfig(), ReplayConfig())


class _Masked:
    """A network output with the legal actions of its observations: the loss's `q_values`
    masks its Q-values (`agent.masks`); every other attribute is the output's own, so a loss's
    rows read it as they read the output."""

    def __init__(self, out: Any, legal: Array) -> None:
        self.out, self.legal = out, legal

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


def _masking(q_values: Callable[[Any], Array]) -> Callable[[Any], Array]:
    def masked(out: Any) -> Array:
        if isinstance(out, _Masked):
            return mask_q(q_values(out.out), out.legal)
        return q_values(out)

    return masked


def make_loss(
    config: DQNConfig,
    net: Any,
    margin: float | None = None,
    q_values: Callable[[Any], Array] | None = None,
    legal: Callable[[Array], Array] | None = None,
):
    """The TD loss of `net` for a batch: `(params, target_params, batch, knobs=None,
    margin_weight=0) -> (loss, (td [B], mean Q of the taken actions))`.

    The loss is `config.loss`'s (`get`) per-row loss weighted by `batch.weight` (importance
    weights; 0: padding) and averaged over the valid rows. `knobs` are this update's
    `state.LossKnobs` (Huber delta, gamma, the seed's `HParams`; traced; gamma is already in
    `batch.discount` here); None: the config's. With a `margin` (demonstrations, DQfD) it adds
    `margin_weight` x the large-margin term over the batch's demonstration rows
    (`agent.margin`). `q_values` maps the network's output to Q-values (default: the output is
    the Q-values). `legal(obs) -> [B, A]` (a masked env, `agent.masks`): the outputs at the
    next observations (and the target's at the sampled ones) are read with their observations'
    legal actions, so selection, target maxima, soft policies and the margin range over legal
    actions only, whatever the loss; the taken action's value is read unmasked.
    """
    from jaxrl_fast.agent.margin import margin_term

    spec = get(config.loss)
    q_values = _masking(q_values or _identity)
    default_hp = None if spec.settings is None else _config_hparams(config)

    streams = getattr(net, "rng_streams", ())

    def loss_fn(params, target_params, batch: Batch, knobs=None, margin_weight=0.0):
        delta = config.huber_delta if knobs is None else knobs[0]
        key = getattr(knobs, "key", None)
        # each pass of a network that draws (noisy layers) its own key; else no key at all
        keys = [None] * 4 if key is None or not streams else list(jax.random.split(key, 4))

        def apply(p, obs, k, role, masked=True):
            # a network that draws is a QNetwork: its pass's role sets a sampling head's count
            if not streams:
                out = net.apply(p, obs)
            else:
                r = rngs(streams, k)
                out = net.apply(p, obs, role=role, **({} if r is None else {"rngs": r}))
            return out if legal is None or not masked else _Masked(out, legal(obs))

        extra = {}
        if spec.settings is not None:
            hp = getattr(knobs, "hparams", None)
            hp = default_hp if hp is None else hp
            extra["settings"] = spec.settings(hp)
        if spec.target_tm1:
            extra["target_tm1"] = apply(target_params, batch.obs, keys[3], "target")
        # the taken action's value unmasked: a reset row's ignored action may be illegal
        out_tm1 = apply(params, batch.obs, keys[0], "online", masked=False)
        out_t_target = out_t_select = None
        if spec.bootstrap:
            out_t_target = apply(target_params, batch.next_obs, keys[1], "target")
            if config.double_q:
                out_t_select = apply(
                    jax.lax.stop_gradient(params), batch.next_obs, keys[2], "select"
                )
        per_item, td = spec.rows(
            out_tm1,
            batch.action,
            batch.reward,
            batch.discount,
            out_t_target,
            out_t_select,
            q_values,
            delta,
            **extra,
        )
        w = batch.weight
        valid = (w > 0).astype(jnp.float32)
        rows = jnp.maximum(jnp.sum(valid), 1.0)
        loss = jnp.sum(w * per_item) / rows
        q_tm1 = q_values(out_tm1)
        q_a = jnp.take_along_axis(q_tm1, batch.action[:, None], -1)[:, 0]
        q_mean = jnp.sum(valid * q_a) / rows
        if margin is not None and batch.demo is not None:
            q_legal = q_tm1 if legal is None else mask_q(q_tm1, legal(batch.obs))
            loss = loss + margin_term(q_legal, q_a, batch, margin, margin_weight)
        return loss, (td, q_mean)

    return loss_fn
