"""The replay's host callbacks (the L3 spill tier, `replay/l3.py`): at every block's end, on the
stacked seeds, so one callback serves them all."""

from __future__ import annotations

import jax

from jaxrl_fast.loop.extension import Extension
from jaxrl_fast.loop.parts import LoopParts


def replay_spill(parts: LoopParts) -> Extension | None:
    buffer, cpb = parts.buffer, parts.config.collect_steps_per_block
    if not buffer.has_spill:
        return None

    def after_collect(seeds, i, steps):
        due = ((i + 1) % cpb == 0) | (i + 1 == steps)
        with jax.named_scope("l3_spill"):  # the L3 tier's host callbacks, once per block
            replay = jax.lax.cond(due, buffer.spill, lambda r: r, seeds.replay)
        return seeds._replace(replay=replay)

    return Extension("replay_spill", after_collect=after_collect)
