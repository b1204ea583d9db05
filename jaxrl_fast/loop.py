"""The fused training loop: `make_train(config) -> TrainFns(init, run_chunk, evaluate)`.

The loop has its schedule in its shape (DESIGN §3), written once for every env kind:

    init      = reset envs, build agents and replay, then scan(collect_step, prefill_steps)
    run_chunk = scan(iteration, blocks_per_chunk)
    iteration = scan(collect_step, collect_steps_per_block), then updates_per_block x learn_step,
                then the target update when the block index says so, then the replay's spill
                hook (its host callbacks, once, on all seeds)
    collect_step: epsilon(t); act (per seed); step the envs of all seeds (`SeededEnv`); replay add
    learn_step:   replay sample; dqn update (per seed); replay priorities

Seeds are a leading `[S]` axis. Replay add / sample / priorities are vmapped over the seeds (the
replay's write cursors are shared, `Buffer.seed_axes`); acting and the gradient update run as
`SeedChoices.seed_loop` says (vmapped, or one seed after another). The block counter and the
fp32-fallback flag are shared by the seeds, so the target-update and precision `cond`s stay
real branches. Metrics are typed NamedTuples reduced on device per chunk.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast import precision as mp
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.dqn import Agent, AgentState, UpdateMetrics, make_agent
from jaxrl_fast.envs import Env
from jaxrl_fast.envs.seeded import SeededEnv
from jaxrl_fast.evaluate import make_evaluate
from jaxrl_fast.networks import QNetwork
from jaxrl_fast.replay import Buffer, make_buffer
from jaxrl_fast.resolve import ResolvedRun, resolve
from jaxrl_fast.schedules import Schedules, make_schedules
from jaxrl_fast.seeds import seed_vmap
from jaxrl_fast.types import Array, PRNGKey, Transition


class SeedState(NamedTuple):
    """Everything the seeds carry. Leaves have a leading `[S]` axis, except those whose axis in
    `TrainFns.seed_axes` is None (the replay's shared cursors, a pool env's state)."""

    agent: AgentState
    replay: Any
    env_state: Any
    obs: Array  # [S, E, *obs_shape]
    key: PRNGKey  # [S]


class RunnerState(NamedTuple):
    """The scan carry: the seeds' state plus the shared block counter."""

    seeds: SeedState
    block: Array  # [] int32, training blocks done


class StepStats(NamedTuple):
    """Episodes that ended, summed over envs (and steps): `[S]` float32 each."""

    episode_return: Array
    episode_length: Array
    episodes: Array


class ChunkMetrics(NamedTuple):
    """Per-seed means over one chunk (all `[S]` float32; NaN where no episode ended)."""

    episode_return: Array
    episode_length: Array
    episodes: Array
    loss: Array
    q: Array
    abs_td: Array
    skipped: Array  # updates skipped for non-finite gradients in this chunk
    loss_scale: Array  # loss scale at the chunk's end (1.0 without scaling)
    fp32_fallback: Array  # [S] bool: the compute has switched to fp32
    replay: dict  # the buffer's cumulative counters at the chunk's end (`Buffer.counters`)


class TrainFns(NamedTuple):
    """The fused loop's functions and the parts they were built from.

    `init(keys [S]) -> runner` (prefill included); `run_chunk(runner) -> (runner, metrics)`;
    `evaluate(runner, keys [S]) -> [S]` mean return over `eval_episodes` episodes.
    `seed_axes` gives a `SeedState`'s vmap axes (0 per seed, None shared across seeds).
    """

    init: Callable[[PRNGKey], RunnerState]
    run_chunk: Callable[[RunnerState], tuple[RunnerState, ChunkMetrics]]
    evaluate: Callable[[RunnerState, PRNGKey], Array]
    run: ResolvedRun
    agent: Agent
    buffer: Buffer
    seed_axes: SeedState

    @property
    def single_device(self) -> bool:
        """The seeds must stay on one device (a pool env, or the replay's host callbacks)."""
        return self.run.env.single_device or self.buffer.single_device


def example_transition(spec) -> Transition:
    """The `Transition` of one collect step of one seed's `spec.num_envs` envs, as structs."""
    e, sds = spec.num_envs, jax.ShapeDtypeStruct
    flag = sds((e,), bool)
    return Transition(
        obs=sds((e, *spec.obs_shape), spec.obs_dtype),
        action=sds((e,), jnp.int32),
        reward=sds((e,), jnp.float32),
        terminated=flag,
        truncated=flag,
        reset=flag,
    )


