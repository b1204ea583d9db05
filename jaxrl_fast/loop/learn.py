"""The replay learner (`TrainConfig.learner="replay"`, `loop.learners`): every env step goes into
the replay buffer of `ReplayConfig`; the learning half of a training block is
`updates_per_block` x (sample -> update -> priorities)."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxrl_fast.agent import losses
from jaxrl_fast.agent.dqn import Agent, UpdateMetrics
from jaxrl_fast.config.registry import LEARNERS
from jaxrl_fast.loop.extension import Hooks
from jaxrl_fast.loop.learners import Learner
from jaxrl_fast.loop.parts import LoopParts
from jaxrl_fast.loop.resolve import ResolvedRun
from jaxrl_fast.loop.state import SeedState, example_transition, sum_steps
from jaxrl_fast.parallel.seeds import seed_vmap
from jaxrl_fast.replay import Buffer, make_buffer
from jaxrl_fast.types import Array


def make_learn(parts: LoopParts, hooks: Hooks) -> Callable:
    """`learn(seeds, fp32, block) -> (seeds, UpdateMetrics summed over the block)` for all
    seeds. Every gradient step is followed by the extensions' `after_update` hooks, given
    the number of updates done (shared by the seeds)."""
    agent, buffer = parts.agent, parts.buffer
    replay_sample = seed_vmap(buffer.sample, (buffer.seed_axes, 0, 0), 0)
    replay_priorities = seed_vmap(
        buffer.update_priorities, (buffer.seed_axes, 0, 0, 0), buffer.seed_axes
    )
    update = parts.run.choices.seeds_fn(agent.update, (0, 0, None, None), 0)
    upb = parts.config.updates_per_block

    def learn_step(seeds: SeedState, fp32: Array, step: Any) -> tuple[SeedState, UpdateMetrics]:
        split = jax.vmap(jax.random.split)(seeds.key)
        key, key_sample = split[:, 0], split[:, 1]
        hp = seeds.agent.hparams
        batch = replay_sample(seeds.replay, key_sample, hp)
        agent_state, td, metrics = update(seeds.agent, batch, fp32, step)
        replay = replay_priorities(seeds.replay, batch.index, td, hp)
        agent_state = hooks.after_update(agent_state, step + 1)
        return seeds._replace(agent=agent_state, replay=replay, key=key), metrics

    def learn(seeds: SeedState, fp32: Array, block: Array) -> tuple[SeedState, UpdateMetrics]:
        first = block * upb  # updates done before this block's
        if upb == 1:
            return learn_step(seeds, fp32, first)
        seeds, metrics = jax.lax.scan(
            lambda s, j: learn_step(s, fp32, first + j), seeds, jnp.arange(upb)
        )
        return seeds, sum_steps(metrics)

    return learn


def replay_store(run: ResolvedRun, agent: Agent) -> Buffer:
    """One seed's replay buffer, as `run.config.replay` describes it."""
    config, spec = run.config, run.env.spec
    if not losses.get(config.dqn.loss).bootstrap:
        raise ValueError(
            f"DQNConfig.loss={config.dqn.loss!r} reads a return the learner computes, which the "
            "replay learner does not: use it with TrainConfig.learner='rollout', or a TD loss."
        )
    return make_buffer(
        config.replay,
        example_transition(spec, agent.stored_carry(agent.initial_carry(spec.num_envs))),
        gamma=config.dqn.gamma,
        num_seeds=config.num_seeds,
        sync_every=config.collect_steps_per_block,
        updates_per_sync=config.updates_per_block,
        total_updates=config.total_updates,
        seed=config.seed,
        frame_stack=spec.frame_stack,
        demos=run.demos,  # read when the run was resolved; None without demonstrations
        demo_rows_per_batch=config.demo_rows_per_batch,
    )


REPLAY = Learner("replay", replay_store, make_learn)
LEARNERS.register("replay", REPLAY, builtin=True)
