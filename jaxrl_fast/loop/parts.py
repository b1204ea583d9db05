"""The parts a fused loop is composed of, built once from a resolved run.

`make_parts(run, kinds)` builds the schedules, the data replicas' exchange, the agent and one
seed's data store (the learner's: `loop.learners`; the replay buffer for "replay"); the loop
(`loop.make_train`) and its extensions (`loop.extensions`) read them and never rebuild them.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxrl_fast.agent.build import agent_of
from jaxrl_fast.agent.dqn import Agent
from jaxrl_fast.agent.schedules import Schedules, make_schedules
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.config.hparams import Kinds
from jaxrl_fast.config.registry import LEARNERS
from jaxrl_fast.envs.seeded import SeededEnv
from jaxrl_fast.loop.resolve import ResolvedRun
from jaxrl_fast.parallel.exchange import Exchange, make_exchange
from jaxrl_fast.replay import Buffer


class LoopParts(NamedTuple):
    """What a loop and its extensions are built from.

    Attributes:
      run: the resolved run (config, env, precision, seed-loop choices, demonstrations).
      config: `run.config`.
      env: `run.env`, the training envs of all seeds.
      schedules: epsilon, gamma and learning-rate schedules of the seeds' `HParams`.
      exchange: how data replicas share learning (inactive with one replica).
      agent: the agent's functions.
      buffer: one seed's data store (the learner's `store`: a replay buffer, or the rollout
        learner's store of the block's steps).
      kinds: the schedule kinds and clipping compiled into the program.
    """

    run: ResolvedRun
    config: TrainConfig
    env: SeededEnv
    schedules: Schedules
    exchange: Exchange
    agent: Agent
    buffer: Buffer
    kinds: Kinds


def make_parts(run: ResolvedRun, kinds: Kinds) -> LoopParts:
    """The parts of `run`'s loop; `kinds` the schedule kinds and clipping to compile."""
    config, spec = run.config, run.env.spec
    schedules = make_schedules(config, kinds)
    exchange = make_exchange(config.parallel, config.total_updates)
    agent = agent_of(
        config,
        spec,
        run.precision,
        schedules,
        conv_impl=run.choices.conv_impl,
        clip=kinds.clip,
        exchange=exchange,
    )
    buffer = LEARNERS.get(config.learner).store(run, agent)
    return LoopParts(run, config, run.env, schedules, exchange, agent, buffer, kinds)
