"""Data replicas of each seed (`ParallelConfig.data` > 1, `parallel.exchange`).

Replicas init the same network (the seed's key) but fold their index into the env, exploration
and sampling keys and into the evaluation's; with local SGD (`sync="every:K"`) the online and
target parameters are averaged every K updates; a chunk's episode metrics are summed and its
update metrics averaged over the replicas, and a seed's evaluation is its replicas' mean.
(The gradient average and the 1-bit exchange sit in the agent's update: `Exchange.grads`.)
"""

from __future__ import annotations

import jax

from jaxrl_fast.loop.extension import Extension
from jaxrl_fast.loop.parts import LoopParts


def data_parallel(parts: LoopParts) -> Extension | None:
    exchange = parts.exchange
    if not exchange.active:
        return None
    fold = jax.vmap(jax.random.fold_in, in_axes=(0, None))

    def init_keys(key, key_env):
        return fold(key, exchange.replica()), fold(key_env, exchange.replica())

    def average(agents):
        return agents.replace(
            params=exchange.average(agents.params),
            target_params=exchange.average(agents.target_params),
        )

    def local_sgd(agent_state, updates_done):
        with jax.named_scope("local_sgd_average"):  # a collective every K updates
            return jax.lax.cond(exchange.due(updates_done), average, lambda a: a, agent_state)

    return Extension(
        "data_parallel",
        init_keys=init_keys,
        after_update=local_sgd if exchange.sync_period is not None else None,
        reduce_chunk=lambda stats, upd: (exchange.sum(stats), exchange.mean(upd)),
        eval_keys=lambda keys: fold(keys, exchange.replica()),
        eval_reduce=exchange.mean,
    )