def _episode_stats(done: Array, info: dict) -> StepStats:
    """Finished episodes' return and length sums and count over the env axis (the last)."""
    return StepStats(
        episode_return=jnp.sum(jnp.where(done, info["episode_return"], 0.0), axis=-1),
        episode_length=jnp.sum(jnp.where(done, info["episode_length"], 0), axis=-1).astype(
            jnp.float32
        ),
        episodes=jnp.sum(done, axis=-1).astype(jnp.float32),
    )


def _sum_steps(tree: Any) -> Any:
    """Sum a scan's stacked outputs over its steps (the leading axis)."""
    return jax.tree.map(lambda x: jnp.sum(x, axis=0), tree)


def _agent_and_buffer(run: ResolvedRun, schedules: Schedules) -> tuple[Agent, Buffer]:
    """The agent (network, optimiser, precision) and one seed's replay buffer of a run."""
    config, spec = run.config, run.env.spec
    network = QNetwork.for_precision(
        config.network, spec, run.precision, conv_impl=run.choices.conv_impl
    )
    agent = make_agent(
        config.dqn,
        network,
        spec.num_actions,
        learning_rate=schedules.learning_rate,
        precision=run.precision,
    )
    buffer = make_buffer(
        config.replay,
        example_transition(spec),
        gamma=config.dqn.gamma,
        num_seeds=config.num_seeds,
        sync_every=config.collect_steps_per_block,
        updates_per_sync=config.updates_per_block,
        total_updates=config.total_updates,
        seed=config.seed,
        frame_stack=spec.frame_stack,
    )
    return agent, buffer


def _chunk_metrics(
    stats: StepStats, upd: UpdateMetrics, seeds: SeedState, buffer: Buffer, updates: int
) -> ChunkMetrics:
    """A chunk's sums (`updates` gradient steps per seed) as means per episode and per update."""
    # means over the updates applied (a skipped mixed-precision step reports nothing)
    applied = jnp.where(upd.applied > 0, upd.applied, jnp.nan)
    episodes = jnp.where(stats.episodes > 0, stats.episodes, jnp.nan)
    scale = seeds.agent.loss_scale
    return ChunkMetrics(
        episode_return=stats.episode_return / episodes,
        episode_length=stats.episode_length / episodes,
        episodes=stats.episodes,
        loss=upd.loss / applied,
        q=upd.q / applied,
        abs_td=upd.abs_td / applied,
        skipped=float(updates) - upd.applied,
        loss_scale=scale.scale,
        fp32_fallback=scale.fallback,
        replay=buffer.counters(seeds.replay),
    )


