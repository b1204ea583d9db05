"""The DQN agent, assembled from its parts: `make_agent(...) -> Agent`.

The parts, each a module of `jaxrl_fast.agent`: the network (`network.QNetwork`: a torso from
`torsos`, a value head from `heads`), the loss (`losses`: n-step TD with double-Q selection,
or a registered loss; `sequence_loss` for a recurrent network; the demonstrations' `margin`
term added), exploration (`exploration.epsilon_greedy`), the optimiser (`optim`), the update
with the precision policy inside (`update`) and the target update (`target`). Names follow
rlax/acme: `q_tm1` are Q-values at the sampled observation, `q_t` at the next one.

One policy function (`Agent.step`) acts for the fused loop, the evaluation and the conventional
baseline (`Agent.act` is it for a feed-forward agent).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.agent import heads
from jaxrl_fast.agent import losses as _losses
from jaxrl_fast.agent import precision as mp
from jaxrl_fast.agent.dense import rngs
from jaxrl_fast.agent.exploration import epsilon_greedy
from jaxrl_fast.agent.losses import make_loss, td_errors
from jaxrl_fast.agent.margin import MarginSpec, margin_weight
from jaxrl_fast.agent.masks import legal_actions, mask_q
from jaxrl_fast.agent.optim import make_optimizer, optimizer_of
from jaxrl_fast.agent.sequence_loss import SequenceSpec, make_sequence_loss
from jaxrl_fast.agent.state import AgentState, LossKnobs, UpdateMetrics
from jaxrl_fast.agent.target import update_target
from jaxrl_fast.agent.update import make_update
from jaxrl_fast.config import DQNConfig, ReplayConfig, ScheduleConfig
from jaxrl_fast.config.hparams import HParams, hparams_from_parts
from jaxrl_fast.parallel.exchange import Exchange
from jaxrl_fast.types import Array, Params, PRNGKey

__all__ = [
    "Agent",
    "AgentState",
    "UpdateMetrics",
    "epsilon_greedy",
    "make_agent",
    "make_optimizer",
    "td_errors",
    "update_target",
]


class Agent(NamedTuple):
    """The agent's pure functions, built once by `make_agent`.

    `step(agent, key, obs, carry, epsilon, fp32=None) -> (actions, carry)` is the one policy of
    every agent, recurrent or not: `carry` is the recurrent state `[E, 2, H]` (`()` for a
    feed-forward agent), `initial_carry(E)` its value at episode starts and
    `end_episodes(carry, reset [..., E])` zeroes it where an episode has just ended;
    `act(agent, key, obs, epsilon, fp32=None) -> actions` is `step` for a feed-forward agent.
    `q_values(params, obs, fp32=False) -> [B, A]` are the value head's Q-values.
    `eval_step` is `step` as the evaluation acts: with the network's exploration noise (noisy
    layers) off; epsilon stays the caller's.
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
    eval_step: Callable[..., tuple[Array, Any]] = None  # type: ignore[assignment]

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


def _make_losses(
    config: DQNConfig, networks: tuple, sequence, demo, update_gamma, legal=None
) -> tuple:
    """`(loss in the policy's dtype, loss in fp32, agent -> the loss's traced arguments)`: over
    sequences (a recurrent network), else over transitions (with the large-margin term when
    there are demonstrations); `legal(obs) -> [B, A]` masks the Q-values (a masked env)."""
    if sequence is not None:
        made = [make_sequence_loss(config, net, *sequence) for net in networks]
    else:
        q_values = getattr(networks[0], "value_head", heads.SCALAR).q_values
        made = [make_loss(config, net, demo and demo[0], q_values, legal) for net in networks]

    def loss_args(agent: AgentState) -> tuple:
        hp = agent.hparams
        knobs = LossKnobs(hp.huber_delta, update_gamma(agent.grad_steps, hp), hp, agent.rng)
        if demo is None:
            return (knobs,)
        return (knobs, margin_weight(demo[1], demo[2], agent.grad_steps))

    return made[0], made[1], loss_args


