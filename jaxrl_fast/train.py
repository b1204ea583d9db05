"""The fused training loop (`make_train`) and its thin host shell (`train`).

The loop has its schedule in its shape (DESIGN §3): `init` resets the envs, builds the agent and
replay, and runs the prefill scan; `run_chunk` scans `blocks_per_chunk` blocks, each being
`collect_steps_per_block` collect steps followed by `updates_per_block` gradient steps and, on
block boundaries, a target update. Seeds are a leading `[S]` axis vmapped inside the scan body;
the block counter lives outside the seed vmap, so the target-update `cond` stays a real branch.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import tqdm
from jax.sharding import PartitionSpec as P

from jaxrl_fast import parallel
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.dqn import Agent, AgentState, make_agent
from jaxrl_fast.envs import Env, EnvState, make_env
from jaxrl_fast.networks import QNetwork
from jaxrl_fast.parallel import SEED_AXIS
from jaxrl_fast.precision import Policy, resolve_policy
from jaxrl_fast.replay import Buffer, make_buffer
from jaxrl_fast.replay.sizing import resolve_capacity
from jaxrl_fast.schedules import make_schedules
from jaxrl_fast.types import Array, PRNGKey, Transition


class SeedState(NamedTuple):
    """Everything one seed carries. Under `RunnerState.seeds` every leaf has a leading `[S]`."""

    agent: AgentState
    replay: object
    env_state: EnvState
    obs: Array  # [E, *obs_shape]
    key: PRNGKey


class RunnerState(NamedTuple):
    """The scan carry: per-seed state plus the shared block counter."""

    seeds: SeedState  # leading [S] axis, except the replay's shared cursors (Buffer.seed_axes)
    block: Array  # [] int32, training blocks done


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
    replay: dict  # the buffer's cumulative counters at the chunk's end (`Buffer.metrics`)


class TrainFns(NamedTuple):
    """`init(keys [S]) -> runner` (prefill included); `run_chunk(runner) -> (runner, metrics)`;
    `evaluate(runner, keys [S]) -> [S]` mean return over `eval_episodes` evaluation episodes.
    `seed_axes` gives a `SeedState`'s vmap axes (0 per seed, None shared across seeds)."""

    init: Callable[[PRNGKey], RunnerState]
    run_chunk: Callable[[RunnerState], tuple[RunnerState, ChunkMetrics]]
    evaluate: Callable[[RunnerState, PRNGKey], Array]
    env: Env
    agent: Agent
    buffer: Buffer
    seed_axes: SeedState


class _Acc(NamedTuple):
    ret: Array
    length: Array
    episodes: Array
    loss: Array
    q: Array
    abs_td: Array
    applied: Array


