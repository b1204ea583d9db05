"""The conventional loop's pieces: every jitted function compiled once (`compile_parts`), and
the Python-side state one collect step at a time (`Collector`)."""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_fast.agent.build import agent_of
from jaxrl_fast.agent.dqn import AgentState
from jaxrl_fast.agent.evaluate import make_evaluate
from jaxrl_fast.agent.precision import resolve_precision
from jaxrl_fast.agent.schedules import make_schedules
from jaxrl_fast.baseline.replay import HostReplay
from jaxrl_fast.config import TrainConfig
from jaxrl_fast.envs import Env
from jaxrl_fast.envs.host import HostEnv, make_host_env
from jaxrl_fast.envs.shaping import make_shaping
from jaxrl_fast.parallel import seeds
from jaxrl_fast.types import Array, Batch, PRNGKey

__all__ = ["Collector", "Parts", "compile_parts"]


class Parts(NamedTuple):
    """The pieces a conventional loop calls from Python, each compiled once."""

    env: HostEnv
    reset: Callable  # key -> (key, key_env, key_net)
    init: Callable  # (key_net, obs) -> AgentState
    act: Callable  # (agent, key, obs, collect_index) -> (key, key_env, action)
    update: Callable  # (agent, batch) -> (agent, td, metrics)
    update_target: Callable
    evaluate: Callable  # (agent, key) -> [] mean return


def compile_parts(config: TrainConfig, env: Env | None = None) -> Parts:
    """Build the agent from the functions the fused loop uses, and compile every piece.

    `train_unfused(config, parts=...)` runs given parts: wrap a field (`parts._replace(act=...)`)
    to count or time its calls without touching the library."""
    host_env = make_host_env(config.env, seed=config.seed, env=env, key_impl=config.prng_impl)
    spec = host_env.spec
    if spec.num_envs != config.env.num_envs:
        raise ValueError(
            f"EnvConfig.num_envs={config.env.num_envs} does not match the env given "
            f"({spec.num_envs} envs)."
        )
    schedules = make_schedules(config)
    device = jax.local_devices()[0]
    torso = config.network.torso(spec.obs_shape)
    precision = resolve_precision(config.precision, device, torso)  # as `train`'s
    choices = seeds.resolve_choices(config, str(device.platform), fused=False)
    agent = agent_of(config, spec, precision, schedules, conv_impl=choices.conv_impl)
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
    return Parts(
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

    def __init__(self, config: TrainConfig, parts: Parts) -> None:
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
        self.replay_time_s = 0.0  # seconds in `replay.add` and `sample` (a public timing hook)
        shaping = make_shaping(config.env.reward_shaping, config.dqn.gamma)
        self.shaping = None if shaping is None else jax.jit(shaping)  # as the fused loop's
        # the fused loop's init: key, key_env, key_net = split(seed key, 3)
        self.key, key_env, key_net = parts.reset(seeds.train_keys(config)[0])
        self.env_state, self.obs = parts.env.reset(key_env)
        self.agent = parts.init(key_net, self.obs)
        self.obs_host = np.asarray(self.obs)

    def sample(self, batch_size: int) -> Batch:
        """A uniform replay sample, its time added to `replay_time_s`."""
        t = time.perf_counter()
        batch = self.replay.sample(batch_size)
        self.replay_time_s += time.perf_counter() - t
        return batch

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
        t = time.perf_counter()
        self.replay.add(self.obs_host, a, r, terminated, next_host, reset_row)
        self.replay_time_s += time.perf_counter() - t
        if d.any():
            self.episode_returns.extend(ep_return[d].tolist())
        self.obs, self.obs_host = next_obs, next_host
