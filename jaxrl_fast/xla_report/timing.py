"""Measure (d) of `xla_report`: time per iteration (one training block) op by op
(`jax.disable_jit`), jitted at the lowest settings and jitted at the default."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

import jax

from jaxrl_fast.loop.resolve import ResolvedRun


def time_iterations(
    run: ResolvedRun,
    init_c: Any,
    chunk_c: Any,
    lowest_c: Any,
    keys: Any,
    eager: list,
    *,
    timing_iterations: int,
    timing_chunks: int,
) -> tuple[dict[str, float], int, float, float]:
    """Time the compiled `run_chunk` builds per block, then a few blocks op by op.

    Args:
      run: the resolved run the programs were built for.
      init_c: its compiled `init`.
      chunk_c: its compiled `run_chunk` at the default settings.
      lowest_c: its compiled `run_chunk` at `LOWEST_OPTIONS`.
      keys: the seeds' keys `init_c` takes.
      eager: a list the op-by-op loops are appended to; the caller closes their buffers.
      timing_iterations: at most this many blocks run op by op, after one block of warm-up.
      timing_chunks: steady-state chunks timed per jitted build; the fastest is kept.

    Returns:
      Seconds per block by build (`op_by_op`, `jit_default`, `jit_lowest`), the blocks run op by
      op, the first chunk's seconds (it runs the prefill) and the op-by-op warm-up block's.
    """
    from jaxrl_fast.loop import make_train

    config = run.config
    # (d) time: the first chunk runs the prefill; later ones are steady state
    runner, first_s = timed(lambda: chunk_c(init_c(keys))[0])
    per_iteration: dict[str, float] = {}
    for name, compiled in (("jit_default", chunk_c), ("jit_lowest", lowest_c)):
        best = math.inf
        for _ in range(timing_chunks):
            runner, dt = timed(lambda c=compiled, r=runner: c(r)[0])
            best = min(best, dt)
        per_iteration[name] = best / config.blocks_per_chunk
    blocks = _divisor_at_most(config.num_blocks, timing_iterations)
    for n in (1, blocks):  # a 1-block warm-up (each primitive compiles on first use)
        eager.append(
            make_train(
                dataclasses.replace(run, config=config.replace(num_chunks=config.num_blocks // n))
            )
        )
    with jax.disable_jit():
        runner, warm_s = timed(lambda: eager[0].run_chunk(runner)[0])
        runner, eager_s = timed(lambda: eager[1].run_chunk(runner)[0])
    per_iteration = {"op_by_op": eager_s / blocks, **per_iteration}
    return per_iteration, blocks, first_s, warm_s


def _divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in range(1, max(1, min(n, cap)) + 1) if n % d == 0)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t