def make_train(run: ResolvedRun | TrainConfig, *, env: Env | SeededEnv | None = None) -> TrainFns:
    """Build the fused loop's functions; nothing is compiled here.

    Args:
      run: a `ResolvedRun` (`resolve.resolve`), or a `TrainConfig` to resolve for the first
        local device.
      env: with a `TrainConfig`, an env to train on instead of `config.env.name`.

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
    if isinstance(run, TrainConfig):
        run = resolve(run, env=env)
    config, env = run.config, run.env
    schedules = make_schedules(config)
    agent, buffer = _agent_and_buffer(run, schedules)
    evaluate_agents = make_evaluate(config, agent)
    seed_axes = SeedState(agent=0, replay=buffer.seed_axes, env_state=env.state_axes, obs=0, key=0)
    per_seed = run.choices.seeds_fn  # acting and updates: vmapped or one seed after another
    replay_add = seed_vmap(buffer.add, (buffer.seed_axes, 0), buffer.seed_axes)
    replay_sample = seed_vmap(buffer.sample, (buffer.seed_axes, 0), 0)
    replay_priorities = seed_vmap(
        buffer.update_priorities, (buffer.seed_axes, 0, 0), buffer.seed_axes
    )
    update = per_seed(agent.update, (0, 0, None), 0)
    update_target = jax.vmap(agent.update_target)
    prefill, cpb = config.prefill_steps, config.collect_steps_per_block
    upb = config.updates_per_block
    period = config.target_period_blocks

    def _act_one(agent_state: AgentState, key: PRNGKey, obs: Array, epsilon: Array, fp32: Array):
        key, key_act, key_env = jax.random.split(key, 3)
        return key, key_env, agent.act(agent_state, key_act, obs, epsilon, fp32)

    act = per_seed(_act_one, (0, 0, 0, None, None), 0)

    def collect_step(seeds: SeedState, epsilon: Array, fp32: Array):
        # act
        key, key_env, action = act(seeds.agent, seeds.key, seeds.obs, epsilon, fp32)
        # step envs (all seeds at once)
        env_state, next_obs, reward, done, info = env.step(key_env, seeds.env_state, action)
        # replay
        step = Transition(
            seeds.obs, action, reward, info["terminated"], info["truncated"], info["reset"]
        )
        replay = replay_add(seeds.replay, step)
        return SeedState(seeds.agent, replay, env_state, next_obs, key), _episode_stats(done, info)

    def learn_step(seeds: SeedState, fp32: Array) -> tuple[SeedState, UpdateMetrics]:
        split = jax.vmap(jax.random.split)(seeds.key)
        key, key_sample = split[:, 0], split[:, 1]
        batch = replay_sample(seeds.replay, key_sample)
        agent_state, td, metrics = update(seeds.agent, batch, fp32)
        replay = replay_priorities(seeds.replay, batch.index, td)
        return seeds._replace(agent=agent_state, replay=replay, key=key), metrics

    def init(keys: PRNGKey) -> RunnerState:
        split = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
        key, key_env, key_net = split[:, 0], split[:, 1], split[:, 2]
        env_state, obs = env.reset(key_env)
        agents = jax.vmap(agent.init)(key_net, obs)
        replay = seed_vmap(lambda _: buffer.init(), 0, buffer.seed_axes)(keys)
        seeds = SeedState(agents, replay, env_state, obs, key)
        no_fp32 = jnp.zeros((), bool)

        def prefill_step(seeds: SeedState, i: Array):
            seeds, _ = collect_step(seeds, schedules.collect_epsilon(i), no_fp32)
            return seeds._replace(replay=buffer.spill(seeds.replay)), None

        seeds, _ = jax.lax.scan(prefill_step, seeds, jnp.arange(prefill, dtype=jnp.int32))
        return RunnerState(seeds=seeds, block=jnp.zeros((), jnp.int32))

    def iteration(runner: RunnerState) -> tuple[RunnerState, tuple[StepStats, UpdateMetrics]]:
        fp32 = mp.shared_fallback(runner.seeds.agent.loss_scale)
        # collect
        first = prefill + runner.block * cpb
        epsilons = schedules.collect_epsilon(first + jnp.arange(cpb, dtype=jnp.int32))
        seeds, stats = jax.lax.scan(
            lambda s, eps: collect_step(s, eps, fp32), runner.seeds, epsilons
        )
        # learn
        if upb == 1:
            seeds, metrics = learn_step(seeds, fp32)
        else:
            seeds, metrics = jax.lax.scan(lambda s, _: learn_step(s, fp32), seeds, None, length=upb)
            metrics = _sum_steps(metrics)
        # target: the block counter is shared by the seeds, so this stays a real branch
        due = (runner.block + 1) % period == 0
        agents = jax.lax.cond(due, update_target, lambda a: a, seeds.agent)
        if run.precision.fallback:  # record the shared switch in every seed's state
            scales = mp.record_fallback(agents.loss_scale, mp.shared_fallback(agents.loss_scale))
            agents = agents.replace(loss_scale=scales)
        # replay's host callbacks (L3), once per iteration, on all seeds, outside the seed vmap
        seeds = seeds._replace(agent=agents, replay=buffer.spill(seeds.replay))
        return RunnerState(seeds, runner.block + 1), (_sum_steps(stats), metrics)

    def run_chunk(runner: RunnerState) -> tuple[RunnerState, ChunkMetrics]:
        zeros = jnp.zeros(runner.seeds.obs.shape[:1], jnp.float32)
        totals = (StepStats(zeros, zeros, zeros), UpdateMetrics(zeros, zeros, zeros, zeros))

        def body(carry, _):
            runner, totals = carry
            runner, new = iteration(runner)
            return (runner, jax.tree.map(jnp.add, totals, new)), None

        (runner, (stats, upd)), _ = jax.lax.scan(
            body, (runner, totals), None, length=config.blocks_per_chunk
        )
        updates = config.blocks_per_chunk * upb
        return runner, _chunk_metrics(stats, upd, runner.seeds, buffer, updates)

    def evaluate(runner: RunnerState, keys: PRNGKey) -> Array:
        return evaluate_agents(runner.seeds.agent, keys)

    return TrainFns(
        init=init,
        run_chunk=run_chunk,
        evaluate=evaluate,
        run=run,
        agent=agent,
        buffer=buffer,
        seed_axes=seed_axes,
    )
