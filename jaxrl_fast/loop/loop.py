"""The fused training loop: `make_train(config) -> TrainFns(init, run_chunk, evaluate)`.

The loop has its schedule in its shape (DESIGN §3), written once for every env kind:

    init      = reset envs, build agents and replay; block counter = -1 (prefill pending)
    run_chunk = loop(iteration, blocks_per_chunk), plus the prefill iteration first when the
                counter says it is pending (the first chunk)
    iteration = loop(collect_step, n), n = collect_steps_per_block (prefill_steps for the
                prefill iteration); then, in a training block, updates_per_block x learn_step,
                the curriculum's step (if any) and the target update when the block index says so
    collect_step: epsilon(t); act (per seed); step the envs of all seeds (`SeededEnv`); reward
                shaping (if any); replay add; at a block's end the replay's spill hook (its host
                callbacks, on all seeds)
    learn_step:   replay sample; dqn update (per seed); replay priorities

The prefill is an iteration of the one loop (its learning behind a `lax.cond` on the shared block
counter), so the collect step is compiled once, in `run_chunk`, not also in `init`.

Seeds are a leading `[S]` axis. Replay add / sample / priorities are vmapped over the seeds (the
replay's write cursors are shared, `Buffer.seed_axes`); acting and the gradient update run as
`SeedChoices.seed_loop` says (vmapped, or one seed after another). The block counter and the
fp32-fallback flag are shared by the seeds, so the target-update and precision `cond`s stay
real branches. Metrics are typed NamedTuples reduced on device per chunk.

Data replicas (`ParallelConfig.data` > 1, `parallel.Exchange`): the program then runs on each
device of a `seed` x `data` mesh (`train` shard_maps it), its `[S]` leaves being that replica's
copies of its seeds ("lanes"). Replicas init the same network (the seed's key) but fold their
index into the env, exploration and sampling keys; gradients (or, with `every:K`, parameters)
are averaged over the `data` axis; the chunk's metrics are summed (episodes) or averaged (losses)
over the replicas, and the evaluation averages every replica's episodes.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast import precision as mp
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.demos import load_demos
from jaxrl_fast.dqn import Agent, AgentState, UpdateMetrics, make_agent
from jaxrl_fast.envs import Env
from jaxrl_fast.envs.seeded import SeededEnv
from jaxrl_fast.envs.shaping import make_shaping
from jaxrl_fast.envs.variation import Variation, make_variation
from jaxrl_fast.evaluate import make_evaluate
from jaxrl_fast.hparams import HParams, Kinds, hparams_of, kinds_of
from jaxrl_fast.networks import QNetwork
from jaxrl_fast.parallel.exchange import Exchange, make_exchange
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
    carry: Any = ()  # a recurrent agent's state [S, E, 2, H] (zeros at episode starts); ()


class RunnerState(NamedTuple):
    """The scan carry: the seeds' state plus the shared block counter."""

    seeds: SeedState
    block: Array  # [] int32, training blocks done; -1 while the prefill is pending


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

    `init(keys [S], seed_ids [S] = None) -> runner` (envs reset, nothing collected; `seed_ids`,
    the seeds' global indices, pick each seed's env variant: default `0 .. S-1`, give them
    where the seeds are split over devices); `run_chunk(runner) -> (runner, metrics)`:
    `blocks_per_chunk` training blocks, preceded in the first chunk by the prefill (whose
    episodes the metrics leave out); `evaluate(runner, keys [S]) -> [S]` mean return over
    `eval_episodes` episodes.
    `seed_axes` gives a `SeedState`'s vmap axes (0 per seed, None shared across seeds);
    `variation` the varying env parameters (None: none).
    """

    init: Callable[..., RunnerState]
    run_chunk: Callable[[RunnerState], tuple[RunnerState, ChunkMetrics]]
    evaluate: Callable[[RunnerState, PRNGKey], Array]
    run: ResolvedRun
    agent: Agent
    buffer: Buffer
    seed_axes: SeedState
    exchange: Exchange = Exchange()
    variation: Variation | None = None

    @property
    def single_device(self) -> bool:
        """The seeds must stay on one device (a pool env, or the replay's host callbacks)."""
        return self.run.env.single_device or self.buffer.single_device


def example_transition(spec, carry: Any = None) -> Transition:
    """The `Transition` of one collect step of one seed's `spec.num_envs` envs, as structs;
    `carry` a recurrent agent's state for those envs (None: feed-forward)."""
    e, sds = spec.num_envs, jax.ShapeDtypeStruct
    flag = sds((e,), bool)
    return Transition(
        obs=sds((e, *spec.obs_shape), spec.obs_dtype),
        action=sds((e,), jnp.int32),
        reward=sds((e,), jnp.float32),
        terminated=flag,
        truncated=flag,
        reset=flag,
        carry=None if carry is None else sds(carry.shape, carry.dtype),
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


def _same(x: Any) -> Any:
    return x


def _sum_steps(tree: Any) -> Any:
    """Sum a scan's stacked outputs over its steps (the leading axis)."""
    return jax.tree.map(lambda x: jnp.sum(x, axis=0), tree)


def _agent_and_buffer(
    run: ResolvedRun, schedules: Schedules, exchange: Exchange, kinds: Kinds
) -> tuple[Agent, Buffer]:
    """The agent (network, optimiser, precision) and one seed's replay buffer of a run."""
    config, spec = run.config, run.env.spec
    network = QNetwork.for_precision(
        config.network, spec, run.precision, conv_impl=run.choices.conv_impl
    )
    replay = config.replay
    agent = make_agent(
        config.dqn,
        network,
        spec.num_actions,
        learning_rate=schedules.learning_rate,
        hparams=hparams_of(config),
        update_gamma=schedules.update_gamma,
        clip=kinds.clip,
        precision=run.precision,
        exchange=exchange,
        sequence=(replay.burn_in, replay.sequence_length, replay.n_step)
        if replay.sequence_length
        else None,
        demo=(
            config.demo.margin,
            config.demo.weight,
            int(config.demo.decay_fraction * config.total_updates),
        )
        if config.demo.active
        else None,
    )
    carry = agent.initial_carry(spec.num_envs) if agent.recurrent else None
    buffer = make_buffer(
        config.replay,
        example_transition(spec, carry),
        gamma=config.dqn.gamma,
        num_seeds=config.num_seeds,
        sync_every=config.collect_steps_per_block,
        updates_per_sync=config.updates_per_block,
        total_updates=config.total_updates,
        seed=config.seed,
        frame_stack=spec.frame_stack,
        demos=load_demos(config),  # None without demonstrations
        demo_rows_per_batch=config.demo_rows_per_batch,
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


def _make_learn(
    config: TrainConfig, agent: Agent, buffer: Buffer, exchange: Exchange, per_seed: Callable
) -> tuple[Callable, Callable]:
    """The learning half of a block, for all seeds: `learn(seeds, fp32, block)` runs
    `updates_per_block` x (sample -> DQN update -> priorities), each followed by local SGD's
    parameter average where due; `skip_learning` is its stand-in in the prefill iteration."""
    replay_sample = seed_vmap(buffer.sample, (buffer.seed_axes, 0, 0), 0)
    replay_priorities = seed_vmap(
        buffer.update_priorities, (buffer.seed_axes, 0, 0, 0), buffer.seed_axes
    )
    upb = config.updates_per_block
    if exchange.active:  # the shared update index (1-bit Adam's phase)
        update = per_seed(agent.update, (0, 0, None, None), 0)
    else:
        update_3 = per_seed(agent.update, (0, 0, None), 0)

        def update(agent_state, batch, fp32, step):
            return update_3(agent_state, batch, fp32)

    def average_agents(agents: AgentState) -> AgentState:
        return agents.replace(
            params=exchange.average(agents.params),
            target_params=exchange.average(agents.target_params),
        )

    def learn_step(seeds: SeedState, fp32: Array, step: Any) -> tuple[SeedState, UpdateMetrics]:
        split = jax.vmap(jax.random.split)(seeds.key)
        key, key_sample = split[:, 0], split[:, 1]
        hp = seeds.agent.hparams
        batch = replay_sample(seeds.replay, key_sample, hp)
        agent_state, td, metrics = update(seeds.agent, batch, fp32, step)
        replay = replay_priorities(seeds.replay, batch.index, td, hp)
        if step is not None and exchange.due(step + 1) is not None:  # local SGD's sync
            agent_state = jax.lax.cond(
                exchange.due(step + 1), average_agents, lambda a: a, agent_state
            )
        return seeds._replace(agent=agent_state, replay=replay, key=key), metrics

    def learn(seeds: SeedState, fp32: Array, block: Array) -> tuple[SeedState, UpdateMetrics]:
        first = block * upb if exchange.active else None  # updates done before this block's
        if upb == 1:
            return learn_step(seeds, fp32, first)
        if first is None:
            seeds, metrics = jax.lax.scan(
                lambda s, _: learn_step(s, fp32, None), seeds, None, length=upb
            )
        else:
            seeds, metrics = jax.lax.scan(
                lambda s, j: learn_step(s, fp32, first + j), seeds, jnp.arange(upb)
            )
        return seeds, _sum_steps(metrics)

    def skip_learning(seeds: SeedState, fp32: Array, block: Array):
        zeros = jnp.zeros(seeds.obs.shape[:1], jnp.float32)
        return seeds, UpdateMetrics(zeros, zeros, zeros, zeros)

    return learn, skip_learning


def _make_init(
    config: TrainConfig,
    env: SeededEnv,
    agent: Agent,
    buffer: Buffer,
    exchange: Exchange,
    variation: Variation | None,
) -> Callable[..., RunnerState]:
    """`init(keys [S], seed_ids [S] = None, hparams [S] = None) -> RunnerState`: envs reset,
    agents and replay built, nothing collected; `hparams` None gives every seed the config's."""
    default_hp = hparams_of(config)

    def init(
        keys: PRNGKey, seed_ids: Array | None = None, hparams: HParams | None = None
    ) -> RunnerState:
        split = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
        key, key_env, key_net = split[:, 0], split[:, 1], split[:, 2]
        if exchange.active:  # a replica's own envs and draws; the seed's network
            fold = jax.vmap(jax.random.fold_in, in_axes=(0, None))
            key, key_env = fold(key, exchange.replica()), fold(key_env, exchange.replica())
        if variation is None:
            env_state, obs = env.reset(key_env)
        else:  # each seed's env parameters: its variant, the curriculum's start
            ids = jnp.arange(keys.shape[0]) if seed_ids is None else seed_ids
            env_state, obs = env.reset_with(key_env, variation.initial(ids))
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


def make_train(
    run: ResolvedRun | TrainConfig,
    *,
    env: Env | SeededEnv | None = None,
    kinds: Kinds | None = None,
) -> TrainFns:
    """Build the fused loop's functions; nothing is compiled here.

    Args:
      run: a `ResolvedRun` (`resolve.resolve`), or a `TrainConfig` to resolve for the first
        local device.
      env: with a `TrainConfig`, an env to train on instead of `config.env.name`.
      kinds: the schedule kinds and clipping the seeds' `HParams` (an argument of `init`) may
        use (`hparams.kinds_of`, a sweep's); default: the config's own.

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
    kinds = kinds or kinds_of(hparams_of(config))
    schedules = make_schedules(config, kinds)
    exchange = make_exchange(config.parallel, config.total_updates)
    agent, buffer = _agent_and_buffer(run, schedules, exchange, kinds)
    evaluate_agents = make_evaluate(config, agent)
    seed_axes = SeedState(
        agent=0, replay=buffer.seed_axes, env_state=env.state_axes, obs=0, key=0, carry=0
    )
    per_seed = run.choices.seeds_fn  # acting and updates: vmapped or one seed after another
    replay_add = seed_vmap(buffer.add, (buffer.seed_axes, 0, 0), buffer.seed_axes)
    epsilons = jax.vmap(schedules.collect_epsilon, (None, 0))  # [S], one per seed's hparams
    gammas = jax.vmap(schedules.collect_gamma, (None, 0))
    learn, skip_learning = _make_learn(config, agent, buffer, exchange, per_seed)
    update_target = jax.vmap(agent.update_target)
    shaping = make_shaping(config.env.reward_shaping, config.dqn.gamma)  # None: none
    variation = make_variation(config)  # env parameters varying over seeds / training
    prefill, cpb = config.prefill_steps, config.collect_steps_per_block
    upb = config.updates_per_block
    period = config.target_period_blocks

    def _act_one(agent_state: AgentState, key, obs: Array, carry, epsilon: Array, fp32: Array):
        key, key_act, key_env = jax.random.split(key, 3)
        action, carry = agent.step(agent_state, key_act, obs, carry, epsilon, fp32)
        return key, key_env, action, carry

    act = per_seed(_act_one, (0, 0, 0, 0, 0, None), 0)

    def collect_step(seeds: SeedState, index: Array, fp32: Array):
        # this step's epsilon and gamma: each seed's own schedules (`HParams`)
        epsilon = epsilons(index, seeds.agent.hparams)
        gamma = gammas(index, seeds.agent.hparams)  # [S]
        # act (a recurrent agent from its state before this observation)
        key, key_env, action, carry = act(
            seeds.agent, seeds.key, seeds.obs, seeds.carry, epsilon, fp32
        )
        # step envs (all seeds at once)
        env_state, next_obs, reward, done, info = env.step(key_env, seeds.env_state, action)
        # replay (the agent learns from shaped rewards; episode stats stay the env's own)
        if shaping is not None:
            step_info = {**info, "gamma": gamma[:, None]}  # [S, 1]: this step's gamma
            reward = shaping(seeds.obs, action, reward, next_obs, step_info)
        step = Transition(
            seeds.obs,
            action,
            reward,
            info["terminated"],
            info["truncated"],
            info["reset"],
            carry=seeds.carry if agent.recurrent else None,
        )
        replay = replay_add(seeds.replay, step, gamma)
        carry = agent.end_episodes(carry, info["reset"])  # the next obs starts an episode
        new = SeedState(seeds.agent, replay, env_state, next_obs, key, carry)
        return new, _episode_stats(done, info)

    init = _make_init(config, env, agent, buffer, exchange, variation)

    def iteration(runner: RunnerState) -> tuple[RunnerState, tuple[StepStats, UpdateMetrics]]:
        # The block counter is shared by the seeds, so its `cond`s stay real branches.
        training = runner.block >= 0
        fp32 = mp.shared_fallback(runner.seeds.agent.loss_scale)
        # collect: prefill_steps steps in the prefill iteration, else one block's
        first = jnp.where(training, prefill + runner.block * cpb, 0)
        steps = jnp.where(training, cpb, prefill)

        def collect(i, carry):
            seeds, stats = carry
            seeds, new = collect_step(seeds, first + i, fp32)
            if buffer.has_spill:  # the replay's host callbacks (L3): every block's end
                due = ((i + 1) % cpb == 0) | (i + 1 == steps)
                seeds = seeds._replace(replay=jax.lax.cond(due, buffer.spill, _same, seeds.replay))
            return seeds, jax.tree.map(jnp.add, stats, new)

        zeros = jnp.zeros(runner.seeds.obs.shape[:1], jnp.float32)
        seeds, stats = jax.lax.fori_loop(
            0, steps, collect, (runner.seeds, StepStats(zeros, zeros, zeros))
        )
        # learn (not in the prefill iteration, whose episodes the metrics leave out)
        seeds, metrics = jax.lax.cond(training, learn, skip_learning, seeds, fp32, runner.block)
        stats = jax.tree.map(lambda x: jnp.where(training, x, 0.0), stats)
        if variation is not None and variation.curriculum.active:  # after training blocks
            values = env.params_of(seeds.env_state)
            new = variation.advance(values, stats.episode_return, stats.episodes, runner.block)
            new = jax.tree.map(lambda a, b: jnp.where(training, a, b), new, values)
            seeds = seeds._replace(env_state=env.with_params(seeds.env_state, new))
        # target
        due = training & ((runner.block + 1) % period == 0)
        agents = jax.lax.cond(due, update_target, lambda a: a, seeds.agent)
        if run.precision.fallback:  # record the shared switch in every seed's state
            scales = mp.record_fallback(agents.loss_scale, mp.shared_fallback(agents.loss_scale))
            agents = agents.replace(loss_scale=scales)
        return RunnerState(seeds._replace(agent=agents), runner.block + 1), (stats, metrics)

    def run_chunk(runner: RunnerState) -> tuple[RunnerState, ChunkMetrics]:
        zeros = jnp.zeros(runner.seeds.obs.shape[:1], jnp.float32)
        totals = (StepStats(zeros, zeros, zeros), UpdateMetrics(zeros, zeros, zeros, zeros))

        def body(_, carry):
            runner, totals = carry
            runner, new = iteration(runner)
            return runner, jax.tree.map(jnp.add, totals, new)

        # the first chunk also runs the prefill iteration (block -1 -> 0)
        blocks = config.blocks_per_chunk + (runner.block < 0).astype(jnp.int32)
        runner, (stats, upd) = jax.lax.fori_loop(0, blocks, body, (runner, totals))
        stats, upd = exchange.sum(stats), exchange.mean(upd)  # over the replicas (if any)
        updates = config.blocks_per_chunk * upb
        return runner, _chunk_metrics(stats, upd, runner.seeds, buffer, updates)

    def evaluate(runner: RunnerState, keys: PRNGKey) -> Array:
        values = None  # each seed's env parameters (its variant; the curriculum's end)
        if variation is not None:
            values = variation.for_evaluation(env.params_of(runner.seeds.env_state))
        if not exchange.active:
            return evaluate_agents(runner.seeds.agent, keys, values)
        # every replica evaluates its own episodes; the seed's return is their mean
        keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, exchange.replica())
        return exchange.mean(evaluate_agents(runner.seeds.agent, keys, values))

    return TrainFns(
        init=init,
        run_chunk=run_chunk,
        evaluate=evaluate,
        run=run,
        agent=agent,
        buffer=buffer,
        seed_axes=seed_axes,
        exchange=exchange,
        variation=variation,
    )
