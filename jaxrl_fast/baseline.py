"""The conventional, unfused DQN loop: the baseline all jaxrl_fast speed-ups are measured against.

`train_unfused` is the loop a user would write without this library, in the style of CleanRL's
`dqn_jax.py`: a Python `for` loop over collect steps that calls a jitted `act` and a jitted
`env.step`, copies each step to host memory, keeps the replay in host numpy arrays (observation
and next observation stored explicitly), samples it with a numpy RNG, and calls a jitted
gradient step. It runs the *same* algorithm as the fused loop of `jaxrl_fast.loop` with the
same hyperparameters, from the same functions: the same env, network, optimiser and
learning-rate schedule (`make_agent`), the same keys (`seeds.train_keys`, `seeds.eval_keys`), the
same epsilon (`Schedules.collect_epsilon`), the same precision policy and conv choice
(`resolve_precision`, `seeds.resolve_choices` for an unfused loop), the same evaluation
(`evaluate.make_evaluate`), and
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
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from jaxrl_fast import seeds
from jaxrl_fast.agent.dqn import AgentState, make_agent
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs import Env
from jaxrl_fast.envs.host import HostEnv, make_host_env
from jaxrl_fast.envs.shaping import make_shaping
from jaxrl_fast.evaluate import make_evaluate
from jaxrl_fast.hparams import hparams_of
from jaxrl_fast.precision import resolve_precision
from jaxrl_fast.schedules import make_schedules
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
      eval_time_s: seconds running the final evaluation.
      wall_time_s: the whole call.
      episode_returns: returns of the training episodes that ended, in order of completion.
      final_return: mean evaluation return over `config.eval_episodes` episodes (greedy, or
        epsilon-greedy with `eval_epsilon`; NaN if 0), played by `evaluate.make_evaluate`.
      replay: the final host replay (its rows hold the transitions collected, in order).
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
    replay: HostReplay | None = None

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
    t = time.perf_counter()
    if config.env.varying_params:
        raise ValueError(
            "train_unfused: EnvConfig.variants / curriculum are not supported by the "
            "conventional baseline (one seed, the env's own parameters); unset them."
        )
    if config.demo.active:
        raise ValueError(
            f"train_unfused: DemoConfig.source={config.demo.source!r} (demonstrations) is not "
            "supported by the conventional baseline; use source='' or the fused loop (train)."
        )
    if config.network.lstm:
        raise ValueError(
            f"train_unfused: NetworkConfig.lstm={config.network.lstm} (a recurrent agent on "
            "sequence replay) is not supported by the conventional baseline, which stores "
            "transitions; use lstm=0 and sequence_length=0, or the fused loop (train)."
        )
    if (gamma := config.schedule.gamma_schedule) != "constant":  # the host replay: one gamma
        raise ValueError(f"train_unfused: ScheduleConfig.gamma_schedule={gamma!r}; use 'constant'.")
    parts = compile_parts(config, env)  # compiled once, before timing (as `train` does)
    compile_time = time.perf_counter() - t

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
    loop = Collector(config, parts)
    for i in range(config.prefill_steps):
        loop.collect(i)
    prefill_time = time.perf_counter() - t
    bar.update(config.learning_starts)

    cpb, batch_size = config.collect_steps_per_block, config.replay.batch_size
    for block in range(num_blocks):
        first = config.prefill_steps + block * cpb
        for i in range(first, first + cpb):
            loop.collect(i)
        # learn
        for _ in range(config.updates_per_block):
            loop.agent, _, _ = parts.update(loop.agent, loop.replay.sample(batch_size))
        # target
        if (block + 1) % config.target_period_blocks == 0:
            loop.agent = parts.update_target(loop.agent)
        if progress:
            bar.update(config.train_frequency)
            if loop.episode_returns and block % 50 == 0:
                recent = np.mean(loop.episode_returns[-20:])
                bar.set_postfix_str(f"return={recent:.1f}", refresh=False)
    jax.block_until_ready(loop.agent)
    run_time = time.perf_counter() - t
    bar.close()

    t = time.perf_counter()
    final_return = float(parts.evaluate(loop.agent, seeds.eval_keys(config)[0]))
    eval_time = time.perf_counter() - t
    return BaselineResult(
        config=config,
        agent=loop.agent,
        env_steps=env_steps,
        compile_time_s=compile_time,
        run_time_s=run_time,
        prefill_time_s=prefill_time,
        eval_time_s=eval_time,
        wall_time_s=time.perf_counter() - wall,
        episode_returns=loop.episode_returns,
        final_return=final_return,
        replay=loop.replay,
    )


class _Parts(NamedTuple):
    """The pieces a conventional loop calls from Python, each compiled once."""

    env: HostEnv
    reset: Callable  # key -> (key, key_env, key_net)
    init: Callable  # (key_net, obs) -> AgentState
    act: Callable  # (agent, key, obs, collect_index) -> (key, key_env, action)
    update: Callable  # (agent, batch) -> (agent, td, metrics)
    update_target: Callable
    evaluate: Callable  # (agent, key) -> [] mean return


def compile_parts(config: TrainConfig, env: Env | None) -> _Parts:
    """Build the agent from the functions the fused loop uses, and compile every piece."""
    host_env = make_host_env(config.env, seed=config.seed, env=env, key_impl=config.prng_impl)
    spec = host_env.spec
    if spec.num_envs != config.env.num_envs:
        raise ValueError(
            f"EnvConfig.num_envs={config.env.num_envs} does not match the env given "
            f"({spec.num_envs} envs)."
        )
    schedules = make_schedules(config)
    device = jax.local_devices()[0]
    precision = resolve_precision(config.precision, device)  # the same policy as `train`
    choices = seeds.resolve_choices(config, str(device.platform), fused=False)
    network = QNetwork.for_precision(config.network, spec, precision, conv_impl=choices.conv_impl)
    agent = make_agent(
        config.dqn,
        network,
        spec.num_actions,
        learning_rate=schedules.learning_rate,
        hparams=hparams_of(config),
        precision=precision,
    )
    evaluate_one = make_evaluate(config, agent, num_seeds=1)

    def _act(agent_state: AgentState, key: PRNGKey, obs: Array, collect_index: Array):
        # the fused loop's collect step: the same key use and epsilon
        key, key_act, key_env = jax.random.split(key, 3)
        epsilon = schedules.collect_epsilon(collect_index)
        return key, key_env, agent.act(agent_state, key_act, obs, epsilon)

    def _evaluate(agent_state: AgentState, key: PRNGKey) -> Array:
        one_seed = jax.tree.map(lambda x: x[None], (agent_state, key))  # a seed axis of 1
        return evaluate_one(*one_seed)[0]

    key = seeds.train_keys(config)[0]
    sds = jax.ShapeDtypeStruct
    obs = sds((spec.num_envs, *spec.obs_shape), spec.obs_dtype)
    agent_a = jax.eval_shape(agent.init, key, obs)
    b = config.replay.batch_size
    floats = sds((b,), jnp.float32)
    batch = Batch(
        obs=sds((b, *spec.obs_shape), spec.obs_dtype),
        action=sds((b,), jnp.int32),
        reward=floats,
        discount=floats,
        next_obs=sds((b, *spec.obs_shape), spec.obs_dtype),
        weight=floats,
        index=sds((b,), jnp.int32),
    )
    split3 = lambda k: tuple(jax.random.split(k, 3))  # noqa: E731 - the fused init's split
    return _Parts(
        env=host_env,
        reset=jax.jit(split3).lower(key).compile(),
        init=jax.jit(agent.init).lower(key, obs).compile(),
        act=jax.jit(_act).lower(agent_a, key, obs, sds((), jnp.int32)).compile(),
        update=jax.jit(agent.update).lower(agent_a, batch).compile(),
        update_target=jax.jit(agent.update_target).lower(agent_a).compile(),
        evaluate=jax.jit(_evaluate).lower(agent_a, key).compile(),
    )


class Collector:
    """The conventional loop's state between Python steps: key, env state, observations (on
    device and on the host), the agent, the host replay and the finished episodes' returns."""

    def __init__(self, config: TrainConfig, parts: _Parts) -> None:
        self.parts = parts
        spec = parts.env.spec
        self.replay = HostReplay(
            config.replay.capacity,
            tuple(spec.obs_shape),
            np.dtype(spec.obs_dtype),
            seed=config.seed,
            gamma=config.dqn.gamma,
        )
        self.episode_returns: list[float] = []
        shaping = make_shaping(config.env.reward_shaping, config.dqn.gamma)
        self.shaping = None if shaping is None else jax.jit(shaping)  # as the fused loop's
        # the fused loop's init: key, key_env, key_net = split(seed key, 3)
        self.key, key_env, key_net = parts.reset(seeds.train_keys(config)[0])
        self.env_state, self.obs = parts.env.reset(key_env)
        self.agent = parts.init(key_net, self.obs)
        self.obs_host = np.asarray(self.obs)

    def collect(self, collect_index: int) -> None:
        """One collect step: act, step the envs, copy to the host once, add to the replay."""
        # act
        self.key, key_env, action = self.parts.act(
            self.agent, self.key, self.obs, np.int32(collect_index)
        )
        # step envs
        self.env_state, next_obs, reward, done, info = self.parts.env.step(
            key_env, self.env_state, action
        )
        if self.shaping is not None:  # the agent learns from shaped rewards
            reward = self.shaping(self.obs, action, reward, next_obs, info)
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
        self.replay.add(self.obs_host, a, r, terminated, next_host, reset_row)
        if d.any():
            self.episode_returns.extend(ep_return[d].tolist())
        self.obs, self.obs_host = next_obs, next_host
