"""The agent a run trains: `agent_of(config, spec, precision, ...)`, the one mapping from a
`TrainConfig` to `make_agent`'s parts, shared by the fused loop (`loop/parts.py`) and the
conventional baseline (`baseline/parts.py`), so that the two build the same agent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jaxrl_fast.agent.dqn import Agent, make_agent
from jaxrl_fast.agent.margin import MarginSpec
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.agent.precision import PrecisionPolicy
from jaxrl_fast.agent.schedules import Schedules
from jaxrl_fast.agent.sequence_loss import SequenceSpec
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.config.hparams import hparams_of
from jaxrl_fast.parallel.exchange import Exchange

if TYPE_CHECKING:
    from jaxrl_fast.envs import EnvSpec

__all__ = ["agent_of"]


def agent_of(
    config: TrainConfig,
    spec: EnvSpec,
    precision: PrecisionPolicy,
    schedules: Schedules,
    *,
    conv_impl: str,
    clip: bool | None = None,
    exchange: Exchange | None = None,
) -> Agent:
    """The agent of `config` on envs of `spec`: its network in `precision` (convolutions by
    `conv_impl`, `seeds.resolve_choices`), the learning rate and gamma of `schedules`, the
    sequences of a recurrent network and the demonstrations' margin term when the config has
    them. `clip` and `exchange` as `make_agent`'s (the compiled clip; the data replicas')."""
    replay, demo = config.replay, config.demo
    network = QNetwork.for_precision(
        config.network, spec, precision, config.algo, conv_impl=conv_impl
    )
    sequence = (
        SequenceSpec(replay.burn_in, replay.sequence_length, replay.n_step)
        if replay.sequence_length
        else None
    )
    margin = (
        MarginSpec(demo.margin, demo.weight, int(demo.decay_fraction * config.total_updates))
        if demo.active
        else None
    )
    extra: dict[str, Any] = {} if exchange is None else {"exchange": exchange}
    return make_agent(
        config.dqn,
        network,
        spec.num_actions,
        learning_rate=schedules.learning_rate,
        hparams=hparams_of(config),
        update_gamma=schedules.update_gamma,
        clip=clip,
        precision=precision,
        sequence=sequence,
        demo=margin,
        action_mask=spec.action_mask,
        **extra,
    )
