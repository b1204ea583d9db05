"""TD losses over transitions: a loss is a module plugged in by name (`DQNConfig.loss`).

A `Loss(name, rows)` gives each batch row's loss and TD error from one typed input:

    rows(x: LossInput) -> (loss [B], td [B])

`LossInput` holds the network's outputs (its value head's: Q-values `[B, A]` for the scalar and
dueling heads) at the sampled observations (`out_tm1`, online), the next observations
(`out_t`, target) and, with double Q, the next observations again (`out_t_select`, online under
`stop_gradient`; else None), with the batch's actions, rewards and discounts and the Huber
threshold `delta` (traced). Its methods read Q-values from the outputs: `q_tm1()` unmasked (the
taken action's value), `q_t()`, `q_t_select()` and `q_target_tm1()` over the legal actions of
their observations (a masked env, `agent.masks`), `bootstrap_action()` the next state's action.
`td` is what prioritised replay and the `abs_td` metric read. `make_loss` weights the rows
(importance weights, 0 on padding rows) and adds the added terms (the demonstrations'
large-margin term, `agent.margin`).

The library's losses are "mse" (`0.5 td^2`) and "huber" (`optax.huber_loss`) on the one-step or
n-step TD error with double-Q selection, the distributional heads' losses
(`agent.distributional`: "c51", "qr-dqn", "hl-gauss"), and "regression" (`0.5 (r - Q(s, a))^2`
on a target the learner computed, no bootstrap: the rollout learner's lambda-returns, PQN);
`register(name, loss)` adds one:

    >>> import jax.numpy as jnp
    >>> from jaxrl_fast.agent import losses
    >>> def abs_rows(x: losses.LossInput):   # L1 on the TD error
    ...     td = losses.td_errors(x.q_tm1(), x.action, x.reward, x.discount, x.q_t())
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


class LossInput(NamedTuple):
    """One batch as a loss's rows read it (module docstring).

    Attributes:
      out_tm1: the online network's output at the sampled observations.
      action, reward, discount: `[B]` the taken actions (int), the (n-step) rewards and the
        discounts (0 where the episode terminated).
      out_t: the target network's output at the next observations (None for a loss that
        declares `bootstrap=False`).
      out_t_select: with double Q, the online network's output at the next observations under
        `stop_gradient` (else None).
      delta: the Huber threshold (traced).
      to_q: the value head's `output -> Q-values [B, A]`.
      legal_t, legal_tm1: `[B, A]` legal actions at the next and at the sampled observations
        (None: every action).
      target_tm1: the target network's output at the sampled observations, for a loss that
        declares `target_tm1=True` (else None).
      settings: the loss's own traced settings (`Loss.settings`), or None.
    """

    out_tm1: Any
    action: Array
    reward: Array
    discount: Array
    out_t: Any
    out_t_select: Any
    delta: Array
    to_q: Callable[[Any], Array]
    legal_t: Array | None = None
    legal_tm1: Array | None = None
    target_tm1: Any = None
    settings: tuple | None = None

    def q_tm1(self) -> Array:
        """`[B, A]` online Q at the sampled observations, unmasked (a reset row's ignored
        action may be illegal)."""
        return self.to_q(self.out_tm1)

    def q_t(self) -> Array:
        """`[B, A]` target Q at the next observations, over their legal actions."""
        return mask_q(self.to_q(self.out_t), self.legal_t)

    def q_t_select(self) -> Array | None:
        """`[B, A]` online Q at the next observations (double Q), over their legal actions."""
        return (
            None
            if self.out_t_select is None
            else mask_q(self.to_q(self.out_t_select), self.legal_t)
        )

    def q_target_tm1(self) -> Array:
        """`[B, A]` target Q at the sampled observations, over their legal actions."""
        return mask_q(self.to_q(self.target_tm1), self.legal_tm1)

    def bootstrap_action(self) -> Array:
        """`[B]` the next state's action: the argmax of the online Q (double Q) or the
        target's, over the legal actions."""
        select = self.q_t() if self.out_t_select is None else self.q_t_select()
        return jnp.argmax(select, axis=-1)


