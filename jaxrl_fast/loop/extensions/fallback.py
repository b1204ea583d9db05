"""The precision policy's fp32 fallback (`PrecisionConfig.fallback`, `agent/precision.py`):
after every iteration the switch, shared by all seeds so that it stays a real branch under the
seed vmap, is recorded in every seed's loss-scale state."""

from __future__ import annotations

from jaxrl_fast.agent import precision as mp
from jaxrl_fast.loop.extension import Extension
from jaxrl_fast.loop.parts import LoopParts


def precision_fallback(parts: LoopParts) -> Extension | None:
    if not parts.run.precision.fallback:
        return None

    def record(seeds, stats, block, training):
        scales = seeds.agent.loss_scale
        scales = mp.record_fallback(scales, mp.shared_fallback(scales))
        return seeds._replace(agent=seeds.agent.replace(loss_scale=scales))

    return Extension("precision_fallback", after_block=record)
