"""The rollout learner (`TrainConfig.learner="rollout"`): PQN's Q(lambda) without replay or a
target network (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning").

A training block is a rollout: `T = train_frequency // num_envs` collect steps of every env
(the same collect step as the replay learner's: epsilon-greedy through the agent's one policy),
each step stored in the block's store (`rollout_store`: `T x num_envs` rows, no replay). Then,
per seed:

1. the online network's `max_a Q(s_{t+1}, a)` on every next observation of the rollout (the
   step's successor row; the observation after the last step for the last; a truncated step's
   successor is its episode's real final observation, by the env's next-step auto-reset);
2. the lambda-returns over the rollout (`agent.returns.lambda_returns`: `td_lambda`, each
   step's gamma; no bootstrap past a termination, no lambda past a truncation);
3. `updates_per_block // num_minibatches` epochs, each a fresh permutation of the rollout's
   rows split into `num_minibatches` minibatches (`minibatch_indices`), one update each of the
   agent's loss on (obs, action, target = the lambda-return): `DQNConfig.loss="regression"`,
   which reads no next observation. Reset steps (the step after an episode's end, whose action
   the env ignored) are rows of weight 0.

The agent, the network (with `NetworkConfig.layer_norm`, PQN's), the optimiser (RAdam by
`DQNConfig.optimizer`), the precision policy, the schedules, the seeds' `HParams`, the data
replicas' exchange and the loop extensions are the replay learner's. The target network is kept
and copied as configured, and never read.

Its knobs are its own config section, `TrainConfig.algo.rollout` (`RolloutConfig`:
`td_lambda`, `num_minibatches`; `--algo.rollout.td-lambda` on the command line), and its checks
of a config (`learning_starts=0`, minibatches that divide the rollout, no replay options) are
its `Learner.check`, run when the config is made.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.agent import losses
from jaxrl_fast.agent.dqn import Agent, UpdateMetrics
from jaxrl_fast.agent.returns import lambda_returns
from jaxrl_fast.config.fields import config_class, is_int, is_num, knob, require
from jaxrl_fast.config.registry import LEARNERS
from jaxrl_fast.config.sections import register_section
from jaxrl_fast.loop.extension import Hooks
from jaxrl_fast.loop.learners import Learner
from jaxrl_fast.loop.parts import LoopParts
from jaxrl_fast.loop.resolve import ResolvedRun
from jaxrl_fast.loop.state import SeedState, example_transition, sum_steps
from jaxrl_fast.parallel.seeds import seed_vmap
from jaxrl_fast.replay import Buffer
from jaxrl_fast.types import Array, Batch, PRNGKey, Transition

__all__ = ["ROLLOUT", "Rollout", "minibatch_indices", "rollout_store", "rollout_targets"]


class Rollout(NamedTuple):
    """The rollout learner's store: the block's steps `[T, E, ...]` (one seed) and the write
    cursor (shared by the seeds: they step in lockstep)."""

    steps: Transition
    cursor: Array


def _whole_rollout(state: Rollout, key: PRNGKey, hparams: Any = None) -> Batch:
    del state, key, hparams
    raise ValueError(
        "the rollout learner's store is read whole by its learner (loop.rollout), not sampled."
    )


def rollout_store(run: ResolvedRun, agent: Agent) -> Buffer:
    """One seed's store of one rollout: `train_frequency // num_envs` steps of every env, each
    step written at the cursor (`Buffer.add`); the rollout learner reads it whole."""
    config, spec = run.config, run.env.spec
    if losses.get(config.dqn.loss).bootstrap:
        raise ValueError(
            f"TrainConfig.learner='rollout' trains on the lambda-returns it computes: set "
            f"DQNConfig.loss='regression' (got {config.dqn.loss!r})."
        )
    if agent.recurrent:
        raise ValueError("TrainConfig.learner='rollout' trains a feed-forward network: lstm=0.")
    length = config.collect_steps_per_block
    example = example_transition(spec)

    def init() -> Rollout:
        steps = jax.tree.map(lambda s: jnp.zeros((length, *s.shape), s.dtype), example)
        return Rollout(steps, jnp.zeros((), jnp.int32))

    def add(state: Rollout, step: Transition, gamma=None) -> Rollout:
        del gamma  # the returns take each step's gamma when the rollout is learned from
        steps = jax.tree.map(lambda buf, x: buf.at[state.cursor].set(x), state.steps, step)
        return Rollout(steps, (state.cursor + 1) % length)

    def nothing(state, index, td, hparams=None):
        del index, td, hparams
        return state

    axes = Rollout(jax.tree.map(lambda _: 0, example), None)
    return Buffer(init, add, _whole_rollout, nothing, lambda s: jnp.ones((), bool), seed_axes=axes)


def minibatch_indices(key: PRNGKey, rows: int, num_minibatches: int, epochs: int) -> Array:
    """`[epochs, num_minibatches, rows // num_minibatches]` row indices: each epoch a fresh
    permutation of `range(rows)`, cut into minibatches (every row once per epoch)."""
    perms = jax.vmap(lambda k: jax.random.permutation(k, rows))(jax.random.split(key, epochs))
    return perms.reshape(epochs, num_minibatches, rows // num_minibatches)


def make_rollout_learn(parts: LoopParts, hooks: Hooks) -> Callable:
    """`learn(seeds, fp32, block) -> (seeds, UpdateMetrics summed over the block)` (module
    docstring)."""
    agent, config, schedules = parts.agent, parts.config, parts.schedules
    length, upb = config.collect_steps_per_block, config.updates_per_block
    minibatches = config.algo.rollout.num_minibatches
    epochs = upb // minibatches
    seeds_fn = parts.run.choices.seeds_fn
    update = seeds_fn(agent.update, (0, 0, None, None), 0)
    targets = seeds_fn(rollout_targets(agent, schedules), (0, 0, 0, None, None), 0)
    pick = seed_vmap(lambda tree, idx: jax.tree.map(lambda x: x[idx], tree), (0, 0), 0)

    def learn(seeds: SeedState, fp32: Array, block: Array) -> tuple[SeedState, UpdateMetrics]:
        first = block * upb  # updates done before this block's
        split = jax.vmap(jax.random.split)(seeds.key)
        key, key_perm = split[:, 0], split[:, 1]
        first_step = config.prefill_steps + block * length  # the rollout's first collect step
        rows = targets(seeds.agent, seeds.replay.steps, seeds.obs, first_step, fp32)
        order = jax.vmap(minibatch_indices, (0, None, None, None))(
            key_perm, rows.action.shape[1], minibatches, epochs
        )  # [S, epochs, minibatches, rows per minibatch]
        order = jnp.moveaxis(order.reshape(order.shape[0], upb, -1), 1, 0)  # [upb, S, rows]

        def one(agent_state, j_idx):
            j, idx = j_idx
            batch = pick(rows, idx)  # the loss reads no next observation: none is gathered
            batch = batch._replace(next_obs=batch.obs)
            agent_state, _, metrics = update(agent_state, batch, fp32, first + j)
            return hooks.after_update(agent_state, first + j + 1), metrics

        agent_state, metrics = jax.lax.scan(one, seeds.agent, (jnp.arange(upb), order))
        return seeds._replace(agent=agent_state, key=key), sum_steps(metrics)

    return learn


def rollout_targets(agent: Agent, schedules) -> Callable:
    """`(agent, steps [T, E, ...], last_obs [E, ...], first_step, fp32) -> Batch [T * E]` of one
    seed: each row's observation, action and lambda-return (in `reward`; `discount` 0), weight
    0 on reset steps."""

    def targets(agent_state, steps: Transition, last_obs: Array, first_step, fp32) -> Batch:
        length, e = steps.action.shape
        next_obs = jnp.concatenate([steps.obs[1:], last_obs[None]], axis=0)
        flat = next_obs.reshape(length * e, *next_obs.shape[2:])
        q_next = agent.q_values(agent_state.params, flat, fp32)
        v_next = jnp.max(q_next, axis=-1).reshape(length, e)
        hp = agent_state.hparams
        index = first_step + jnp.arange(length)
        gamma = jax.vmap(schedules.collect_gamma, (0, None))(index, hp)[:, None]
        g = lambda_returns(
            steps.reward,
            steps.terminated,
            steps.truncated,
            v_next,
            gamma,
            hp.algo["rollout"]["td_lambda"],
        )
        n = length * e
        return Batch(
            obs=steps.obs.reshape(n, *steps.obs.shape[2:]),
            action=steps.action.reshape(n),
            reward=g.reshape(n),
            discount=jnp.zeros((n,), jnp.float32),
            next_obs=None,  # not read ("regression"); `learn` fills in `obs` per minibatch
            weight=jnp.where(steps.reset, 0.0, 1.0).reshape(n).astype(jnp.float32),
            index=jnp.full((n,), -1, jnp.int32),
        )

    return targets


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class RolloutConfig:
    """The rollout learner's settings: `TrainConfig.algo.rollout` (module docstring).

    Attributes:
      td_lambda: lambda of the lambda-returns (0: one-step targets, 1: Monte Carlo returns cut
        at the rollout's end).
      num_minibatches: minibatches per epoch (a divisor of the rollout's `train_frequency`
        rows and of `updates_per_block`, epochs x minibatches).
    """

    td_lambda: float = knob(0.65, sweep=True, resume=True)
    num_minibatches: int = 1

    def __post_init__(self) -> None:
        lam, m = self.td_lambda, self.num_minibatches
        require(self, "td_lambda", is_num(lam) and 0 <= lam <= 1, "a float in [0, 1]")
        require(self, "num_minibatches", is_int(m) and m > 0, "a positive int")


def check_config(cfg: Any) -> None:
    """The rollout learner's checks of a `TrainConfig` that names it."""
    if cfg.learning_starts:
        raise ValueError(
            f"TrainConfig.learning_starts={cfg.learning_starts} is not allowed with "
            "learner='rollout'; expected 0 (it learns from each rollout as it ends: no "
            "prefill)."
        )
    m = cfg.algo.rollout.num_minibatches
    if cfg.updates_per_block % m or cfg.train_frequency % m:
        raise ValueError(
            f"RolloutConfig.num_minibatches={m} is not allowed with learner='rollout'; "
            f"expected a divisor of train_frequency={cfg.train_frequency} (the rollout's "
            f"rows) and of updates_per_block={cfg.updates_per_block} (epochs x "
            "minibatches)."
        )
    replay = cfg.replay
    replayed = replay.sequence_length or replay.prioritised or replay.on_host
    if replayed or replay.n_step != 1 or cfg.demo.active:
        raise ValueError(
            "TrainConfig.learner='rollout' learns from its rollouts, not from a replay "
            "buffer: ReplayConfig.sequence_length must be 0, ReplayConfig.prioritised "
            "False, ReplayConfig.l3 'off', ReplayConfig.n_step 1 (its lambda-returns are its "
            "multi-step targets: RolloutConfig.td_lambda) and DemoConfig.source empty."
        )


def with_num_envs(cfg: Any, num_envs: int) -> dict[str, Any]:
    """`TrainConfig.with_num_envs`'s changes for a rollout: it keeps its steps per env, and its
    minibatches stay divisors (the greatest common divisor with the new rollout's rows)."""
    tf = num_envs * (cfg.train_frequency // cfg.env.num_envs)
    m = math.gcd(cfg.algo.rollout.num_minibatches, tf)
    epochs = cfg.updates_per_block // cfg.algo.rollout.num_minibatches
    return {
        "train_frequency": tf,
        "learning_starts": 0,
        "updates_per_block": epochs * m,
        "algo": {"rollout": {"num_minibatches": m}},
    }


register_section("rollout", RolloutConfig)
ROLLOUT = Learner(
    "rollout",
    rollout_store,
    make_rollout_learn,
    replay=False,
    check=check_config,
    with_num_envs=with_num_envs,
)
LEARNERS.register("rollout", ROLLOUT, builtin=True)
