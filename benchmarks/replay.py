"""Replay sampling: a batch of 512 (+ its priority update) from 1e4-1e6 rows: ours, flashbax, numpy.

One command, one process, one machine:

    python benchmarks/replay.py            # full (about 3-5 min on a 2-core CPU, 20 GiB RAM)
    python benchmarks/replay.py --quick    # small buffers, few iterations (smoke run, < 1 min)

Writes `benchmarks/results/replay/replay[-quick].json` and `.md`. For each observation shape
(CartPole: 4 float32; Atari: 84x84 uint8) and each capacity it times, per iteration, one
sample of `BATCH` transitions (observation, next observation, action, reward, discount) and,
for prioritised replay (PER), the update of the sampled rows' priorities:

- ours: `jaxrl_fast.replay.make_buffer` with `sampler="sum_tree"`, `"cumsum"`, and uniform;
- flashbax: `make_prioritised_flat_buffer` (sum tree, `set_priorities`) and `make_flat_buffer`
  (uniform); both store each observation once, as ours does;
- host numpy, the "original method" of a typical Python DQN codebase, written here: a
  segment-tree PER with a per-sample Python descent and per-item Python priority updates, the
  same tree vectorised over the batch with numpy, and a uniform sampler.

Device methods run one jitted `lax.scan` of `K` iterations (compile time excluded, measured
apart with `lower().compile()`); host methods run a Python loop of `K` iterations. Each
iteration derives TD errors from the batch (reward, the mean of each observation and next
observation, and the iteration number), so the priorities change every iteration: with fixed
priorities XLA hoists the O(N) cumsum out of the loop and the flat sampler looks ~30x faster
than it is. The TD errors are summed into the loop's output, so
no gather is dead code. Times are the median over repeats, after one warm-up call.

The buffers are filled with random transitions through each library's own `add`. The host
samplers read the same rows as ours (numpy views of our ring; nothing is copied).

Finally it finds the capacity from which our sum tree samples faster than our cumsum sampler
at batch 512 (CartPole rows): `auto_crossover_rows`, the value for
`replay.prioritised.AUTO_SUM_TREE_FROM`.
"""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any, Callable

import common
import jax
import jax.numpy as jnp
import numpy as np
from common import machine  # noqa: E402
from replay_host import SegmentSumTree, VectorSumTree, host_timers  # noqa: E402,F401
from replay_report import LABELS, METHODS, OBS, dist_version, git_commit, render  # noqa: E402,F401
from replay_timing import (  # noqa: E402,F401
    ALPHA,
    BATCH,
    BETA,
    EPS,
    Timer,
    host_timer,
    measure,
    scan_timer,
    td_of,
)

from jaxrl_fast.config import ReplayConfig  # noqa: E402
from jaxrl_fast.replay import make_buffer, row_bytes, sum_tree  # noqa: E402
from jaxrl_fast.types import Transition  # noqa: E402


def num_envs_for(capacity: int) -> int:
    """Envs per add: only sets how many `add` calls fill the buffer (rows are [T, E])."""
    return 8 if capacity <= 100_000 else 64


def mem_available() -> int:
    """Bytes of host RAM available (the library's own reading of MemAvailable)."""
    from jaxrl_fast.replay.memory import host_available_memory

    return host_available_memory()


def _random_step(key, num_envs: int, obs_shape, obs_dtype, pattern):
    """One env step of random data for `num_envs` envs; every row is a valid transition."""
    k_obs, k_act, k_rew, k_term = jax.random.split(key, 4)
    if obs_dtype == np.uint8:  # a fixed random frame shifted per env: cheap to make
        shift = jax.random.randint(k_obs, (num_envs,) + (1,) * len(obs_shape), 0, 256)
        obs = (pattern[None].astype(jnp.int32) + shift).astype(jnp.uint8)
    else:
        obs = jax.random.normal(k_obs, (num_envs, *obs_shape), jnp.float32)
    return Transition(
        obs=obs,
        action=jax.random.randint(k_act, (num_envs,), 0, 6),
        reward=jax.random.normal(k_rew, (num_envs,)),
        terminated=jax.random.uniform(k_term, (num_envs,)) < 0.01,
        truncated=jnp.zeros((num_envs,), bool),
        reset=jnp.zeros((num_envs,), bool),  # reset=False: the row is a transition
    )