def _check_parts(
    network: nn.Module,
    config: DQNConfig,
    recurrent: bool,
    sequence,
    action_mask: bool = False,
    num_actions: int = 0,
    demo=None,
):
    """Refuse, before anything is traced, parts that do not fit together (and untyped parts);
    returns the masked env's `legal(obs) -> [B, A]` (None for an env without masks)."""
    _check_typed("sequence", sequence, SequenceSpec)
    _check_typed("demo", demo, MarginSpec)
    _losses.get(config.loss)  # an unknown name: a ValueError listing the known ones
    head = getattr(network, "value_head", heads.SCALAR)
    if recurrent and action_mask:
        raise ValueError(
            "a recurrent network (NetworkConfig.lstm > 0) does not take legal-action masks yet; "
            "this env has them (EnvSpec.action_mask): use lstm=0."
        )
    if recurrent and sequence is None:
        raise ValueError(
            "make_agent: a recurrent network (lstm > 0) trains on sequences; pass "
            "sequence=SequenceSpec(burn_in, length, n_step)."
        )
    if recurrent and (config.loss not in _losses.TD_LOSSES or head.name not in heads.Q_HEADS):
        raise ValueError(
            f"a recurrent network (NetworkConfig.lstm > 0) trains with the sequence loss over "
            f"Q-values: DQNConfig.loss={config.loss!r} must be one of {_losses.TD_LOSSES} and "
            f"NetworkConfig.head={head.name!r} one of {heads.Q_HEADS}."
        )
    if recurrent and getattr(network, "rng_streams", ()):
        raise ValueError(
            f"NetworkConfig.dense={network.dense_layer!r} draws noise, which the recurrent "
            f"loss does not pass; use dense='dense' with lstm > 0."
        )
    loss = _losses.get(config.loss)
    if head.loss is not None and config.loss != head.loss:
        raise ValueError(
            f"NetworkConfig.head={head.name!r} trains with its own loss: set "
            f"DQNConfig.loss={head.loss!r} (got {config.loss!r})."
        )
    if loss.head is not None and head.name != loss.head:
        raise ValueError(
            f"DQNConfig.loss={config.loss!r} reads the {loss.head!r} head's output: set "
            f"NetworkConfig.head={loss.head!r} (got {head.name!r})."
        )
    return partial(legal_actions, num_actions=num_actions) if action_mask else None


def _check_typed(name: str, value: Any, kind: type) -> None:
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"make_agent: {name}= expects a {kind.__name__} or None, got {value!r}.")


def make_agent(
    config: DQNConfig,
    network: nn.Module,
    num_actions: int,
    *,
    learning_rate=None,
    precision: mp.PrecisionPolicy | None = None,
    exchange: Exchange | None = None,
    sequence: SequenceSpec | None = None,
    demo: MarginSpec | None = None,
    hparams: HParams | None = None,
    update_gamma=None,
    clip: bool | None = None,
    action_mask: bool = False,
) -> Agent:
    """Assemble the DQN agent's functions from its parts.

    Args:
      config: DQN settings (`loss` names the loss: `agent.losses`).
      network: maps `[B, *obs]` to its value head's output in the policy's dtype
        (`QNetwork.for_precision`); with a fallback, `network.clone(dtype=float32)` is fp32.
      num_actions: size of the action space.
      learning_rate: `(grad_step, hparams) -> lr` (`Schedules.learning_rate`), a float, or
        None (`HParams.learning_rate`, constant).
      precision, exchange: the precision policy (default fp32) and the data replicas'
        exchange (None: one replica; with replicas `update` runs in the mesh's program).
      sequence: the stored sequences a recurrent `network` (`lstm > 0`) trains on.
      demo: the demonstrations' large-margin term (`agent.margin`).
      hparams: the `HParams` `init` stores by default (traced: `update` reads the state's).
      update_gamma: `(grad_step, hparams) -> gamma` of the recurrent loss (default: phase 0).
      clip: compile the global-norm clip (default: whether `hparams` clips).
      action_mask: the observations end in legal-action masks (`agent.masks`): Q-values from
        observations are masked, exploration draws legal actions.

    Functions computing Q-values take an optional shared `fp32` flag (`[]` bool; None: the
    agent's own), so the switch stays a real branch under the seed vmap. Raises
    ValueError for an unregistered loss or head, or parts that do not fit together.
    """
    precision = precision or mp.PrecisionPolicy()
    exchange = exchange or Exchange()
    default_hp = hparams or _default_hparams(config, precision)
    clip = bool(math.isfinite(float(default_hp.max_grad_norm))) if clip is None else clip
    recurrent = getattr(network, "lstm", 0) > 0
    legal = _check_parts(network, config, recurrent, sequence, action_mask, num_actions, demo)
    optimizer = optimizer_of(config, learning_rate, exchange, precision, clip)
    loss_scale = mp.make_loss_scale(precision)
    network_fp32 = network.clone(dtype=jnp.float32) if precision.fallback else network
    to_q = getattr(network, "value_head", heads.SCALAR).q_values
    loss_lowp, loss_fp32, loss_args = _make_losses(
        config, (network, network_fp32), sequence, demo, update_gamma or _first_gamma, legal
    )
    streams = getattr(network, "rng_streams", ())
    forward = _forward(network, network_fp32, precision, recurrent, streams)

    initial_carry = network.initial_carry if recurrent else lambda num_envs: ()
    explore = _explorer(legal, num_actions)

    def q_values(params: Params, obs: Array, fp32=False) -> Array:
        """`[B, A]` float32 Q-values (masked, recurrent: from the episode start; `fp32`)."""
        out = forward(params, obs, initial_carry(obs.shape[0]) if recurrent else None, fp32)
        return mask_q(to_q(out[0] if recurrent else out), legal and legal(obs))

    def init(key: PRNGKey, example_obs: Array, hparams: HParams | None = None) -> AgentState:
        hp = jax.tree.map(jnp.asarray, default_hp if hparams is None else hparams)
        extra = (initial_carry(example_obs.shape[0]),) if recurrent else ()
        key, rng = jax.random.split(key) if streams else (key, None)  # the updates' own key
        params = network_fp32.init(key, example_obs, *extra)
        return AgentState(params, params, optimizer(hp).init(params), jnp.zeros((), jnp.int32),
                          loss_scale.init(hp), hp, rng)  # fmt: skip

    def policy(
        agent: AgentState, key: PRNGKey, obs: Array, carry: Any, epsilon: Array, fp32=None,
        noise: bool = True,
    ):  # fmt: skip
        """Epsilon-greedy actions `[E]` and the next recurrent state (`()` stays `()`); a network
        that draws noise draws it from `key` (`noise=False`: its mean function)."""
        fp32 = agent.loss_scale.fallback if fp32 is None else fp32
        noise_key = None
        if streams and noise:
            key, noise_key = jax.random.split(key)
        out = forward(agent.params, obs, carry, fp32, noise_key)
        out, carry = out if recurrent else (out, carry)
        return explore(key, to_q(out), obs, epsilon), carry

    act = _feed_forward(policy, recurrent)
    update = make_update(loss_lowp, loss_fp32, loss_args, optimizer, precision, exchange)
    update = _drawing(update) if streams else update  # a fresh key for each update's draws
    return Agent(init, act, update, update_target, q_values, precision, policy, initial_carry,
                 recurrent, partial(policy, noise=False))  # fmt: skip


