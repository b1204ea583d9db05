"""Reward shaping (`EnvConfig.reward_shaping`, `envs.shaping`): the agent learns from the shaped
reward; episode statistics and evaluation keep the env's own."""

from __future__ import annotations

from jaxrl_fast.envs.shaping import make_shaping
from jaxrl_fast.loop.extension import Extension
from jaxrl_fast.loop.parts import LoopParts


def reward_shaping(parts: LoopParts) -> Extension | None:
    config = parts.config
    shape = make_shaping(config.env.reward_shaping, config.dqn.gamma)
    if shape is None:
        return None

    def reward(obs, action, reward, next_obs, info, gamma):
        step_info = {**info, "gamma": gamma[:, None]}  # [S, 1]: this step's gamma per seed
        return shape(obs, action, reward, next_obs, step_info)

    return Extension("reward_shaping", reward=reward)
