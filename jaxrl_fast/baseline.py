"""The conventional, unfused DQN loop: the baseline all jaxrl_fast speed-ups are measured against.

`train_unfused` is the loop a user would write without this library, in the style of CleanRL's
`dqn_jax.py`: a Python `for` loop over collect steps that calls a jitted `act` and a jitted
`env.step`, copies each step to host memory, keeps the replay in host numpy arrays (observation
and next observation stored explicitly), samples it with a numpy RNG, and calls a jitted
gradient step. It runs the *same* algorithm as the fused loop of `jaxrl_fast.train` with the
same hyperparameters: the same env, network, optimiser and learning-rate schedule
(`make_agent`), the same epsilon schedule (collect step `i` uses `epsilon(i * num_envs)`), and
the same schedule shape (`learning_starts // num_envs` prefill steps, then blocks of
`train_frequency // num_envs` collect steps followed by `updates_per_block` updates, with a
target update after every `target_period_blocks`-th block). Only one seed is trained.

It exists so benchmarks compare the fused program against an honest, reasonably efficient
conventional implementation (every jitted function is compiled once, before timing; keys are
split inside the jitted calls; each step makes a single device-to-host copy) rather than against
a strawman. Differences that remain are those of the conventional design itself: one dispatch
per act, env step and update, host round trips every step, and host-side replay sampling.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.dqn import AgentState, make_agent
from jaxrl_fast.envs import Env, make_env
from jaxrl_fast.networks import QNetwork
from jaxrl_fast.precision import resolve_policy
from jaxrl_fast.schedules import make_schedules
from jaxrl_fast.train import evaluate_greedy
from jaxrl_fast.types import Array, Batch, PRNGKey

__all__ = ["BaselineResult", "HostReplay", "baseline_blocks", "train_unfused"]


class HostReplay:
    """Uniform ring replay in host (numpy) memory, storing `obs` and `next_obs` explicitly.

    This is the conventional buffer (SB3/CleanRL style): one row per transition, sampled
    uniformly with replacement. Reset steps of the env (next-step auto-reset, see
    `envs/base.py`) are not transitions: `add` drops their rows, so every stored row goes from an
    observation to the next observation of the *same* episode.

    Args:
      capacity: rows kept; the oldest row is overwritten once full.
      obs_shape: shape of one observation.
      obs_dtype: storage dtype of observations (the env's own dtype).
      seed: seed of the numpy generator used by `sample`.

    Raises:
      ValueError: `capacity` is not a positive int.

    Examples:
      >>> import numpy as np
      >>> replay = HostReplay(4, (2,), np.float32, seed=0)
      >>> obs = np.eye(2, dtype=np.float32)
      >>> replay.add(obs, np.array([0, 1]), np.array([1.0, 0.0]), np.array([True, False]),
      ...            obs[::-1], np.array([False, True]))
      1
      >>> replay.size, replay.sample(3).obs.shape
      (1, (3, 2))
    """

    def __init__(
        self, capacity: int, obs_shape: tuple[int, ...], obs_dtype, seed: int, gamma: float = 0.99
    ) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity <= 0:
            raise ValueError(
                f"HostReplay capacity={capacity!r} is not allowed; expected a positive int."
            )
        self.capacity = capacity
        self.gamma = float(gamma)
        self.obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.action = np.zeros((capacity,), np.int32)
        self.reward = np.zeros((capacity,), np.float32)
        self.terminated = np.zeros((capacity,), bool)
        self.insert_pos = 0
        self.size = 0
        self._rng = np.random.default_rng(seed)

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        next_obs: np.ndarray,
        reset: np.ndarray,
    ) -> int:
        """Store one env step of every env, skipping reset-step rows.

        Args:
          obs: `[E, *obs_shape]` observations the actions were taken in.
          action: `[E]` int actions.
          reward: `[E]` float rewards.
          terminated: `[E]` bool, the episode ended in a terminal state.
          next_obs: `[E, *obs_shape]` observations the step returned (the real final observation
            where the episode ended).
          reset: `[E]` bool, the step was a reset step (its action was ignored); such rows are not
            transitions and are not stored.

        Returns:
          The number of rows stored.
        """
        keep = ~np.asarray(reset, bool)
        n = int(keep.sum())
        if n == 0:
            return 0
        if n > self.capacity:  # more new rows than room: only the newest ones survive
            keep[np.flatnonzero(keep)[: n - self.capacity]] = False
            n = self.capacity
        rows = (self.insert_pos + np.arange(n)) % self.capacity
        self.obs[rows] = obs[keep]
        self.next_obs[rows] = next_obs[keep]
        self.action[rows] = action[keep]
        self.reward[rows] = reward[keep]
        self.terminated[rows] = terminated[keep]
        self.insert_pos = (self.insert_pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        return n

    def sample(self, batch_size: int) -> Batch:
        """Draw `batch_size` stored transitions uniformly, with replacement.

        Returns:
          A `Batch` of numpy arrays with leading `[batch_size]`; `weight` is all ones and `index`
          holds the sampled rows.

        Raises:
          ValueError: the buffer is empty.
        """
        if self.size == 0:
            raise ValueError("HostReplay.sample: the buffer is empty; add transitions first.")
        idx = self._rng.integers(0, self.size, size=batch_size)
        return Batch(
            obs=self.obs[idx],
            action=self.action[idx],
            reward=self.reward[idx],
            discount=np.where(self.terminated[idx], 0.0, self.gamma).astype(np.float32),
            next_obs=self.next_obs[idx],
            weight=np.ones((batch_size,), np.float32),
            index=idx.astype(np.int32),
        )


@dataclasses.dataclass
class BaselineResult:
    """What `train_unfused` returns.

    Attributes:
      config: the run's config.
      agent: final `AgentState` of the one seed (no seed axis); `agent.params` are the weights.
      env_steps: env steps run (prefill included).
      compile_time_s: seconds compiling every jitted function (done once, before timing).
      run_time_s: seconds of the training loop (env reset, prefill and blocks), compile excluded.
      prefill_time_s: the part of `run_time_s` spent before the first update.
      eval_time_s: seconds running the final greedy evaluation.
      wall_time_s: the whole call.
      episode_returns: returns of the training episodes that ended, in order of completion.
      final_return: mean greedy return over `config.eval_episodes` episodes (NaN if 0).
    """

    config: TrainConfig
    agent: AgentState
    env_steps: int
    compile_time_s: float
    run_time_s: float
    prefill_time_s: float
    eval_time_s: float
    wall_time_s: float
    episode_returns: list[float]
    final_return: float

    @property
    def params(self):
        """The final online network parameters."""
        return self.agent.params

    @property
    def env_steps_per_s(self) -> float:
        """Env steps per second of the training loop, compile excluded."""
        return self.env_steps / max(self.run_time_s, 1e-9)

    @property
    def train_env_steps_per_s(self) -> float:
        """Env steps per second after the prefill (the part with updates)."""
        steps = self.env_steps - self.config.learning_starts
        return steps / max(self.run_time_s - self.prefill_time_s, 1e-9)

    def summary(self) -> dict:
        """JSON-ready summary of the run's timings and returns."""
        last = self.episode_returns[-100:]
        return {
            "env": self.config.env.name,
            "env_steps": self.env_steps,
            "compile_time_s": self.compile_time_s,
            "run_time_s": self.run_time_s,
            "eval_time_s": self.eval_time_s,
            "wall_time_s": self.wall_time_s,
            "env_steps_per_s": self.env_steps_per_s,
            "train_env_steps_per_s": self.train_env_steps_per_s,
            "episodes": len(self.episode_returns),
            "train_return_last_100": float(np.mean(last)) if last else None,
            "final_return": self.final_return if np.isfinite(self.final_return) else None,
        }


def baseline_blocks(config: TrainConfig, max_env_steps: int | None = None) -> int:
    """Return the number of training blocks `train_unfused` runs.

    Args:
      config: the run.
      max_env_steps: stop after at most this many env steps (rounded down to whole blocks);
        None runs all `config.total_env_steps`.

    Raises:
      ValueError: `max_env_steps` is not None or an int in
        `[learning_starts + train_frequency, total_env_steps]`.

    Examples:
      >>> from jaxrl_fast import presets
      >>> baseline_blocks(presets.get("cartpole-cleanrl"), max_env_steps=30_005)
      2000
    """
    if max_env_steps is None:
        return config.num_blocks
    low = config.learning_starts + config.train_frequency
    ok = (
        isinstance(max_env_steps, (int, np.integer))
        and not isinstance(max_env_steps, bool)
        and low <= max_env_steps <= config.total_env_steps
    )
    if not ok:
        raise ValueError(
            f"train_unfused(max_env_steps={max_env_steps!r}) is not allowed; expected None or an "
            f"int in [learning_starts + train_frequency = {low}, total_env_steps = "
            f"{config.total_env_steps}] (at least one training block after the prefill)."
        )
    return (int(max_env_steps) - config.learning_starts) // config.train_frequency


def train_unfused(
    config: TrainConfig,
    *,
    max_env_steps: int | None = None,
    progress: bool = False,
    env: Env | None = None,
) -> BaselineResult:
    """Train one seed with the conventional loop: Python steps, host replay, jitted updates.

    The schedule is the fused loop's: `config.prefill_steps` collect steps without updates, then
    blocks of `config.collect_steps_per_block` collect steps, each followed by
    `config.updates_per_block` gradient steps on uniform host-replay samples, and a target update
    after block `b` (0-based) when `(b + 1) % config.target_period_blocks == 0`. Only seed 0 of
    the config (`split(key(config.seed), num_seeds)[0]`) is trained.

    Args:
      config: the run (`num_seeds` and `num_chunks` are ignored).
      max_env_steps: stop after at most this many env steps, rounded down to whole blocks (for
        benchmarks); None runs `config.total_env_steps`. Schedules still span the full run.
      progress: show a progress bar.
      env: an `Env` to use instead of `make_env(config.env.name, config.env.num_envs)`.

    Returns:
      A `BaselineResult`.

    Raises:
      ValueError: bad `max_env_steps` (see `baseline_blocks`), or `env` has a different
        number of envs than `config.env.num_envs`.

    Examples:
      >>> from jaxrl_fast.config import EnvConfig, ReplayConfig, TrainConfig
      >>> cfg = TrainConfig(env=EnvConfig(name="probe-bandit", num_envs=2),
      ...                   replay=ReplayConfig(capacity=64, batch_size=8), total_env_steps=40,
      ...                   learning_starts=20, train_frequency=2, eval_episodes=1)
      >>> result = train_unfused(cfg, max_env_steps=31)
      >>> result.env_steps, int(result.agent.grad_steps)
      (30, 5)
    """
    wall = time.perf_counter()
    num_blocks = baseline_blocks(config, max_env_steps)
    host_pool = None
    if env is None and config.env.is_envpool:
        # The conventional Atari loop steps envpool through its ordinary Python API.
        from jaxrl_fast.envs.envpool_env import HostPool

        host_pool = HostPool(
            config.env.name, config.env.num_envs, config.env.atari, seed=config.seed
        )
    env = env or host_pool or make_env(config.env.name, config.env.num_envs)
    spec = env.spec
    if spec.num_envs != config.env.num_envs:
        raise ValueError(
            f"EnvConfig.num_envs={config.env.num_envs} does not match the env given "
            f"({spec.num_envs} envs)."
        )
    n = spec.num_envs
    schedules = make_schedules(config)
    policy = resolve_policy(config.precision)  # the same precision policy as `train`
    # A conventional loop calls each update on its own, where XLA:CPU's plain convolutions are
    # fastest (the fused loop's "auto" choice targets convolutions inside a loop).
    conv_impl = "conv" if config.network.conv_impl == "auto" else config.network.conv_impl
    network = QNetwork.for_policy(config.network, spec, policy, conv_impl=conv_impl)
    agent = make_agent(
        config.dqn,
        network,
        spec.num_actions,
        learning_rate=schedules.learning_rate,
        policy=policy,
    )
    seed_key = jax.random.split(jax.random.key(config.seed), config.num_seeds)[0]
    eval_key = jax.random.fold_in(jax.random.key(config.seed), 1)

    # ---- the jitted pieces a conventional loop calls from Python -----------------------------
    def _reset(key: PRNGKey):
        key, key_env, key_net = jax.random.split(key, 3)
        env_state, obs = env.reset(key_env)
        return key, env_state, obs, agent.init(key_net, obs)

    def _act(agent_state: AgentState, key: PRNGKey, obs: Array, collect_index: Array):
        # Same key use and epsilon as the fused loop's collect step.
        key, key_act, key_env = jax.random.split(key, 3)
        epsilon = schedules.epsilon(collect_index * n).astype(jnp.float32)
        return key, key_env, agent.act(agent_state, key_act, obs, epsilon)

    def _evaluate(agent_state: AgentState, key: PRNGKey) -> Array:
        agents = jax.tree.map(lambda x: x[None], agent_state)  # evaluate_greedy wants [S]
        return evaluate_greedy(config, agents, key, agent=agent)[0]

    # Compile everything once, before timing (as `train` does), against abstract inputs.
    t = time.perf_counter()
    index_a = jax.ShapeDtypeStruct((), jnp.int32)
    if host_pool is None:
        reset = jax.jit(_reset).lower(seed_key).compile()
        _, env_state_a, obs_a, agent_a = jax.eval_shape(_reset, seed_key)
        act = jax.jit(_act).lower(agent_a, seed_key, obs_a, index_a).compile()
        _, _, action_a = jax.eval_shape(_act, agent_a, seed_key, obs_a, index_a)
        step = jax.jit(env.step).lower(seed_key, env_state_a, action_a).compile()
    else:

        def _reset_agent(key: PRNGKey, obs: Array):
            key, _, key_net = jax.random.split(key, 3)
            return key, agent.init(key_net, obs)

        obs_a = jax.ShapeDtypeStruct((n, *spec.obs_shape), spec.obs_dtype)
        reset_agent = jax.jit(_reset_agent).lower(seed_key, obs_a).compile()
        _, agent_a = jax.eval_shape(_reset_agent, seed_key, obs_a)
        act = jax.jit(_act).lower(agent_a, seed_key, obs_a, index_a).compile()

        def reset(key):
            obs = host_pool.reset()
            key, agent_state = reset_agent(key, obs)
            return key, None, obs, agent_state

        def step(key, env_state, action):
            return host_pool.step(np.asarray(action))

    obs_shape, obs_dtype = tuple(obs_a.shape[1:]), np.dtype(obs_a.dtype)
    b = config.replay.batch_size
    sds = jax.ShapeDtypeStruct
    batch_a = Batch(
        obs=sds((b, *obs_shape), obs_dtype),
        action=sds((b,), jnp.int32),
        reward=sds((b,), jnp.float32),
        discount=sds((b,), jnp.float32),
        next_obs=sds((b, *obs_shape), obs_dtype),
        weight=sds((b,), jnp.float32),
        index=sds((b,), jnp.int32),
    )
    update = jax.jit(agent.update).lower(agent_a, batch_a).compile()
    update_target = jax.jit(agent.update_target).lower(agent_a).compile()
    evaluate = jax.jit(_evaluate).lower(agent_a, eval_key).compile()
    compile_time = time.perf_counter() - t

    replay = HostReplay(
        config.replay.capacity, obs_shape, obs_dtype, seed=config.seed, gamma=config.dqn.gamma
    )
    episode_returns: list[float] = []
    env_steps = config.learning_starts + num_blocks * config.train_frequency
    bar = tqdm.tqdm(
        total=env_steps,
        desc=f"{config.env.name} (unfused)",
        unit="step",
        unit_scale=True,
        disable=not progress,
        dynamic_ncols=True,
    )

    t = time.perf_counter()
    key, env_state, obs, agent_state = reset(seed_key)
    obs_host = np.asarray(obs)

    def collect(collect_index: int) -> None:
        nonlocal key, env_state, obs, obs_host
        # act
        key, key_env, action = act(agent_state, key, obs, np.int32(collect_index))
        # step envs
        env_state, next_obs, reward, done, info = step(key_env, env_state, action)
        # to host: one copy of everything the replay and the statistics need
        a, next_host, r, d, terminated, reset_row, ep_return = jax.device_get(
            (
                action,
                next_obs,
                reward,
                done,
                info["terminated"],
                info["reset"],
                info["episode_return"],
            )
        )
        # replay (reset-step rows are not transitions)
        replay.add(obs_host, a, r, terminated, next_host, reset_row)
        if d.any():
            episode_returns.extend(ep_return[d].tolist())
        obs, obs_host = next_obs, next_host

    for i in range(config.prefill_steps):
        collect(i)
    prefill_time = time.perf_counter() - t
    bar.update(config.learning_starts)

    cpb = config.collect_steps_per_block
    period = config.target_period_blocks
    for block in range(num_blocks):
        first = config.prefill_steps + block * cpb
        for i in range(first, first + cpb):
            collect(i)
        # learn
        for _ in range(config.updates_per_block):
            agent_state, _, _ = update(agent_state, replay.sample(b))
        # target
        if (block + 1) % period == 0:
            agent_state = update_target(agent_state)
        if progress:
            bar.update(config.train_frequency)
            if episode_returns and block % 50 == 0:
                bar.set_postfix_str(f"return={np.mean(episode_returns[-20:]):.1f}", refresh=False)
    jax.block_until_ready(agent_state)
    run_time = time.perf_counter() - t
    bar.close()

    t = time.perf_counter()
    final_return = float(evaluate(agent_state, eval_key))
    eval_time = time.perf_counter() - t
    return BaselineResult(
        config=config,
        agent=agent_state,
        env_steps=env_steps,
        compile_time_s=compile_time,
        run_time_s=run_time,
        prefill_time_s=prefill_time,
        eval_time_s=eval_time,
        wall_time_s=time.perf_counter() - wall,
        episode_returns=episode_returns,
        final_return=final_return,
    )