def _explorer(legal, num_actions: int) -> Callable:
    """`explore(key, q, obs, epsilon) -> actions`: epsilon-greedy over the legal actions of
    `obs` (`legal` None: every action)."""

    def explore(key: PRNGKey, q: Array, obs: Array, epsilon: Array) -> Array:
        allowed = None if legal is None else legal(obs)
        return epsilon_greedy(key, mask_q(q, allowed), epsilon, num_actions, allowed)

    return explore


def _forward(network, network_fp32, precision: mp.PrecisionPolicy, recurrent: bool, streams):
    """`forward(params, obs, carry, fp32, key=None)`: the network's output (and carry), in the
    policy's dtype or in fp32 after the fallback; `key` feeds the network's random streams."""

    def forward(params: Params, obs: Array, carry: Any, fp32, key=None) -> Any:
        args = (params, obs, carry) if recurrent else (params, obs)
        r = rngs(streams, key)
        kw = {} if r is None else {"rngs": r}
        if not precision.fallback:
            return network.apply(*args, **kw)
        fns = (partial(network_fp32.apply, **kw), partial(network.apply, **kw))
        return mp.fallback_cond(fp32, *fns, *args)

    return forward


def _feed_forward(policy: Callable, recurrent: bool) -> Callable:
    """`Agent.act`: `policy` without a carry (a recurrent agent is refused)."""

    def act(agent: AgentState, key: PRNGKey, obs: Array, epsilon: Array, fp32=None) -> Array:
        """Epsilon-greedy actions `[E]` int32 for observations `[E, *obs]` (feed-forward)."""
        if recurrent:
            raise ValueError(
                "Agent.act is the feed-forward policy; a recurrent agent acts with "
                "Agent.step(agent, key, obs, carry, epsilon) -> (actions, carry)."
            )
        return policy(agent, key, obs, (), epsilon, fp32)[0]

    return act


def _drawing(update: Callable) -> Callable:
    """`update` for a network that draws: the loss reads `agent.rng` (`LossKnobs.key`), so it
    gets one half of a split and the new state keeps the other."""

    def drawing(agent: AgentState, batch, fp32=None, step=None):
        rng, key = jax.random.split(agent.rng)
        new, td, metrics = update(agent.replace(rng=key), batch, fp32, step)
        return new.replace(rng=rng), td, metrics

    return drawing