def make_train(
    config: TrainConfig, *, env: Env | None = None, policy: Policy | None = None
) -> TrainFns:
    """Build the fused loop's functions; nothing is compiled here.

    Args:
      config: a validated `TrainConfig`.
      env: an `Env` to use instead of `make_env(config.env.name, config.env.num_envs)`.
      policy: the precision policy; default `resolve_policy(config.precision)` for the first
        local device.

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
    # A pool env (envpool) holds every seed's envs: num_seeds x num_envs, stepped once per
    # collect step outside the seed vmap (DESIGN §1.3).
    pool_size = config.env.num_envs * (config.num_seeds if config.env.is_envpool else 1)
    env = env or make_env(config.env.name, pool_size, atari=config.env.atari, seed=config.seed)
    spec = env.spec
    pooled = not spec.seed_vmappable
    expected = config.env.num_envs * (config.num_seeds if pooled else 1)
    if spec.num_envs != expected:
        raise ValueError(
            f"EnvConfig.num_envs={config.env.num_envs} does not match the env given "
            f"({spec.num_envs} envs; expected {expected}"
            + (" = num_seeds x num_envs for a pool env)." if pooled else ").")
        )
    num_seeds = config.num_seeds
    schedules = make_schedules(config)
    policy = policy or resolve_policy(config.precision)
    seed_loop, conv_impl = resolve_seed_loop(config)
    network = QNetwork.for_policy(config.network, spec, policy, conv_impl=conv_impl)
    agent = make_agent(
        config.dqn,
        network,
        spec.num_actions,
        learning_rate=schedules.learning_rate,
        policy=policy,
    )
    n = config.env.num_envs  # envs per seed
    example = Transition(
        obs=jax.ShapeDtypeStruct((n, *spec.obs_shape), spec.obs_dtype),
        action=jax.ShapeDtypeStruct((n,), jnp.int32),
        reward=jax.ShapeDtypeStruct((n,), jnp.float32),
        terminated=jax.ShapeDtypeStruct((n,), bool),
        truncated=jax.ShapeDtypeStruct((n,), bool),
        reset=jax.ShapeDtypeStruct((n,), bool),
    )
    config = resolve_capacity(config, spec=spec)
    buffer = make_buffer(
        config.replay,
        example,
        gamma=config.dqn.gamma,
        num_seeds=config.num_seeds,
        sync_every=config.collect_steps_per_block,
        updates_per_sync=config.updates_per_block,
        total_updates=config.total_updates,
        seed=config.seed,
        frame_stack=spec.frame_stack,
    )
    cpb = config.collect_steps_per_block
    prefill = config.prefill_steps
    period = config.target_period_blocks
    # vmap axes of a SeedState: the replay's shared cursors are carried once, not per seed.
    # A pool env's state is one for all seeds (not vmapped).
    seed_axes = SeedState(
        agent=0, replay=buffer.seed_axes, env_state=None if pooled else 0, obs=0, key=0
    )

    def _vmap(fn, in_axes, out_axes):
        return jax.vmap(fn, in_axes=in_axes, out_axes=out_axes, axis_name=SEED_AXIS)

    # The seeds' acting and learning: batched (vmap) or one seed after another (lax.map).
    _seeds = _vmap if seed_loop == "vmap" else _seed_map

    def _epsilon(collect_index: Array) -> Array:
        # env steps as float32: an int32 product would overflow past 2^31 env steps.
        return schedules.epsilon(collect_index.astype(jnp.float32) * n).astype(jnp.float32)

    # ---- per-seed work (vmapped over seeds) -------------------------------------------------
    def _fp32(seeds: SeedState) -> Array:
        # Seeds in one program switch to fp32 together: a flag shared by all seeds keeps the
        # switch a real branch under the seed vmap (a per-seed flag would run both branches).
        return jnp.any(seeds.agent.loss_scale.fallback)

    def _record_stats(done, info):
        """Finished episodes' return and length sums and count over the last (env) axis."""
        return (
            jnp.sum(jnp.where(done, info["episode_return"], 0.0), axis=-1),
            jnp.sum(jnp.where(done, info["episode_length"], 0), axis=-1).astype(jnp.float32),
            jnp.sum(done, axis=-1).astype(jnp.float32),
        )

    def _collect(seed: SeedState, epsilon: Array, fp32: Array):
        key, key_act, key_env = jax.random.split(seed.key, 3)
        # act
        action = agent.act(seed.agent, key_act, seed.obs, epsilon, fp32)
        # step envs
        env_state, next_obs, reward, done, info = env.step(key_env, seed.env_state, action)
        # replay
        transition = Transition(
            seed.obs, action, reward, info["terminated"], info["truncated"], info["reset"]
        )
        replay = buffer.add(seed.replay, transition)
        stats = _record_stats(done, info)
        return SeedState(seed.agent, replay, env_state, next_obs, key), stats

    def _to_seeds(x: Array) -> Array:
        return x.reshape(num_seeds, n, *x.shape[1:])

    def _collect_pool(seeds: SeedState, epsilon: Array, fp32: Array):
        """One collect step of all seeds with one pool step: act per seed (vmapped), step the
        pool of `[S * E]` envs once, add to each seed's replay (vmapped)."""

        def _act(seed: SeedState):
            key, key_act, _ = jax.random.split(seed.key, 3)
            return key, agent.act(seed.agent, key_act, seed.obs, epsilon, fp32)

        keys, action = _seeds(_act, (seed_axes,), 0)(seeds)  # [S], [S, E]
        env_state, next_obs, reward, done, info = env.step(
            keys[0], seeds.env_state, action.reshape(num_seeds * n)
        )
        transition = Transition(
            seeds.obs,
            action,
            _to_seeds(reward),
            _to_seeds(info["terminated"]),
            _to_seeds(info["truncated"]),
            _to_seeds(info["reset"]),
        )
        replay = _vmap(buffer.add, (buffer.seed_axes, 0), buffer.seed_axes)(
            seeds.replay, transition
        )
        info = {k: _to_seeds(v) for k, v in info.items()}
        stats = _record_stats(_to_seeds(done), info)
        return SeedState(seeds.agent, replay, env_state, _to_seeds(next_obs), keys), stats

    def _learn(seed: SeedState, fp32: Array):
        key, key_sample = jax.random.split(seed.key)
        batch = buffer.sample(seed.replay, key_sample)
        agent_state, td, m = agent.update(seed.agent, batch, fp32)
        replay = buffer.update_priorities(seed.replay, batch.index, td)
        return seed._replace(agent=agent_state, replay=replay, key=key), m

    def _learn_pool(seeds: SeedState, fp32: Array):
        """One gradient step of every seed (pool path): sampling and priority updates are
        vmapped over the seeds (replay never passes through a `lax.map`, whose outputs would
        copy each seed's ring), the update itself runs as `seed_loop` says."""
        split = jax.vmap(jax.random.split)(seeds.key)
        keys, key_sample = split[:, 0], split[:, 1]
        batch = _vmap(buffer.sample, (buffer.seed_axes, 0), 0)(seeds.replay, key_sample)
        agent_state, td, m = _seeds(agent.update, (0, 0, None), (0, 0, 0))(
            seeds.agent, batch, fp32
        )
        replay = _vmap(buffer.update_priorities, (buffer.seed_axes, 0, 0), buffer.seed_axes)(
            seeds.replay, batch.index, td
        )
        return seeds._replace(agent=agent_state, replay=replay, key=keys), m

    def _learn_all_pooled(seeds: SeedState, block: Array, fp32: Array):
        """`_seed_learn` for every seed at once, on the pool path."""
        if config.updates_per_block == 1:
            seeds, m = _learn_pool(seeds, fp32)
        else:
            seeds, m = jax.lax.scan(
                lambda s, _: _learn_pool(s, fp32), seeds, None, length=config.updates_per_block
            )
            m = jax.tree.map(lambda x: jnp.sum(x, axis=0), m)
        agent_state = jax.lax.cond(
            (block + 1) % period == 0, jax.vmap(agent.update_target), lambda a: a, seeds.agent
        )
        return seeds._replace(agent=agent_state), m

    def _seed_block(seed: SeedState, block: Array, epsilons: Array, fp32: Array):
        seed, stats = jax.lax.scan(lambda s, e: _collect(s, e, fp32), seed, epsilons)
        stats = jax.tree.map(jnp.sum, stats)
        seed, m = _seed_learn(seed, block, fp32)
        return seed, (stats, m)

    def _seed_learn(seed: SeedState, block: Array, fp32: Array):
        if config.updates_per_block == 1:
            seed, m = _learn(seed, fp32)
        else:
            seed, m = jax.lax.scan(
                lambda s, _: _learn(s, fp32), seed, None, length=config.updates_per_block
            )
            m = jax.tree.map(jnp.sum, m)
        # target: the predicate is shared by all seeds, so this stays a real branch under vmap.
        agent_state = jax.lax.cond(
            (block + 1) % period == 0, agent.update_target, lambda a: a, seed.agent
        )
        return seed._replace(agent=agent_state), m

    def _seed_init(key: PRNGKey) -> SeedState:
        key, key_env, key_net = jax.random.split(key, 3)
        env_state, obs = env.reset(key_env)
        agent_state = agent.init(key_net, obs)
        return SeedState(agent_state, buffer.init(), env_state, obs, key)

    def _seed_init_pooled(key: PRNGKey, obs: Array) -> SeedState:
        key, _, key_net = jax.random.split(key, 3)
        return SeedState(agent.init(key_net, obs), buffer.init(), None, obs, key)

    def _collect_all(seeds: SeedState, epsilon: Array, fp32: Array):
        """One collect step of every seed: `([S] state, per-seed stats [S] each)`."""
        if pooled:
            return _collect_pool(seeds, epsilon, fp32)
        return _vmap(_collect, (seed_axes, None, None), (seed_axes, 0))(seeds, epsilon, fp32)

    # ---- the loop ----------------------------------------------------------------------------
    def init(keys: PRNGKey) -> RunnerState:
        if pooled:
            env_state, obs = env.reset(keys[0])
            axes = seed_axes._replace(env_state=None)
            seeds = _vmap(_seed_init_pooled, (0, 0), axes)(keys, _to_seeds(obs))
            seeds = seeds._replace(env_state=env_state)
        else:
            seeds = _vmap(_seed_init, 0, seed_axes)(keys)

        def prefill_step(seeds, i):
            seeds, _ = _collect_all(seeds, _epsilon(i), jnp.zeros((), bool))
            return seeds._replace(replay=buffer.host_sync(seeds.replay)), None

        seeds, _ = jax.lax.scan(prefill_step, seeds, jnp.arange(prefill, dtype=jnp.int32))
        return RunnerState(seeds=seeds, block=jnp.zeros((), jnp.int32))

    def iteration(carry, _):
        runner, acc = carry
        first = prefill + runner.block * cpb
        epsilons = _epsilon(first + jnp.arange(cpb, dtype=jnp.int32))
        fp32 = _fp32(runner.seeds)
        if pooled:  # collect outside the seed vmap (one pool step per collect step), then learn
            seeds, stats = jax.lax.scan(
                lambda s, e: _collect_all(s, e, fp32), runner.seeds, epsilons
            )
            stats = jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)
            seeds, m = _learn_all_pooled(seeds, runner.block, fp32)
        else:
            seeds, (stats, m) = _seeds(_seed_block, (seed_axes, None, None, None), (seed_axes, 0))(
                runner.seeds, runner.block, epsilons, fp32
            )
        if policy.fallback:  # record the shared switch in every seed's state
            scale = seeds.agent.loss_scale
            scale = scale._replace(fallback=jnp.broadcast_to(_fp32(seeds), scale.fallback.shape))
            seeds = seeds._replace(agent=seeds.agent.replace(loss_scale=scale))
        # The buffer's host callbacks (L3), once per iteration, outside the seed vmap.
        seeds = seeds._replace(replay=buffer.host_sync(seeds.replay))
        acc = _Acc(
            ret=acc.ret + stats[0],
            length=acc.length + stats[1],
            episodes=acc.episodes + stats[2],
            loss=acc.loss + m["loss"],
            q=acc.q + m["q"],
            abs_td=acc.abs_td + m["abs_td"],
            applied=acc.applied + m["applied"],
        )
        return (RunnerState(seeds, runner.block + 1), acc), None

    def run_chunk(runner: RunnerState) -> tuple[RunnerState, ChunkMetrics]:
        num_seeds = runner.seeds.obs.shape[0]
        zeros = jnp.zeros((num_seeds,), jnp.float32)
        acc = _Acc(zeros, zeros, zeros, zeros, zeros, zeros, zeros)
        (runner, acc), _ = jax.lax.scan(
            iteration, (runner, acc), None, length=config.blocks_per_chunk
        )
        # Means over the updates applied (a skipped mixed-precision step reports nothing).
        updates = jnp.where(acc.applied > 0, acc.applied, jnp.nan)
        eps = jnp.where(acc.episodes > 0, acc.episodes, jnp.nan)
        scale = runner.seeds.agent.loss_scale
        metrics = ChunkMetrics(
            episode_return=acc.ret / eps,
            episode_length=acc.length / eps,
            episodes=acc.episodes,
            loss=acc.loss / updates,
            q=acc.q / updates,
            abs_td=acc.abs_td / updates,
            skipped=float(config.blocks_per_chunk * config.updates_per_block) - acc.applied,
            loss_scale=scale.scale,
            fp32_fallback=scale.fallback,
            replay=buffer.metrics(runner.seeds.replay),
        )
        return runner, metrics

    def evaluate(runner: RunnerState, keys: PRNGKey) -> Array:
        return evaluate_greedy(config, runner.seeds.agent, keys, agent=agent)

    return TrainFns(
        init=init,
        run_chunk=run_chunk,
        evaluate=evaluate,
        env=env,
        agent=agent,
        buffer=buffer,
        seed_axes=seed_axes,
    )


