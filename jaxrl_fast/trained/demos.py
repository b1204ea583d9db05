"""Recording a trained agent's episodes as demonstrations (`DemoConfig.source`,
docs/demonstrations.md).

    from jaxrl_fast.trained import demos
    demos.record(result, "breakout.npz", steps=20_000)        # a trained agent's episodes
    config = config.replace(demo={"source": "breakout.npz", "share": 0.25})

The file's format, its checks and the scripted controller's steps are `jaxrl_fast.loop.demos`'s
(the loop reads them when a run starts); this module plays a `TrainResult`'s agent into one.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp

from jaxrl_fast.agent.exploration import epsilon_greedy
from jaxrl_fast.agent.masks import legal_actions, mask_q
from jaxrl_fast.agent.network import QNetwork
from jaxrl_fast.loop.demos import env_of, play, save
from jaxrl_fast.types import Transition

__all__ = ["record"]


def record(
    result,
    path: str | os.PathLike,
    *,
    steps: int = 10_000,
    seed_index: int = 0,
    epsilon: float = 0.0,
) -> Transition:
    """Play `steps` env steps of a trained agent (`train`'s `TrainResult`, seed `seed_index`)
    epsilon-greedily on its run's env and save them to `path` for `DemoConfig.source`.

    Raises:
      ValueError: a recurrent agent, an envpool env, or a seed index out of range.
    """
    config = result.config
    if config.network.lstm:
        raise ValueError("record: a recurrent agent's demonstrations are not supported.")
    if not 0 <= seed_index < config.num_seeds:
        raise ValueError(
            f"record: seed_index={seed_index} is not allowed; expected 0 .. {config.num_seeds - 1}."
        )
    env = env_of(config)
    net = QNetwork.for_run(config, env.spec)
    params = jax.tree.map(lambda x: x[seed_index], result.runner.seeds.agent.params)

    def policy(key, obs):
        q = net.value_head.q_values(net.apply(params, obs))
        if env.spec.action_mask:  # legal actions only, greedy or random
            legal = legal_actions(obs, env.spec.num_actions)
            return epsilon_greedy(key, mask_q(q, legal), epsilon, env.spec.num_actions, legal)
        greedy = jnp.argmax(q, axis=-1)
        key_explore, key_random = jax.random.split(key)
        explore = jax.random.uniform(key_explore, greedy.shape) < epsilon
        random = jax.random.randint(key_random, greedy.shape, 0, env.spec.num_actions)
        return jnp.where(explore, random, greedy)

    out = play(config, policy, steps, config.seed + 3)
    save(path, out, config)
    return out