def _pattern(obs_shape, obs_dtype):
    if obs_dtype == np.uint8:
        return jnp.asarray(np.random.default_rng(0).integers(0, 256, obs_shape, dtype=np.uint8))
    return jnp.zeros(obs_shape, jnp.float32)


def fill(init: Callable, add: Callable, steps: int, make_step: Callable):
    """`init()` then `steps` adds of random steps, in place (the state is donated)."""
    state = jax.jit(init)()

    def go(state, key):
        def body(s, k):
            return add(s, make_step(k)), None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    return jax.block_until_ready(jax.jit(go, donate_argnums=0)(state, jax.random.key(1)))


def ours_timers(
    capacity, obs_shape, obs_dtype, iters, *, uniform=True, host=True
) -> tuple[dict[str, Timer], dict]:
    """Fill our PER buffer once; timers for sum tree, cumsum (and uniform, host) on its rows."""
    e = num_envs_for(capacity)
    pattern = _pattern(obs_shape, obs_dtype)
    make_step = lambda k: _random_step(k, e, obs_shape, obs_dtype, pattern)  # noqa: E731
    example = jax.eval_shape(make_step, jax.random.key(0))
    bufs = {
        s: make_buffer(
            ReplayConfig(capacity=capacity, batch_size=BATCH, prioritised=True, sampler=s),
            example,
        )
        for s in ("sum_tree", "cumsum")
    }
    t = time.perf_counter()
    state = fill(bufs["sum_tree"].init, bufs["sum_tree"].add, capacity // e, make_step)
    leaves = sum_tree.leaves(state.priorities, capacity)  # the cumsum sampler's state
    info = {
        "num_envs": e,
        "ours_fill_s": time.perf_counter() - t,
        "ours_sanity": {
            "rows_with_priority": int(jnp.sum(leaves > 0)),
            "total_priority": float(sum_tree.total(state.priorities)),
        },
    }
    const = state._replace(priorities=None, max_priority=None, updates=None)

    def per_step(buf):
        def step(carry, const, key, i):
            prios, max_p, updates = carry
            st = const._replace(priorities=prios, max_priority=max_p, updates=updates)
            batch = buf.sample(st, key)
            td = td_of(batch.reward, batch.obs, batch.next_obs, i)
            st = buf.update_priorities(st, batch.index, td)
            use = jnp.sum(batch.weight * td) + 1e-3 * jnp.sum(batch.discount + batch.action)
            return (st.priorities, st.max_priority, st.updates), use, (batch.obs, batch.next_obs)

        return step

    print(f"    compiling ours ({capacity:,} rows)", flush=True)
    timers = {
        "ours_sum_tree": scan_timer(
            per_step(bufs["sum_tree"]),
            (state.priorities, state.max_priority, state.updates),
            const,
            iters,
        ),
        "ours_cumsum": scan_timer(
            per_step(bufs["cumsum"]), (leaves, state.max_priority, state.updates), const, iters
        ),
    }
    if uniform:
        buf_u = make_buffer(ReplayConfig(capacity=capacity, batch_size=BATCH), example)

        def uniform_step(updates, const, key, i):
            st = const._replace(updates=updates)
            batch = buf_u.sample(st, key)
            td = td_of(batch.reward, batch.obs, batch.next_obs, i)
            st = buf_u.update_priorities(st, batch.index, td)
            use = jnp.sum(batch.weight * td) + 1e-3 * jnp.sum(batch.discount + batch.action)
            return st.updates, use, (batch.obs, batch.next_obs)

        const_u = const._replace(max_priority=state.max_priority)
        timers["ours_uniform"] = scan_timer(uniform_step, state.updates, const_u, iters)
    if host:
        timers.update(host_timers(state, e, capacity, iters))
    return timers, info


# ---- flashbax ----------------------------------------------------------------------------------


def flashbax_timers(
    capacity, obs_shape, obs_dtype, iters, device: str = "cpu"
) -> tuple[dict[str, Timer], dict]:
    """Fill flashbax's prioritised flat buffer; timers for it and its uniform flat buffer.

    `device` is flashbax's own choice of priority-update kernel ("cpu": a scan; "gpu"/"tpu":
    a bincount); the GPU kit (`benchmarks/gpu/sections.py`) passes the backend it runs on.
    """
    import flashbax as fbx
    from flashbax.buffers.trajectory_buffer import TrajectoryBufferState

    e = num_envs_for(capacity)
    pattern = _pattern(obs_shape, obs_dtype)

    def make_step(k):
        s = _random_step(k, e, obs_shape, obs_dtype, pattern)
        discount = jnp.where(s.terminated, 0.0, 0.99)
        return {"obs": s.obs, "action": s.action, "reward": s.reward, "discount": discount}

    shapes = jax.eval_shape(make_step, jax.random.key(0))
    example = jax.tree.map(lambda x: jnp.zeros(x.shape[1:], x.dtype), shapes)  # one transition
    per = fbx.make_prioritised_flat_buffer(
        max_length=capacity,
        min_length=BATCH,
        sample_batch_size=BATCH,
        add_batch_size=e,
        priority_exponent=ALPHA,
        device=device,
    )
    flat = fbx.make_flat_buffer(
        max_length=capacity, min_length=BATCH, sample_batch_size=BATCH, add_batch_size=e
    )
    t = time.perf_counter()
    state = fill(lambda: per.init(example), per.add, capacity // e, make_step)
    tree = state.sum_tree_state
    info = {
        "flashbax_fill_s": time.perf_counter() - t,
        "flashbax_sanity": {
            "rows_with_priority": int(jnp.sum(tree.nodes[-(2**tree.tree_depth) :] > 0)),
            "total_priority": float(tree.nodes[0]),
        },
    }
    n_items = tree.capacity

    def per_step(tree, const, key, i):
        st = const.replace(sum_tree_state=tree)
        s = per.sample(st, key)
        first, second = s.experience.first, s.experience.second
        td = td_of(first["reward"], first["obs"], second["obs"], i)
        # importance weights, as ours computes them inside `sample`
        w = jnp.power(n_items * jnp.maximum(s.probabilities, 1e-30), -BETA)
        w = w / jnp.max(w)
        st = per.set_priorities(st, s.indices, jnp.abs(td) + EPS)
        use = jnp.sum(w * td) + 1e-3 * jnp.sum(first["discount"] + first["action"])
        return st.sum_tree_state, use, (first["obs"], second["obs"])

    # The uniform flat buffer reads the same rows (its state is the PER state's trajectory part).
    u_state = TrajectoryBufferState(
        experience=state.experience, is_full=state.is_full, current_index=state.current_index
    )

    def uniform_step(carry, const, key, i):
        s = flat.sample(const, key)
        first, second = s.experience.first, s.experience.second
        td = td_of(first["reward"], first["obs"], second["obs"], i)
        use = jnp.sum(td) + 1e-3 * jnp.sum(first["discount"] + first["action"])
        return carry + 1, use, (first["obs"], second["obs"])

    print(f"    compiling flashbax ({capacity:,} rows)", flush=True)
    timers = {
        "flashbax_per": scan_timer(per_step, tree, state, iters),
        "flashbax_uniform": scan_timer(uniform_step, jnp.int32(0), u_state, iters),
    }
    return timers, info


# ---- host numpy: the "original method" ---------------------------------------------------------


def cell(obs_name: str, capacity: int, iters: int, repeats: int) -> dict:
    """All methods on one (observation, capacity) cell, interleaved when both fills fit."""
    obs_shape, obs_dtype = OBS[obs_name]
    need = capacity * row_bytes(obs_shape, obs_dtype)  # one copy of the rows
    avail = mem_available()
    out: dict[str, Any] = {"obs": obs_name, "capacity": capacity, "buffer_bytes": need}
    margin = 2 << 30  # XLA temporaries, the Python process, the other library's small state
    if need + margin > avail:
        why = f"memory: needs ~{need / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB available"
        out.update({m: {"skipped": why} for m in METHODS})
        return out
    ours, info = ours_timers(capacity, obs_shape, obs_dtype, iters)
    out.update(info)
    if 2 * need + margin <= mem_available():  # both filled at once: one interleaved measure
        out["interleaved"] = "all methods"
        fb, info = flashbax_timers(capacity, obs_shape, obs_dtype, iters)
        out.update(info)
        print(f"    measuring ({repeats} rounds)", flush=True)
        out.update(measure({**ours, **fb}, repeats))
    else:  # one library's rows at a time
        out["interleaved"] = "ours+host, then flashbax"
        out.update(measure(ours, repeats))
        del ours
        gc.collect()
        fb, info = flashbax_timers(capacity, obs_shape, obs_dtype, iters)
        out.update(info)
        out.update(measure(fb, repeats))
    return out


def crossover(capacities, iters: int, repeats: int) -> dict:
    """Our sum tree vs our cumsum sampler (CartPole rows, PER sample + update) over capacities."""
    rows = []
    for c in capacities:
        print(f"  crossover: {c:,} rows", flush=True)
        timers, _ = ours_timers(c, (4,), np.float32, iters, uniform=False, host=False)
        r = measure(timers, repeats)
        rows.append(
            {
                "capacity": c,
                "sum_tree_us": r["ours_sum_tree"]["us_per_iter"],
                "cumsum_us": r["ours_cumsum"]["us_per_iter"],
            }
        )
        del timers
        gc.collect()
    # The smallest tested capacity from which the sum tree wins at it and every larger one.
    win = [r["sum_tree_us"] < r["cumsum_us"] for r in rows]
    first = next((i for i in range(len(rows)) if all(win[i:])), None)
    return {"rows": rows, "auto_crossover_rows": None if first is None else rows[first]["capacity"]}


def ratio(a: dict, b: dict) -> float | None:
    """`a`'s time over `b`'s (how many times faster `b` is), None if either was skipped."""
    if "us_per_iter" not in a or "us_per_iter" not in b:
        return None
    return a["us_per_iter"] / b["us_per_iter"]


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="small buffers, few iterations")
    args = parser.parse_args()
    q = args.quick
    capacities = (2_000, 10_000) if q else (10_000, 100_000, 1_000_000)
    iters = {c: (10 if q else {10_000: 400, 100_000: 200}.get(c, 100)) for c in capacities}
    repeats = 2 if q else 9
    cross_caps = (512, 1_000, 3_000) if q else (512, 1_000, 3_000, 10_000, 30_000, 100_000)
    import flashbax

    out: dict[str, Any] = {
        "machine": machine(),
        "flashbax": flashbax.__version__
        if hasattr(flashbax, "__version__")
        else dist_version("flashbax"),
        "quick": q,
        "git": git_commit(),
        "batch_size": BATCH,
        "cells": [],
    }
    t0 = time.perf_counter()
    total = len(OBS) * len(capacities)
    k = 0
    for obs_name in OBS:
        for c in capacities:
            k += 1
            print(f"[{k}/{total}] {obs_name} obs, {c:,} rows", flush=True)
            r = cell(obs_name, c, iters[c], repeats)
            gc.collect()
            r["ratios"] = {
                "flashbax_per_over_ours_sum_tree": ratio(r["flashbax_per"], r["ours_sum_tree"]),
                "numpy_python_over_ours_sum_tree": ratio(
                    r["numpy_tree_python"], r["ours_sum_tree"]
                ),
                "numpy_vectorised_over_ours_sum_tree": ratio(
                    r["numpy_tree_vectorised"], r["ours_sum_tree"]
                ),
                "ours_cumsum_over_ours_sum_tree": ratio(r["ours_cumsum"], r["ours_sum_tree"]),
                "flashbax_uniform_over_ours_uniform": ratio(
                    r["flashbax_uniform"], r["ours_uniform"]
                ),
                "numpy_uniform_over_ours_uniform": ratio(r["numpy_uniform"], r["ours_uniform"]),
            }
            out["cells"].append(r)
            print("   ", {m: round(r[m].get("us_per_iter", -1), 1) for m in METHODS}, flush=True)
    print("[crossover] sum tree vs cumsum, CartPole rows", flush=True)
    out["crossover"] = crossover(cross_caps, 10 if q else 400, 2 if q else 11)
    out["auto_crossover_rows"] = out["crossover"]["auto_crossover_rows"]
    out["benchmark_time_s"] = time.perf_counter() - t0

    os.makedirs(args.out, exist_ok=True)
    name = "replay-quick" if q else "replay"
    with open(os.path.join(args.out, f"{name}.json"), "w") as f:
        json.dump(out, f, indent=2)
    with open(os.path.join(args.out, f"{name}.md"), "w") as f:
        f.write(render(out))
    print(render(out))


if __name__ == "__main__":
    main()