def resolve_seed_loop(config: TrainConfig) -> tuple[str, str]:
    """The `(seed_loop, conv_impl)` a config runs with on the default backend.

    `seed_loop="auto"` maps the seeds (one after another) on CPU for the Nature torso: on a
    few cores a batch of seeds runs no faster per FLOP, and vmapped convolutions with a kernel
    per seed become grouped ones, which XLA:CPU runs slowly. `conv_impl="auto"` on CPU is
    conv_canonical_grads, or patches when several seeds are vmapped (`networks.Conv`).
    """
    cpu = jax.default_backend() == "cpu"
    seed_loop = config.seed_loop
    if seed_loop == "auto":
        nature = config.network.kind == "nature"
        seed_loop = "map" if cpu and nature and config.num_seeds > 1 else "vmap"
    conv_impl = config.network.conv_impl
    if conv_impl == "auto" and cpu:
        batched = seed_loop == "vmap" and config.num_seeds > 1
        conv_impl = "patches" if batched else "conv_canonical_grads"
    return seed_loop, conv_impl


def _axes_of_leaves(axes, tree):
    """Expand a vmap-style axes prefix (0 or None per subtree) to one int per leaf of `tree`
    (-1 for None: a value shared by the seeds)."""
    if axes is None or isinstance(axes, int):
        return jax.tree.map(lambda _: -1 if axes is None else axes, tree)
    parts = [_axes_of_leaves(a, t) for a, t in zip(axes, tree, strict=True)]
    return type(tree)(*parts) if hasattr(tree, "_fields") else type(tree)(parts)