class Loss(NamedTuple):
    """A TD loss: `rows(LossInput) -> (loss [B], td [B])` (module docstring); `head`: the value
    head whose output it reads (None: any head, through `LossInput.to_q`).

    What a loss needs beyond the common input, declared so that nothing else is computed:
    `bootstrap=False`: it reads no next observation (its target is in `reward`, a return the
    learner computed: the rollout learner's lambda-return); the target and selection passes are
    not computed and `out_t`, `out_t_select` are None. `target_tm1=True`: the target network's
    output at the sampled observations (Munchausen's policy at `s`). `settings(hparams) ->
    tuple`: the loss's own traced settings from the seed's `HParams` (fields declared
    `knob(sweep=True)`).
    """

    name: str
    rows: Callable[..., tuple[Array, Array]]
    head: str | None = None
    target_tm1: bool = False
    settings: Callable[[Any], tuple] | None = None
    bootstrap: bool = True


def _td_rows(kind: str) -> Callable:
    def rows(x: LossInput):
        td = td_errors(x.q_tm1(), x.action, x.reward, x.discount, x.q_t(), x.q_t_select())
        return per_item_loss(DQNConfig(loss=kind), td, x.delta), td

    return rows


def _regression_rows(x: LossInput):
    """`0.5 (r - Q(s, a))^2`: `reward` is the learner's own target (a lambda-return)."""
    q = x.q_tm1()
    td = x.reward - jnp.take_along_axis(q, x.action[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return 0.5 * td**2, td


TD_LOSSES = ("mse", "huber")  # the losses on the TD error of Q-values
for _name in TD_LOSSES:
    LOSSES.register(_name, Loss(_name, _td_rows(_name)), builtin=True)
LOSSES.register("regression", Loss("regression", _regression_rows, bootstrap=False), builtin=True)


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
    q_values = q_values or _identity
    default_hp = None if spec.settings is None else _config_hparams(config)

    streams = getattr(net, "rng_streams", ())

    def loss_fn(params, target_params, batch: Batch, knobs=None, margin_weight=0.0):
        delta = config.huber_delta if knobs is None else knobs[0]
        key = getattr(knobs, "key", None)
        # each pass of a network that draws (noisy layers) its own key; else no key at all
        keys = [None] * 4 if key is None or not streams else list(jax.random.split(key, 4))

        def apply(p, obs, k, role):
            # a network that draws is a QNetwork: its pass's role sets a sampling head's count
            if not streams:
                return net.apply(p, obs)
            r = rngs(streams, k)
            return net.apply(p, obs, role=role, **({} if r is None else {"rngs": r}))

        settings = target_tm1 = legal_tm1 = legal_t = None
        if spec.settings is not None:
            hp = getattr(knobs, "hparams", None)
            settings = spec.settings(default_hp if hp is None else hp)
        if spec.target_tm1:
            target_tm1 = apply(target_params, batch.obs, keys[3], "target")
            legal_tm1 = None if legal is None else legal(batch.obs)
        out_tm1 = apply(params, batch.obs, keys[0], "online")
        out_t = out_t_select = None
        if spec.bootstrap:
            out_t = apply(target_params, batch.next_obs, keys[1], "target")
            if config.double_q:
                out_t_select = apply(
                    jax.lax.stop_gradient(params), batch.next_obs, keys[2], "select"
                )
            legal_t = None if legal is None else legal(batch.next_obs)
        x = LossInput(out_tm1, batch.action, batch.reward, batch.discount, out_t, out_t_select,
                      delta, q_values, legal_t, legal_tm1, target_tm1, settings)  # fmt: skip
        per_item, td = spec.rows(x)
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
