"""The fused training loop: `make_train(config) -> TrainFns(init, run_chunk, evaluate)`.

The loop has its schedule in its shape, written once for every env kind, agent and
extension:

    init      = reset envs, build agents and replay; block counter = -1 (prefill pending)
    run_chunk = the prefill when the counter says it is pending (the first chunk), then
                loop(iteration, blocks_per_chunk)
    prefill   = loop(collect_step, prefill_steps)
    iteration = loop(collect_step, collect_steps_per_block); the learner's learning half
                (`loop.learners`, by `TrainConfig.learner`: the replay learner's
                updates_per_block x (sample -> update), or the rollout learner's lambda-returns
                and epochs of minibatches); the target update when the block index says so
    collect_step: epsilon(t); act (per seed, through the agent's one policy); step the envs of
                all seeds (`SeededEnv`); the reward the agent learns from; add to the
                learner's store (the replay buffer, or the rollout's)

Every loop has a trip count fixed at compile time, and the only `cond` of the loop itself is the
prefill's, once per chunk: XLA:GPU checks a loop of unknown length, and a `cond`'s predicate, on
the host at every iteration. The target update is a select on the shared block counter. The
prefill and the blocks each compile the collect step, and a block's phases sit behind
optimisation barriers; with threefry lowered straight-line on the CPU (`cpu_lowering`) the CPU
compile is level with the dynamic-trip loop's (`benchmarks/experiments/ab-quick-issue33-*.md`,
docs/results.md "Compile time"). The `cond`s left in a run's
program guard expensive work (`tests/loop/test_trip_counts.py` names them): the L3 tier's host
callbacks, local SGD's and 1-bit Adam's collectives, and the opt-in fp32 fallback.

Whatever a run adds (reward shaping, env variants and curricula, data replicas, the replay's host
callbacks, the precision fallback, a user's own piece) is a loop extension
(`loop.extension.Extension`, the library's in `loop.extensions`) whose hooks the loop folds over;
the loop itself names no feature.

Seeds are a leading `[S]` axis. Replay add / sample / priorities are vmapped over the seeds (the
replay's write cursors are shared, `Buffer.seed_axes`); acting and the gradient update run as
`SeedChoices.seed_loop` says (vmapped, or one seed after another). The block counter and the
fp32-fallback flag are shared by the seeds, so the prefill's and the fallback's `cond`s stay
real branches under the seed vmap. Metrics are typed NamedTuples reduced on device per chunk.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from jaxrl_fast.agent import precision as mp
from jaxrl_fast.agent.dqn import Agent
from jaxrl_fast.agent.evaluate import make_evaluate
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.config.hparams import HParams, Kinds, hparams_of, kinds_of
from jaxrl_fast.config.registry import LEARNERS
from jaxrl_fast.loop import extensions as builtin
from jaxrl_fast.loop import learn as _replay  # noqa: F401  (registers the learner "replay")
from jaxrl_fast.loop import rollout as _rollout  # noqa: F401  (registers the learner "rollout")
from jaxrl_fast.loop.extension import Hooks, fold
from jaxrl_fast.loop.parts import LoopParts, make_parts
from jaxrl_fast.loop.resolve import ResolvedRun, resolve
from jaxrl_fast.loop.state import (
    ChunkMetrics,
    RunnerState,
    SeedState,
    StepStats,
    chunk_metrics,
    episode_stats,
    zero_update_metrics,
)
from jaxrl_fast.parallel.exchange import Exchange
from jaxrl_fast.parallel.seeds import seed_vmap
from jaxrl_fast.replay import Buffer
from jaxrl_fast.types import Array, PRNGKey, Transition


class TrainFns(NamedTuple):
    """The fused loop's functions and the parts they were built from.

    `init(keys [S], seed_ids [S] = None, hparams [S] = None) -> runner` (envs reset, nothing
    collected; `seed_ids`, the seeds' global indices, pick each seed's env variant: default
    `0 .. S-1`, give them where the seeds are split over devices; `hparams` None gives every
    seed the config's); `run_chunk(runner) -> (runner, metrics)`: `blocks_per_chunk` training
    blocks, preceded in the first chunk by the prefill (whose episodes the metrics leave out);
    `evaluate(runner, keys [S]) -> [S]` mean return over `eval_episodes` episodes.
    `seed_axes` gives a `SeedState`'s vmap axes (0 per seed, None shared across seeds);
    `extensions` the names of the run's loop extensions.
    """

    init: Callable[..., RunnerState]
    run_chunk: Callable[[RunnerState], tuple[RunnerState, ChunkMetrics]]
    evaluate: Callable[[RunnerState, PRNGKey], Array]
    run: ResolvedRun
    agent: Agent
    buffer: Buffer
    seed_axes: SeedState
    exchange: Exchange = Exchange()
    extensions: tuple[str, ...] = ()

    @property
    def single_device(self) -> bool:
        """The seeds must stay on one device (a pool env, or the replay's host callbacks)."""
        return self.run.env.single_device or self.buffer.single_device


def _make_init(parts: LoopParts, hooks: Hooks) -> Callable[..., RunnerState]:
    """`init(keys [S], seed_ids [S] = None, hparams [S] = None) -> RunnerState`."""
    agent, buffer, env = parts.agent, parts.buffer, parts.env
    default_hp = hparams_of(parts.config)

    def init(
        keys: PRNGKey, seed_ids: Array | None = None, hparams: HParams | None = None
    ) -> RunnerState:
        split = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
        key, key_env, key_net = split[:, 0], split[:, 1], split[:, 2]
        key, key_env = hooks.init_keys(key, key_env)
        ids = jnp.arange(keys.shape[0]) if seed_ids is None else seed_ids
        params = hooks.reset_params(ids)  # None: the env's own parameters
        if params is None:
            env_state, obs = env.reset(key_env)
        else:
            env_state, obs = env.reset_with(key_env, params)
        if hparams is None:  # every seed the config's values
            hparams = jax.tree.map(
                lambda x: jnp.broadcast_to(x, (keys.shape[0], *x.shape)), default_hp
            )
        agents = jax.vmap(agent.init)(key_net, obs, hparams)
        replay = seed_vmap(lambda _: buffer.init(), 0, buffer.seed_axes)(keys)
        carry = jax.vmap(lambda o: agent.initial_carry(o.shape[0]))(obs)
        seeds = SeedState(agents, replay, env_state, obs, key, carry)
        return RunnerState(seeds=seeds, block=jnp.full((), -1, jnp.int32))

    return init


def _make_collect_step(parts: LoopParts, hooks: Hooks) -> Callable:
    """`collect_step(seeds, t, fp32) -> (seeds, StepStats)`: one env step of every seed."""
    agent, env, schedules = parts.agent, parts.env, parts.schedules
    replay_add = seed_vmap(parts.buffer.add, (parts.buffer.seed_axes, 0, 0), parts.buffer.seed_axes)
    epsilons = jax.vmap(schedules.collect_epsilon, (None, 0))  # [S], one per seed's hparams
    gammas = jax.vmap(schedules.collect_gamma, (None, 0))

    def act_one(agent_state, key, obs: Array, carry, epsilon: Array, fp32: Array):
        key, key_act, key_env = jax.random.split(key, 3)
        action, carry = agent.step(agent_state, key_act, obs, carry, epsilon, fp32)
        return key, key_env, action, carry

    act = parts.run.choices.seeds_fn(act_one, (0, 0, 0, 0, 0, None), 0)

    def collect_step(seeds: SeedState, index: Array, fp32: Array):
        # this step's epsilon and gamma: each seed's own schedules (`HParams`)
        epsilon = epsilons(index, seeds.agent.hparams)
        gamma = gammas(index, seeds.agent.hparams)  # [S]
        # act (a recurrent agent from its state before this observation)
        key, key_env, action, carry = act(
            seeds.agent, seeds.key, seeds.obs, seeds.carry, epsilon, fp32
        )
        env_state, next_obs, reward, done, info = env.step(key_env, seeds.env_state, action)
        # the agent learns from the extensions' reward; episode stats stay the env's own
        reward = hooks.reward(seeds.obs, action, reward, next_obs, info, gamma)
        step = Transition(
            seeds.obs,
            action,
            reward,
            info["terminated"],
            info["truncated"],
            info["reset"],
            carry=agent.stored_carry(seeds.carry),
        )
        replay = replay_add(seeds.replay, step, gamma)
        carry = agent.end_episodes(carry, info["reset"])  # the next obs starts an episode
        new = SeedState(seeds.agent, replay, env_state, next_obs, key, carry)
        return new, episode_stats(done, info)

    return collect_step


def _barrier(tree: Any) -> Any:
    """`jax.lax.optimization_barrier` over the tree's arrays except its PRNG keys (JAX's
    key-reuse checker counts a key through the barrier as consumed; keys are a few bytes)."""
    leaves, treedef = jax.tree.flatten(tree)
    is_key = [jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) for x in leaves]
    held = jax.lax.optimization_barrier([x for x, k in zip(leaves, is_key, strict=True) if not k])
    it = iter(held)
    return treedef.unflatten([x if k else next(it) for x, k in zip(leaves, is_key, strict=True)])


def _make_iteration(parts: LoopParts, hooks: Hooks) -> tuple[Callable, Callable]:
    """`iteration(runner) -> (runner, (StepStats, UpdateMetrics))`: one training block (collect,
    learn, the target update when due, then the extensions' `after_block` hooks), and
    `prefill(runner) -> runner`: the `prefill_steps` collect steps before the first block (no
    learning; their episodes the metrics leave out). Every loop in them has a trip count fixed
    at compile time, and neither has a `cond` of its own: on a GPU a loop of unknown length, or
    a `cond`, waits on the host at every iteration."""
    config = parts.config
    # the prefill and the blocks call the same collect step; a nested `jax.jit` around it (one
    # trace, one lowering) compiled slower on CPU, as XLA inlines both calls anyway
    collect_step = _make_collect_step(parts, hooks)
    learn = LEARNERS.get(config.learner).learn(parts, hooks)
    update_target = jax.vmap(parts.agent.update_target)
    prefill_steps, cpb = config.prefill_steps, config.collect_steps_per_block
    period = config.target_period_blocks

    def collect(seeds: SeedState, first: Array, steps: int, fp32: Array):
        def one(i, carry):
            seeds, stats = carry
            seeds, new = collect_step(seeds, first + i, fp32)
            seeds = hooks.after_collect(seeds, i, steps)
            return seeds, jax.tree.map(jnp.add, stats, new)

        zeros = StepStats.zeros(seeds.obs.shape[0])
        return jax.lax.fori_loop(0, steps, one, (seeds, zeros))

    def prefill(runner: RunnerState) -> RunnerState:
        fp32 = mp.shared_fallback(runner.seeds.agent.loss_scale)
        seeds, stats = collect(runner.seeds, jnp.zeros((), jnp.int32), prefill_steps, fp32)
        seeds = hooks.after_block(seeds, jax.tree.map(jnp.zeros_like, stats), runner.block, False)
        return RunnerState(seeds, jnp.zeros_like(runner.block))

    def iteration(runner: RunnerState) -> tuple[RunnerState, tuple]:
        fp32 = mp.shared_fallback(runner.seeds.agent.loss_scale)
        first = prefill_steps + runner.block * cpb
        seeds, stats = collect(runner.seeds, first, cpb, fp32)
        # the barriers keep XLA from fusing the collect step's, the updates' and the target
        # update's work into one another (the blocks' loops are inlined once their trip counts
        # are fixed): without them run_chunk's CPU compile took ~1.2x as long
        # (`benchmarks/experiments/ab-quick-issue33-barriers.md`); the arithmetic is the same
        seeds, stats = _barrier((seeds, stats))
        seeds, metrics = learn(seeds, fp32, runner.block)
        seeds, metrics = _barrier((seeds, metrics))
        # the target update: a select (the block counter is shared; no branch to wait on)
        due = (runner.block + 1) % period == 0
        agents = update_target(seeds.agent)
        target = jax.tree.map(
            lambda new, old: jnp.where(due, new, old),
            agents.target_params,
            seeds.agent.target_params,
        )
        seeds = seeds._replace(agent=seeds.agent.replace(target_params=target))
        seeds = hooks.after_block(seeds, stats, runner.block, True)
        return RunnerState(seeds, runner.block + 1), (stats, metrics)

    return iteration, prefill


def make_train(
    run: ResolvedRun | TrainConfig,
    *,
    env: Any = None,
    kinds: Kinds | None = None,
    extensions: Sequence[Callable] = (),
) -> TrainFns:
    """Build the fused loop's functions; nothing is compiled here.

    Args:
      run: a `ResolvedRun` (`resolve.resolve`), or a `TrainConfig` to resolve for the first
        local device.
      env: with a `TrainConfig`, an env to train on instead of `config.env.name` (what
        `resolve.resolve` takes: one's own gymnax `Environment` too).
      kinds: the schedule kinds and clipping the seeds' `HParams` (an argument of `init`) may
        use (`hparams.kinds_of`, a sweep's); default: the config's own.
      extensions: builders of loop extensions to add after the library's
        (`builder(LoopParts) -> Extension | None`, `jaxrl_fast.loop.extension`).

    Returns:
      `TrainFns`. Jit `init`, and `run_chunk` with `donate_argnums=0`.

    Examples:
      >>> import jax
      >>> from jaxrl_fast import presets
      >>> cfg = presets.get("cartpole").replace(total_env_steps=2_000, learning_starts=1_000,
      ...                                        num_seeds=2, num_chunks=2)
      >>> fns = make_train(cfg)
      >>> runner = jax.jit(fns.init)(jax.random.split(jax.random.key(0), 2))
      >>> runner, metrics = jax.jit(fns.run_chunk)(runner)
      >>> metrics.loss.shape
      (2,)
    """
    run = resolve(run, env=env) if isinstance(run, TrainConfig) else run
    config = run.config
    parts = make_parts(run, kinds or kinds_of(hparams_of(config)))
    hooks = fold((*builtin.DEFAULT, *extensions), parts)
    parts = parts._replace(env=hooks.env(parts.env))  # the envs the loop steps
    agent, buffer = parts.agent, parts.buffer
    init = _make_init(parts, hooks)
    iteration, prefill = _make_iteration(parts, hooks)
    evaluate_agents = make_evaluate(config, agent)

    def run_chunk(runner: RunnerState) -> tuple[RunnerState, ChunkMetrics]:
        num_seeds = runner.seeds.obs.shape[0]
        totals = (StepStats.zeros(num_seeds), zero_update_metrics(num_seeds))

        def body(_, carry):
            runner, totals = carry
            runner, new = iteration(runner)
            return runner, jax.tree.map(jnp.add, totals, new)

        # the first chunk runs the prefill first (block -1 -> 0): the program's one `cond`,
        # taken once per chunk and guarding prefill_steps env steps
        with jax.named_scope("prefill"):
            runner = jax.lax.cond(runner.block < 0, prefill, lambda r: r, runner)
        runner, (stats, upd) = jax.lax.fori_loop(0, config.blocks_per_chunk, body, (runner, totals))
        stats, upd = hooks.reduce_chunk(stats, upd)
        updates = config.blocks_per_chunk * config.updates_per_block
        counters = buffer.counters(runner.seeds.replay)
        return runner, chunk_metrics(stats, upd, runner.seeds, counters, updates)

    def evaluate(runner: RunnerState, keys: PRNGKey) -> Array:
        params = hooks.eval_params(runner)  # each seed's env parameters (None: the env's)
        returns = evaluate_agents(runner.seeds.agent, hooks.eval_keys(keys), params)
        return hooks.eval_reduce(returns)

    seed_axes = SeedState(
        agent=0, replay=buffer.seed_axes, env_state=parts.env.state_axes, obs=0, key=0, carry=0
    )
    return TrainFns(
        init=init,
        run_chunk=run_chunk,
        evaluate=evaluate,
        run=run,
        agent=agent,
        buffer=buffer,
        seed_axes=seed_axes,
        exchange=parts.exchange,
        extensions=tuple(e.name for e in hooks.extensions),
    )