def _seed_map(fn, in_axes, out_axes):
    """`jax.vmap(fn, in_axes, out_axes)` computed as a `lax.map`: one seed after another.

    Leaves with axis 0 are split by seed; leaves with axis None are passed whole to every
    seed. An output with axis None is shared by the seeds (the same for each, as vmap
    requires), so the first seed's is returned.
    """

    def mapped(*args):
        leaves, treedef = jax.tree.flatten(args)
        axes = jax.tree.leaves(_axes_of_leaves(tuple(in_axes), args))
        if len(axes) != len(leaves):
            raise ValueError("in_axes do not match the arguments' structure")
        per_seed = [x for x, a in zip(leaves, axes, strict=True) if a == 0]

        def one(xs):
            it = iter(xs)
            full = [next(it) if a == 0 else x for x, a in zip(leaves, axes, strict=True)]
            return fn(*jax.tree.unflatten(treedef, full))

        out = jax.lax.map(one, per_seed)
        out_leaf_axes = _axes_of_leaves(out_axes, out)
        return jax.tree.map(lambda x, a: x if a == 0 else x[0], out, out_leaf_axes)

    return mapped


def evaluate_greedy(
    config: TrainConfig, agents: AgentState, key: PRNGKey, *, agent: Agent, env: Env | None = None
) -> Array:
    """Mean undiscounted return of `eval_episodes` episodes per seed, played greedily (or
    epsilon-greedily with `config.eval_epsilon`).

    Args:
      config: the run's config (env name, eval_episodes).
      agents: `AgentState` with a leading `[S]` axis.
      key: a typed key, or `[S]` typed keys (one per seed).
      agent: the agent's functions (for `act`).
      env: an env with `eval_episodes` parallel envs; by default built from `config.env.name`.

    Returns:
      `[S]` float32 mean return (NaN if `eval_episodes` is 0).
    """
    episodes = max(config.eval_episodes, 1)
    epsilon = jnp.float32(config.eval_epsilon)
    if config.env.is_envpool:
        return _evaluate_pool(config, agents, key, agent=agent, env=env)
    env = env or make_env(config.env.name, episodes)
    horizon = env.spec.max_episode_steps + 1
    num_seeds = jax.tree.leaves(agents.grad_steps)[0].shape[0]
    fp32 = jnp.any(agents.loss_scale.fallback)  # shared by the seeds, as in training

    def one_seed(agent_state: AgentState, key: PRNGKey) -> Array:
        key, key_reset = jax.random.split(key)
        env_state, obs = env.reset(key_reset)

        def body(carry, key_step):
            env_state, obs, total, finished = carry
            key_act, key_env = jax.random.split(key_step)
            action = agent.act(agent_state, key_act, obs, epsilon, fp32)
            env_state, obs, reward, done, _ = env.step(key_env, env_state, action)
            total = total + jnp.where(finished, 0.0, reward)
            finished = jnp.logical_or(finished, done)
            return (env_state, obs, total, finished), None

        init = (env_state, obs, jnp.zeros((episodes,), jnp.float32), jnp.zeros((episodes,), bool))
        (_, _, total, _), _ = jax.lax.scan(body, init, jax.random.split(key, horizon))
        return jnp.mean(total)

    keys = key if key.shape == (num_seeds,) else jax.random.split(key, num_seeds)
    returns = jax.vmap(one_seed)(agents, keys)
    if config.eval_episodes == 0:
        return jnp.full((num_seeds,), jnp.nan, jnp.float32)
    return returns


