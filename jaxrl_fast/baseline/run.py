"""`train_unfused`: the conventional loop run from Python, and what it returns."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import numpy as np
import tqdm

from jaxrl_fast.agent.dqn import AgentState
from jaxrl_fast.baseline.parts import Collector, Parts, compile_parts
from jaxrl_fast.baseline.replay import HostReplay
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs import Env
from jaxrl_fast.parallel import seeds
from jaxrl_fast.platform.timing import Timed

__all__ = ["BaselineResult", "baseline_blocks", "train_unfused"]


@dataclasses.dataclass(kw_only=True)
class BaselineResult(Timed):
    """What `train_unfused` returns: a `platform.timing.Timed` (env steps, compile, run,
    evaluation and wall times, as `train`'s result; `compile_time_s` is every jitted function's,
    compiled once before timing, and `eval_time_s` the final evaluation's) with the conventional
    loop's own facts.

    Attributes:
      config: the run's config.
      agent: final `AgentState` of the one seed (no seed axis); `agent.params` are the weights.
      prefill_time_s: the part of `run_time_s` spent before the first update.
      episode_returns: returns of the training episodes that ended, in order of completion.
      final_return: mean evaluation return over `config.eval_episodes` episodes (greedy, or
        epsilon-greedy with `eval_epsilon`; NaN if 0), played by `evaluate.make_evaluate`.
      replay: the final host replay (its rows hold the transitions collected, in order).
      replay_time_s: the part of `run_time_s` spent in the host replay's `add` and `sample`.
    """

    config: TrainConfig
    agent: AgentState
    prefill_time_s: float
    episode_returns: list[float]
    final_return: float
    replay: HostReplay | None = None
    replay_time_s: float = 0.0

    @property
    def params(self):
        """The final online network parameters."""
        return self.agent.params

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
    parts: Parts | None = None,
    on_collect: Callable[[int, float, int], None] | None = None,
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
      parts: the compiled pieces to run (`compile_parts(config, env)`, perhaps with a field
        wrapped to count or time it); None compiles them here.
      on_collect: a timing hook, called after every collect step with `(collect_index,
        started_s, episodes)`: the step's start in seconds since the loop's clock started (the
        clock of `run_time_s`) and the number of training episodes finished so far.

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
    _check_supported(config)
    if parts is None:
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

    def collect(i: int) -> None:
        started = time.perf_counter() - t
        loop.collect(i)
        if on_collect is not None:
            on_collect(i, started, len(loop.episode_returns))

    for i in range(config.prefill_steps):
        collect(i)
    prefill_time = time.perf_counter() - t
    bar.update(config.learning_starts)

    cpb, batch_size = config.collect_steps_per_block, config.replay.batch_size
    for block in range(num_blocks):
        first = config.prefill_steps + block * cpb
        for i in range(first, first + cpb):
            collect(i)
        # learn
        for _ in range(config.updates_per_block):
            loop.agent, _, _ = parts.update(loop.agent, loop.sample(batch_size))
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
        replay_time_s=loop.replay_time_s,
    )


def _check_supported(config: TrainConfig) -> None:
    """Refuse what the conventional baseline does not implement, naming the field."""
    if config.env.varying_params:
        raise ValueError(
            "train_unfused: EnvConfig.variants / curriculum are not supported by the "
            "conventional baseline (one seed, the env's own parameters); unset them."
        )
    if config.learner != "replay":
        raise ValueError(
            f"train_unfused: TrainConfig.learner={config.learner!r} is not supported by the "
            "conventional baseline, a replay DQN loop; use learner='replay' or the fused loop "
            "(train)."
        )
    if config.demo.active:
        raise ValueError(
            f"train_unfused: DemoConfig.source={config.demo.source!r} (demonstrations) is not "
            "supported by the conventional baseline; use source='' or the fused loop (train)."
        )
    if config.selfplay.active:
        raise ValueError(
            f"train_unfused: SelfPlayConfig.pool_size={config.selfplay.pool_size} (self-play) "
            "is not supported by the conventional baseline; use pool_size=0 or the fused loop "
            "(train)."
        )
    if config.network.lstm:
        raise ValueError(
            f"train_unfused: NetworkConfig.lstm={config.network.lstm} (a recurrent agent on "
            "sequence replay) is not supported by the conventional baseline, which stores "
            "transitions; use lstm=0 and sequence_length=0, or the fused loop (train)."
        )
    if (gamma := config.schedule.gamma_schedule) != "constant":  # the host replay: one gamma
        raise ValueError(f"train_unfused: ScheduleConfig.gamma_schedule={gamma!r}; use 'constant'.")
