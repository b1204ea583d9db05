"""Q-learning: TD targets (double-Q optional), Huber/MSE loss, Adam with clipping, target net.

Names follow rlax/acme: `q_tm1` are Q-values at the sampled observation, `q_t` at the next one.
The precision policy (`jaxrl_fast.precision`) sits inside `update`: the network computes in the
policy's dtype, the loss is scaled and the gradients unscaled in fp32, a step with non-finite
gradients is skipped, and after the fallback the same compiled update computes in fp32.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from jaxrl_fast import precision as mp
from jaxrl_fast.config import DQNConfig, ReplayConfig, ScheduleConfig
from jaxrl_fast.hparams import HParams, hparams_from_parts
from jaxrl_fast.parallel.exchange import Exchange
from jaxrl_fast.parallel.onebit import onebit_adam
from jaxrl_fast.sequence_loss import make_sequence_loss as _make_sequence_loss
from jaxrl_fast.sequence_loss import per_item_loss as _per_item_loss
from jaxrl_fast.types import Array, Batch, Params, PRNGKey


@struct.dataclass
class AgentState:
    """Learner state of one seed."""

    params: Params
    target_params: Params
    opt_state: optax.OptState
    grad_steps: Array  # [] int32
    loss_scale: mp.LossScaleState  # scale, overflow counters, fp32 fallback flag
    hparams: HParams  # this seed's traced hyperparameters (`jaxrl_fast.hparams`)


class UpdateMetrics(NamedTuple):
    """Scalar metrics of one gradient step (float32; all 0 for a skipped step)."""

    # mean over the batch's valid rows (weight > 0) of w_i * l(td_i), w the importance weights
    # (1 without PER): the textbook PER loss (Schaul et al. 2016, as Dopamine), so the step size
    # does not depend on the batch's weights summing to anything
    loss: Array
    q: Array  # mean Q of the taken actions over the batch's valid rows
    abs_td: Array  # mean of w_i * |td_i| over the batch's valid rows
    applied: Array  # 1.0 if the step was applied, 0.0 if skipped (non-finite gradients)


class Agent(NamedTuple):
    """The agent's pure functions, built once by `make_agent`.

    `act(agent, key, obs, epsilon, fp32=None) -> actions` is the feed-forward policy;
    `step(agent, key, obs, carry, epsilon, fp32=None) -> (actions, carry)` is the policy of
    every agent, recurrent or not: `carry` is the recurrent state `[E, 2, H]` (`()` for a
    feed-forward agent), `initial_carry(E)` its value at episode starts and
    `end_episodes(carry, reset [..., E])` zeroes it where an episode has just ended.
    """

    init: Callable[[PRNGKey, Array], AgentState]
    act: Callable[..., Array]
    update: Callable[..., tuple[AgentState, Array, UpdateMetrics]]
    update_target: Callable[[AgentState], AgentState]
    q_values: Callable[..., Array]
    precision: mp.PrecisionPolicy
    step: Callable[..., tuple[Array, Any]] = None  # type: ignore[assignment]
    initial_carry: Callable[[int], Any] = None  # type: ignore[assignment]
    recurrent: bool = False

    def end_episodes(self, carry: Any, reset: Array) -> Any:
        """`carry` with the state of the envs whose step was a reset step zeroed (the next
        observation starts an episode); `()` stays `()`."""
        return jax.tree.map(
            lambda c: jnp.where(reset.reshape(reset.shape + (1,) * (c.ndim - reset.ndim)), 0.0, c),
            carry,
        )

    def stored_carry(self, carry: Any) -> Any:
        """What a replay row keeps of the acting state: a recurrent agent's `carry` (R2D2's
        stored state), None for a feed-forward agent."""
        return carry if self.recurrent else None


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


def make_optimizer(
    config: DQNConfig, learning_rate, exchange: Exchange | None = None, max_norm=None
) -> optax.GradientTransformation:
    """Adam with global-norm clipping before it; 1-bit Adam over data replicas when `exchange`
    compresses (clipping then acts on each replica's local gradient). `max_norm` (traced)
    overrides `config.max_grad_norm` (a seed that does not clip among seeds that do has `inf`:
    its gradients pass bitwise unchanged); with neither, no clip."""
    if exchange is not None and exchange.onebit:
        adam = onebit_adam(
            learning_rate,
            axis=exchange.axis,
            warmup_updates=exchange.warmup_updates,
            eps=config.adam_eps,
        )
    else:
        adam = optax.adam(learning_rate, eps=config.adam_eps)
    if max_norm is None:
        max_norm = config.max_grad_norm
    if max_norm is None:
        return adam
    return optax.chain(optax.clip_by_global_norm(max_norm), adam)


def _make_loss(config: DQNConfig, net: nn.Module, margin: float | None = None):
    """The TD loss of `net` for a batch: `(params, target_params, batch, margin_weight=0) ->
    (loss, (td [B], mean Q of the taken actions))`, rows weighted by `batch.weight` (0:
    padding). With a `margin` (demonstrations, DQfD) it adds `margin_weight` x the mean over
    the batch's demonstration rows of `max_a [Q(s, a) + margin 1(a != a_E)] - Q(s, a_E)`."""

    def loss_fn(params, target_params, batch: Batch, knobs=None, margin_weight=0.0):
        # knobs: (huber delta, gamma) of this update (traced `HParams`; gamma is already in
        # `batch.discount` here); None: the config's
        delta = config.huber_delta if knobs is None else knobs[0]
        q_tm1 = net.apply(params, batch.obs)
        q_t_target = net.apply(target_params, batch.next_obs)
        q_t_select = (
            net.apply(jax.lax.stop_gradient(params), batch.next_obs) if config.double_q else None
        )
        td = td_errors(q_tm1, batch.action, batch.reward, batch.discount, q_t_target, q_t_select)
        per_item = _per_item_loss(config, td, delta)
        w = batch.weight
        valid = (w > 0).astype(jnp.float32)
        rows = jnp.maximum(jnp.sum(valid), 1.0)
        loss = jnp.sum(w * per_item) / rows
        q_a = jnp.take_along_axis(q_tm1, batch.action[:, None], -1)[:, 0]
        q_mean = jnp.sum(valid * q_a) / rows
        if margin is not None and batch.demo is not None:
            other = jnp.arange(q_tm1.shape[-1])[None, :] != batch.action[:, None]
            gap = jnp.max(q_tm1 + margin * other, axis=-1) - q_a  # >= 0
            demo = batch.demo.astype(jnp.float32)
            loss = loss + margin_weight * jnp.sum(demo * gap) / jnp.maximum(jnp.sum(demo), 1.0)
        return loss, (td, q_mean)

    return loss_fn


def epsilon_greedy(key: PRNGKey, q: Array, epsilon: Array, num_actions: int) -> Array:
    """Epsilon-greedy actions from Q-values `[..., A]`: int32 `[...]`."""
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    # One draw for both choices (each random-number call is a loop XLA compiles apart).
    bits = jax.random.bits(key, (2, *greedy.shape), jnp.uint32)
    explore = (bits[0] >> 8).astype(jnp.float32) * 2.0**-24 < epsilon  # uniform on [0, 1)
    random = (bits[1] % num_actions).astype(jnp.int32)  # bias <= num_actions / 2**32
    return jnp.where(explore, random, greedy)


def _loss_for(config: DQNConfig, net: nn.Module, sequence, demo):
    """The loss of `net`: over sequences (a recurrent net), else over transitions (with the
    large-margin term when there are demonstrations)."""
    if sequence is not None:
        return _make_sequence_loss(config, net, *sequence)
    return _make_loss(config, net, demo[0] if demo is not None else None)


def _margin_weight(demo, agent: AgentState) -> tuple:
    """The large-margin loss's weight at this update, as an extra loss argument (`()`
    without demonstrations): `weight`, decaying linearly to 0 over `decay_updates`."""
    if demo is None:
        return ()
    _, weight, decay_updates = demo
    left = 1.0 - agent.grad_steps.astype(jnp.float32) / max(decay_updates, 1)
    return (weight * jnp.clip(left, 0.0, 1.0),)


def _default_hparams(config: DQNConfig, precision: mp.PrecisionPolicy) -> HParams:
    """The `HParams` of `config`, the default schedules and replay, and the loss-scale
    settings of the precision policy."""
    hp = hparams_from_parts(config, ScheduleConfig(), ReplayConfig())
    return hp._replace(
        initial_scale=np.float32(precision.scale),
        growth_interval=np.int32(precision.growth_interval),
        min_scale=np.float32(precision.min_scale),
        fallback_overflows=np.int32(precision.fallback_overflows),
        fallback_window=np.int32(precision.fallback_window),
    )


def _first_gamma(count, hp: HParams):
    """The default gamma of the recurrent loss: the schedule's first phase."""
    del count
    return hp.gamma_values[0]


def _optimizer_of(config: DQNConfig, learning_rate, exchange: Exchange, precision, clip: bool):
    """`hp -> optimiser` of a seed's hyperparameters (its structure never depends on them);
    `learning_rate` a `(count, hp) -> lr` schedule, a float, or None (`hp.learning_rate`)."""
    if learning_rate is None or not callable(learning_rate):
        constant = learning_rate

        def learning_rate(count, hp):
            return jnp.asarray(hp.learning_rate if constant is None else constant, jnp.float32)

    def optimizer(hp: HParams) -> optax.GradientTransformation:
        lr = lambda count: learning_rate(count, hp)  # noqa: E731
        if clip:
            tx = make_optimizer(config, lr, exchange, hp.max_grad_norm)
        else:  # no seed clips: no clip transformation
            tx = make_optimizer(dataclasses.replace(config, max_grad_norm=None), lr, exchange)
        return mp.skip_nonfinite(tx, exchange.all) if precision.skip_nonfinite else tx

    return optimizer


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


def make_agent(
    config: DQNConfig,
    network: nn.Module,
    num_actions: int,
    *,
    learning_rate=None,
    precision: mp.PrecisionPolicy | None = None,
    exchange: Exchange | None = None,
    sequence: tuple[int, int, int] | None = None,
    demo: tuple[float, float, int] | None = None,
    hparams: HParams | None = None,
    update_gamma=None,
    clip: bool | None = None,
) -> Agent:
    """Build the DQN agent's functions.

    Args:
      config: DQN settings.
      network: a module mapping `[B, *obs]` to `[B, A]` float32 Q-values, computing in the
        policy's dtype (`QNetwork.for_precision`); with a fallback, `network.clone(dtype=float32)`
        is the fp32 branch.
      num_actions: size of the action space.
      learning_rate: `(grad_step, hparams) -> lr` (`Schedules.learning_rate`), or a float;
        default: `HParams.learning_rate`, constant.
      precision: the resolved precision policy; default fp32 with no loss scale.
      exchange: how data replicas share gradients (`parallel.Exchange`); None: one replica.
        With replicas, `update` runs inside the mesh's per-device program.
      sequence: for a recurrent `network` (`lstm > 0`), `(burn_in, sequence_length, n_step)`
        of the `SequenceBatch`es `update` takes (`replay/sequence.py`).
      demo: `(margin, weight, decay_updates)`: the large-margin loss on a batch's
        demonstration rows (`Batch.demo`, `DemoConfig`), weighted by `weight`, decaying
        linearly to 0 over the first `decay_updates` updates.
      hparams: the `HParams` `init` puts in the state by default (`hparams_of(config)`);
        default: `config`'s, the schedules' and replay's defaults. `update` reads the learning
        rate, clip norm, Huber delta and (sequences) gamma from the state's, `update_target`
        its `tau`: they are data, so agents with other values share one compiled program.
      update_gamma: `(grad_step, hparams) -> gamma` for the recurrent loss's in-window targets
        (`Schedules.update_gamma`); default: the first gamma phase.
      clip: compile the global-norm clip (its norm is `HParams.max_grad_norm`, `inf` for a
        seed that does not clip); default: whether `hparams` clips (`hparams.Kinds.clip`).

    The functions that compute Q-values take an optional `fp32` flag (`[]` bool): compute in fp32
    instead of the policy's dtype. None uses the agent's own fallback flag. Under a seed `vmap`
    pass a flag shared by all seeds, so the switch stays a real branch (DESIGN §3).
    """
    precision = precision or mp.PrecisionPolicy()
    exchange = exchange or Exchange()
    default_hp = hparams or _default_hparams(config, precision)
    clip = bool(math.isfinite(float(default_hp.max_grad_norm))) if clip is None else clip
    optimizer = _optimizer_of(config, learning_rate, exchange, precision, clip)
    update_gamma = update_gamma or _first_gamma
    loss_scale = mp.make_loss_scale(precision)
    network_fp32 = network.clone(dtype=jnp.float32) if precision.fallback else network
    recurrent = getattr(network, "lstm", 0) > 0
    if recurrent and sequence is None:
        raise ValueError(
            "make_agent: a recurrent network (lstm > 0) trains on sequences; pass "
            "sequence=(burn_in, sequence_length, n_step)."
        )

    def _use_fp32(agent: AgentState, fp32):
        return agent.loss_scale.fallback if fp32 is None else fp32

    def _apply(params: Params, obs: Array, carry: Any, fp32) -> Any:
        args = (params, obs, carry) if recurrent else (params, obs)
        if not precision.fallback:
            return network.apply(*args)
        return jax.lax.cond(fp32, network_fp32.apply, network.apply, *args)

    def q_values(params: Params, obs: Array, fp32=False) -> Array:
        """`[B, A]` float32 Q-values, in the policy's dtype or (if `fp32`) in fp32 (a recurrent
        network: from the episode-start state)."""
        if recurrent:
            return _apply(params, obs, network.initial_carry(obs.shape[0]), fp32)[0]
        return _apply(params, obs, None, fp32)

    def initial_carry(num_envs: int) -> Any:
        return network.initial_carry(num_envs) if recurrent else ()

    def init(key: PRNGKey, example_obs: Array, hparams: HParams | None = None) -> AgentState:
        hp = jax.tree.map(jnp.asarray, default_hp if hparams is None else hparams)
        if recurrent:
            params = network_fp32.init(key, example_obs, initial_carry(example_obs.shape[0]))
        else:
            params = network_fp32.init(key, example_obs)
        return AgentState(
            params=params,
            target_params=params,
            opt_state=optimizer(hp).init(params),
            grad_steps=jnp.zeros((), jnp.int32),
            loss_scale=loss_scale.init(hp),
            hparams=hp,
        )

    def act(agent: AgentState, key: PRNGKey, obs: Array, epsilon: Array, fp32=None) -> Array:
        """Epsilon-greedy actions `[E]` int32 for observations `[E, *obs]` (feed-forward)."""
        if recurrent:
            raise ValueError(
                "Agent.act is the feed-forward policy; a recurrent agent acts with "
                "Agent.step(agent, key, obs, carry, epsilon) -> (actions, carry)."
            )
        q = q_values(agent.params, obs, _use_fp32(agent, fp32))
        return epsilon_greedy(key, q, epsilon, num_actions)

    def policy(agent: AgentState, key: PRNGKey, obs: Array, carry: Any, epsilon: Array, fp32=None):
        """Epsilon-greedy actions `[E]` and the next recurrent state (`()` stays `()`)."""
        out = _apply(agent.params, obs, carry, _use_fp32(agent, fp32))
        q, carry = out if recurrent else (out, carry)
        return epsilon_greedy(key, q, epsilon, num_actions), carry

    grads_lowp = mp.scaled_value_and_grad(_loss_for(config, network, sequence, demo), loss_scale)
    grads_fp32 = jax.value_and_grad(_loss_for(config, network_fp32, sequence, demo), has_aux=True)

    def _grads(agent: AgentState, batch: Batch, fp32):
        hp = agent.hparams
        knobs = (hp.huber_delta, update_gamma(agent.grad_steps, hp))
        args = (agent.params, agent.target_params, batch, knobs, *_margin_weight(demo, agent))
        if not precision.fallback:
            return grads_lowp(agent.loss_scale, *args)
        return jax.lax.cond(
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
        (loss, (td, q_mean)), grads = _grads(agent, batch, _use_fp32(agent, fp32))
        grads = exchange.grads(grads)  # the replicas' mean (fp32 exchange), else local
        extra = {"step": step} if exchange.onebit else {}
        tx = optimizer(agent.hparams)
        updates, opt_state = tx.update(grads, agent.opt_state, agent.params, **extra)
        params = optax.apply_updates(agent.params, updates)
        scale_state = agent.loss_scale
        metrics = UpdateMetrics(
            loss=loss,
            q=q_mean,
            abs_td=jnp.sum(jnp.abs(td) * batch.weight) / jnp.maximum(jnp.sum(batch.weight > 0), 1),
            applied=jnp.ones((), jnp.float32),
        )
        if precision.skip_nonfinite:
            finite = exchange.all(mp.all_finite(grads))
            scale_state = loss_scale.adjust(scale_state, finite, agent.hparams)
            metrics = jax.tree.map(lambda v: jnp.where(finite, v, 0.0), metrics)
        new = agent.replace(
            params=params,
            opt_state=opt_state,
            grad_steps=agent.grad_steps + 1,
            loss_scale=scale_state,
        )
        return new, td, metrics

    return Agent(
        init=init,
        act=act,
        update=update,
        update_target=update_target,
        q_values=q_values,
        precision=precision,
        step=policy,
        initial_carry=initial_carry,
        recurrent=recurrent,
    )