def _evaluate_pool(
    config: TrainConfig, agents: AgentState, key: PRNGKey, *, agent: Agent, env: Env | None
) -> Array:
    """`evaluate_greedy` for a pool env: one pool of `[S * episodes]` whole games, played until
    every game has ended (at most `max_episode_steps` steps)."""
    num_seeds = jax.tree.leaves(agents.grad_steps)[0].shape[0]
    episodes = max(config.eval_episodes, 1)
    env = env or make_env(
        config.env.name,
        num_seeds * episodes,
        atari=config.env.atari,
        seed=config.seed + 1,
        evaluation=True,
    )
    fp32 = jnp.any(agents.loss_scale.fallback)
    epsilon = jnp.float32(config.eval_epsilon)
    keys = key if key.shape == (num_seeds,) else jax.random.split(key, num_seeds)
    env_state, obs = env.reset(keys[0])
    zeros = jnp.zeros((num_seeds * episodes,), jnp.float32)

    def act(agent_state, key, obs):
        return agent.act(agent_state, key, obs, epsilon, fp32)

    def cond(carry):
        t, _, _, _, finished, _ = carry
        return jnp.logical_and(t <= env.spec.max_episode_steps, ~jnp.all(finished))

    def body(carry):
        t, env_state, obs, total, finished, keys = carry
        split = jax.vmap(jax.random.split)(keys)
        keys, key_act = split[:, 0], split[:, 1]
        action = jax.vmap(act)(agents, key_act, obs.reshape(num_seeds, episodes, *obs.shape[1:]))
        env_state, obs, reward, done, _ = env.step(keys[0], env_state, action.reshape(-1))
        total = total + jnp.where(finished, 0.0, reward)
        return t + 1, env_state, obs, total, finished | done, keys

    init = (jnp.zeros((), jnp.int32), env_state, obs, zeros, zeros > 0, keys)
    _, _, _, total, _, _ = jax.lax.while_loop(cond, body, init)
    if config.eval_episodes == 0:
        return jnp.full((num_seeds,), jnp.nan, jnp.float32)
    return jnp.mean(total.reshape(num_seeds, episodes), axis=1)


