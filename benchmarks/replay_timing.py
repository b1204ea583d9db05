"""How `benchmarks/replay.py` times a sampler: a jitted `lax.scan` of iterations (`scan_timer`)
or a host loop (`host_timer`), each a `Timer`; `measure` runs them in interleaved rounds and
keeps medians."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

BATCH = 512
ALPHA, BETA, EPS = 0.6, 0.4, 1e-6  # ours' defaults; flashbax gets the same exponent


def td_of(reward, obs, next_obs, i, xp=jnp):
    """TD errors `[B]` that depend on the batch's rows and on the iteration `i`.

    Only one element of each observation is read here; the device loops keep the whole batch
    in their carry (see `scan_timer`) and the host gathers it with numpy fancy indexing, so
    every method writes the full batch to memory, as a network's input would need.
    """
    b = obs.shape[0]
    f = obs.reshape(b, -1)[:, 0].astype(xp.float32)
    g = next_obs.reshape(b, -1)[:, -1].astype(xp.float32)
    return reward + 1e-3 * (f - g) + 0.5 * xp.sin(0.37 * i + xp.arange(b, dtype=xp.float32))


# ---- timing ------------------------------------------------------------------------------------


class Timer(NamedTuple):
    """One method, ready to run: `run(r)` executes `iters` iterations and returns the seconds."""

    run: Callable[[int], float]
    iters: int
    info: dict


def scan_timer(step: Callable, carry0: Any, const: Any, iters: int) -> Timer:
    """Compile `iters` iterations of `carry, out, keep = step(carry, const, key, i)` as one scan.

    `carry0` (the priorities) is donated, a fresh copy per call made outside the timed region,
    so the loop updates it in place as a training loop does; `const` (the stored rows) is read
    only. `keep` (the sampled observations) is carried to the next iteration and returned, so
    XLA must write every batch in full: reading one element of a gathered batch otherwise lets
    it gather only that element (`lax.optimization_barrier` does not stop this on CPU; measured:
    the time did not grow with the frame size). Compile time is measured apart from the runs.
    """
    key = jax.random.key(0)
    keep_shape = jax.eval_shape(lambda c: step(c, const, key, 0), carry0)[2]

    def loop(carry, const, key):
        def body(c, i):
            carry, acc, _ = c
            carry, out, keep = step(carry, const, jax.random.fold_in(key, i), i)
            return (carry, acc + out, keep), None

        keep0 = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), keep_shape)
        init = (carry, jnp.float32(0), keep0)
        (carry, acc, keep), _ = jax.lax.scan(body, init, jnp.arange(iters))
        return carry, acc, keep

    t = time.perf_counter()
    compiled = jax.jit(loop, donate_argnums=0).lower(carry0, const, key).compile()
    compile_s = time.perf_counter() - t

    def run(r: int) -> float:
        c = jax.block_until_ready(jax.tree.map(jnp.copy, carry0))
        t = time.perf_counter()
        _, acc, _ = jax.block_until_ready(compiled(c, const, jax.random.fold_in(key, r)))
        elapsed = time.perf_counter() - t
        if not np.isfinite(float(acc)):
            raise RuntimeError("non-finite loop output: the benchmark loop is broken")
        return elapsed

    return Timer(run, iters, {"compile_s": compile_s})


def host_timer(step: Callable[[int], float], iters: int) -> Timer:
    """`iters` calls of `step(i)` in a Python loop."""

    def run(r: int) -> float:
        t = time.perf_counter()
        for i in range(iters):
            step(i)
        return time.perf_counter() - t

    return Timer(run, iters, {})


def measure(timers: dict[str, Timer], repeats: int) -> dict[str, dict]:
    """Warm each method up once, then run `repeats` rounds, each method once per round.

    Interleaving the methods spreads the shared VM's load changes over all of them, so the
    ratios within a cell are steadier than the absolute times. Returns microseconds per
    iteration (median over rounds) per method.
    """
    for t in timers.values():
        t.run(0)
    times: dict[str, list[float]] = {name: [] for name in timers}
    for r in range(1, repeats + 1):
        for name, t in timers.items():
            times[name].append(t.run(r))
    return {
        name: {
            "us_per_iter": 1e6 * statistics.median(times[name]) / t.iters,
            "spread": (max(times[name]) - min(times[name])) / statistics.median(times[name]),
            "iters": t.iters,
            "repeats": repeats,
            **t.info,
        }
        for name, t in timers.items()
    }


# ---- ours --------------------------------------------------------------------------------------
