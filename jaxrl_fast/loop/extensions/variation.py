"""Env parameters that vary over seeds (`EnvConfig.variants`) or over training (a curriculum,
`EnvConfig.curriculum`), `envs.variation`: each seed resets with its variant's values and the
curriculum's start, a curriculum advances after every training block, and the evaluation uses
the seed's variant at the curriculum's end."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_fast.envs.variation import make_variation
from jaxrl_fast.loop.extension import Extension
from jaxrl_fast.loop.parts import LoopParts


def env_variation(parts: LoopParts) -> Extension | None:
    variation, env = make_variation(parts.config), parts.env
    if variation is None:
        return None

    def reset_params(seed_ids, params):
        initial = variation.initial(seed_ids)
        return initial if params is None else {**params, **initial}

    def advance(seeds, stats, block, training):
        values = env.params_of(seeds.env_state)
        new = variation.advance(values, stats.episode_return, stats.episodes, block)
        new = jax.tree.map(lambda a, b: jnp.where(training, a, b), new, values)
        return seeds._replace(env_state=env.with_params(seeds.env_state, new))

    def eval_params(runner, params):
        values = variation.for_evaluation(env.params_of(runner.seeds.env_state))
        return values if params is None else {**params, **values}

    return Extension(
        "env_variation",
        reset_params=reset_params,
        after_block=advance if variation.curriculum.active else None,
        eval_params=eval_params,
    )