# ---- host shell ----------------------------------------------------------------------------------
@dataclasses.dataclass
class TrainResult:
    """What `train` returns.

    Attributes:
      config: the run's config.
      runner: final `RunnerState` (device arrays; `runner.seeds.agent.params` are the weights).
      final_return: `[S]` mean evaluation return over `eval_episodes` episodes at the end
        (greedy, or epsilon-greedy with `eval_epsilon`).
      train_return: `[S]` mean training-episode return over the last chunk (epsilon-greedy).
      history: one dict per chunk (env steps, per-seed means of return, loss, Q, |TD|).
      env_steps: env steps per seed (prefill included).
      compile_time_s: seconds spent compiling init, run_chunk and evaluate.
      run_time_s: seconds running init (prefill) and all chunks, compile excluded.
      init_time_s: the part of `run_time_s` spent in init (env reset, prefill).
      eval_time_s: seconds running the final evaluation.
      wall_time_s: whole call, compile included.
      num_devices: devices the seeds were spread over.
      precision: the precision policy the run used, in words (`Policy.describe`).
      fp32_fallback_env_steps: env steps (per seed) at the end of the chunk in which the compute
        switched to fp32, or None if it never did.
    """

    config: TrainConfig
    runner: RunnerState
    final_return: np.ndarray
    train_return: np.ndarray
    history: list[dict]
    env_steps: int
    compile_time_s: float
    run_time_s: float
    init_time_s: float
    eval_time_s: float
    wall_time_s: float
    num_devices: int = 1
    precision: str = ""
    fp32_fallback_env_steps: int | None = None

    @property
    def env_steps_per_s(self) -> float:
        """Aggregate env steps per second over all seeds, compile excluded."""
        return self.config.num_seeds * self.env_steps / max(self.run_time_s, 1e-9)

    @property
    def train_env_steps_per_s(self) -> float:
        """Aggregate env steps per second of the training phase only (prefill excluded)."""
        steps = self.config.num_seeds * (self.env_steps - self.config.learning_starts)
        return steps / max(self.run_time_s - self.init_time_s, 1e-9)

    def summary(self) -> dict:
        """JSON-ready summary: per-seed final returns and the run's timings."""
        return {
            "env": self.config.env.name,
            "num_seeds": self.config.num_seeds,
            "num_devices": self.num_devices,
            "env_steps_per_seed": self.env_steps,
            "seeds": [
                {
                    "seed_index": i,
                    "final_return": _num(self.final_return[i]),
                    "train_return": _num(self.train_return[i]),
                }
                for i in range(self.config.num_seeds)
            ],
            "mean_final_return": _num(np.nanmean(self.final_return))
            if np.isfinite(self.final_return).any()
            else None,
            "wall_time_s": self.wall_time_s,
            "compile_time_s": self.compile_time_s,
            "run_time_s": self.run_time_s,
            "eval_time_s": self.eval_time_s,
            "env_steps_per_s": self.env_steps_per_s,
            "train_env_steps_per_s": self.train_env_steps_per_s,
            "precision": self.precision,
            "fp32_fallback_env_steps": self.fp32_fallback_env_steps,
            "config": self.config.to_dict(),
        }


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def train(
    config: TrainConfig,
    *,
    progress: bool = True,
    on_chunk: Callable[[dict], None] | None = None,
    env: Env | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> TrainResult:
    """Train `config.num_seeds` agents in one compiled program and evaluate them greedily.

    The shell compiles `init` (prefill included), `run_chunk` (donating the runner) and the
    evaluation once, runs `config.chunks` chunks while showing progress, checks the loss for
    NaN/inf between chunks, and never changes the numbers: any `num_chunks` gives bitwise the
    same parameters for the same seed.

    Args:
      config: the run.
      progress: show a live progress bar (env steps, env-steps/s, mean episode return).
      on_chunk: called after each chunk with that chunk's record (a dict).
      env: optional env to train on instead of `config.env.name`.
      devices: devices to spread the seeds over (default: all local devices); the most that
        divide `num_seeds` are used, with no communication between them. On a CPU call
        `jaxrl_fast.parallel.use_cpu_cores()` first to get one device per core. A seed's
        numbers match a one-device run to float rounding (XLA vectorises the smaller per-device
        batch differently), not bitwise; learning amplifies such differences over a long run.

    Returns:
      A `TrainResult`.

    Raises:
      FloatingPointError: the loss became NaN or inf (the message names the chunk and seeds).
    """
    wall = time.perf_counter()
    _warn_if_few_chunks(config)
    device = (list(devices) if devices is not None else jax.local_devices())[0]
    policy = resolve_policy(config.precision, device)
    fns = make_train(config, env=env, policy=policy)
    try:
        return _train(config, fns, wall, progress=progress, on_chunk=on_chunk, devices=devices)
    finally:
        if fns.buffer.store is not None:
            fns.buffer.store.close()


def _warn_if_few_chunks(config: TrainConfig) -> None:
    """Warn when the automatic chunking gives little progress (a block count with no divisor
    near 20, e.g. a prime), naming a total_env_steps that chunks well."""
    if config.num_chunks is not None or config.num_blocks < 20 or config.chunks >= 5:
        return
    blocks = round(config.num_blocks / 20) * 20
    better = config.learning_starts + blocks * config.train_frequency
    warnings.warn(
        f"{config.num_blocks} training blocks have no divisor near 20, so the run is one of "
        f"{config.chunks} host call(s): progress, the learning curve and NaN checks come only "
        f"{config.chunks} time(s). total_env_steps={better} ({blocks} blocks) gives 20 chunks; "
        f"or set num_chunks.",
        UserWarning,
        stacklevel=3,
    )


def _replay_record(now: dict, before: dict) -> dict:
    """One chunk's replay counters: totals plus this chunk's L2 hit rate."""
    now = {k: np.asarray(v) for k, v in now.items()}
    rec = {k: v.tolist() for k, v in now.items()}
    if "rows_sampled" in now:
        drawn = now["rows_sampled"] - before.get("rows_sampled", 0.0)
        from_l3 = now["l3_rows_sampled"] - before.get("l3_rows_sampled", 0.0)
        rec["l2_hit_rate"] = np.where(drawn > 0, 1.0 - from_l3 / np.maximum(drawn, 1), 1.0).tolist()
    return rec


def _train(config, fns, wall, *, progress, on_chunk, devices) -> TrainResult:
    keys = jax.random.split(jax.random.key(config.seed), config.num_seeds)
    eval_keys = jax.random.split(
        jax.random.fold_in(jax.random.key(config.seed), 1), config.num_seeds
    )
    init_fn, run_fn, eval_fn = fns.init, fns.run_chunk, fns.evaluate
    used = parallel.seed_devices(config.num_seeds, devices)
    if (fns.buffer.store is not None or not fns.env.spec.seed_vmappable) and len(used) > 1:
        # One ordered host callback stream per program: the L3 tier runs its seeds on one
        # device, and so does a pool env (one pool for all seeds).
        used = used[:1]
    if len(used) > 1:
        mesh = parallel.seed_mesh(used)
        spec = RunnerState(seeds=parallel.seed_specs(fns.seed_axes), block=P())
        init_fn = parallel.shard_over_seeds(fns.init, mesh, P(SEED_AXIS), spec)
        run_fn = parallel.shard_over_seeds(fns.run_chunk, mesh, (spec,), (spec, P(SEED_AXIS)))
        eval_fn = parallel.shard_over_seeds(fns.evaluate, mesh, (spec, P(SEED_AXIS)), P(SEED_AXIS))
        keys, eval_keys = parallel.put_seeds(keys, mesh), parallel.put_seeds(eval_keys, mesh)
    else:
        keys, eval_keys = jax.device_put((keys, eval_keys), used[0])

    t = time.perf_counter()
    init_jit = jax.jit(init_fn)
    init = init_jit.lower(keys).compile()
    abstract = init_jit.eval_shape(keys)
    run_chunk = jax.jit(run_fn, donate_argnums=0).lower(abstract).compile()
    evaluate = jax.jit(eval_fn).lower(abstract, eval_keys).compile()
    compile_time = time.perf_counter() - t

    steps_per_chunk = config.blocks_per_chunk * config.train_frequency
    bar = tqdm.tqdm(
        total=config.total_env_steps,
        desc=f"{config.env.name} x{config.num_seeds} seed{'s' if config.num_seeds > 1 else ''}",
        unit="step",
        unit_scale=True,
        disable=not progress,
        dynamic_ncols=True,
    )
    t = time.perf_counter()
    runner = init(keys)
    jax.block_until_ready(runner)
    init_time = time.perf_counter() - t
    bar.update(config.learning_starts)
    history: list[dict] = []
    replay_prev: dict = {}
    pending = None
    env_steps = config.learning_starts
    policy = fns.agent.policy
    if progress:
        bar.write(policy.describe())
        if config.num_seeds > 1:
            loop, conv = resolve_seed_loop(config)
            how = "batched (vmap)" if loop == "vmap" else "one after another (lax.map)"
            conv_note = (
                f", Nature torso conv_impl {conv}" if config.network.kind == "nature" else ""
            )
            bar.write(f"seeds: {config.num_seeds} {how}{conv_note}")
    fallback_at: list[int] = []

    def _record(chunk_index: int, metrics: ChunkMetrics, env_steps: int) -> None:
        m = jax.device_get(metrics)
        if not np.all(np.isfinite(m.loss)):
            bad = np.flatnonzero(~np.isfinite(m.loss)).tolist()
            updates = config.blocks_per_chunk * config.updates_per_block
            if policy.skip_nonfinite and np.all(np.asarray(m.skipped)[bad] >= updates):
                raise FloatingPointError(
                    f"every update in chunk {chunk_index} (env steps <= {env_steps}) was skipped "
                    f"for non-finite gradients for seed indices {bad} ({policy.describe()}); set "
                    f"PrecisionConfig.fallback=True, compute='fp32', or lower the learning rate."
                )
            raise FloatingPointError(
                f"loss became non-finite in chunk {chunk_index} (env steps <= {env_steps}) for "
                f"seed indices {bad}; lower DQNConfig.learning_rate or set max_grad_norm."
            )
        if not fallback_at and np.any(m.fp32_fallback):
            fallback_at.append(env_steps)
            warnings.warn(
                f"precision: compute switched to fp32 in chunk {chunk_index} (env steps <= "
                f"{env_steps}) after {int(np.max(np.asarray(m.skipped)))} skipped updates in "
                f"the chunk; the run continues in fp32",
                RuntimeWarning,
                stacklevel=3,
            )
        elapsed = time.perf_counter() - t
        rec = {
            "chunk": chunk_index,
            "env_steps": env_steps,
            "elapsed_s": elapsed,
            **{f: np.asarray(getattr(m, f)).tolist() for f in ChunkMetrics._fields[:-1]},
        }
        if m.replay:
            rec["replay"] = _replay_record(m.replay, replay_prev)
            replay_prev.clear()
            replay_prev.update(m.replay)
        history.append(rec)
        rets = np.asarray(m.episode_return)
        sps = config.num_seeds * env_steps / max(elapsed, 1e-9)
        mean_ret = float(np.nanmean(rets)) if np.isfinite(rets).any() else float("nan")
        bar.set_postfix_str(f"env-steps/s={sps:,.0f} return={mean_ret:.1f}", refresh=False)
        bar.update(steps_per_chunk)
        if on_chunk is not None:
            on_chunk(rec)

    # Dispatch chunk k+1 before reading chunk k's metrics, so the device never waits on the host.
    for chunk in range(config.chunks):
        runner, metrics = run_chunk(runner)
        env_steps += steps_per_chunk
        if pending is not None:
            _record(*pending)
        pending = (chunk, metrics, env_steps)
    _record(*pending)
    jax.block_until_ready(runner)
    run_time = time.perf_counter() - t
    bar.close()

    t = time.perf_counter()
    final_return = np.asarray(evaluate(runner, eval_keys))
    eval_time = time.perf_counter() - t
    last = history[-1]["episode_return"]
    return TrainResult(
        config=config,
        runner=runner,
        final_return=final_return,
        train_return=np.asarray(last, dtype=np.float64),
        history=history,
        env_steps=env_steps,
        compile_time_s=compile_time,
        run_time_s=run_time,
        init_time_s=init_time,
        eval_time_s=eval_time,
        wall_time_s=time.perf_counter() - wall,
        num_devices=len(used),
        precision=policy.describe(),
        fp32_fallback_env_steps=fallback_at[0] if fallback_at else None,
    )
