"""The library's loop extensions (`loop.extension`), one module each; `DEFAULT` in their order.

Each module has one builder, `builder(parts: LoopParts) -> Extension | None`, that returns None
where the run does not use it. A new capability that hooks into the loop is a new module here
(or a builder passed to `make_train(extensions=...)`), never a branch in `make_train`.
"""

from __future__ import annotations

from jaxrl_fast.loop.extensions.data_parallel import data_parallel
from jaxrl_fast.loop.extensions.fallback import precision_fallback
from jaxrl_fast.loop.extensions.selfplay import selfplay
from jaxrl_fast.loop.extensions.shaping import reward_shaping
from jaxrl_fast.loop.extensions.spill import replay_spill
from jaxrl_fast.loop.extensions.variation import env_variation

# The order hooks apply in. Reward shaping reads the env's reward; the data replicas fold their
# index into the keys; the curriculum (`env_variation`) and the fallback flag act on different
# parts of the state after a block, so their order does not matter; self-play replaces the envs
# (its own opponents) and adds snapshots to its pool after a block.
DEFAULT = (
    reward_shaping,
    env_variation,
    data_parallel,
    replay_spill,
    precision_fallback,
    selfplay,
)

__all__ = [
    "DEFAULT",
    "data_parallel",
    "env_variation",
    "precision_fallback",
    "replay_spill",
    "reward_shaping",
    "selfplay",
]
