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
import statistics
import time
from typing import Any, Callable, NamedTuple

import common
import jax
import jax.numpy as jnp
import numpy as np
from common import machine  # noqa: E402

from jaxrl_fast.config import ReplayConfig  # noqa: E402
from jaxrl_fast.replay import make_buffer, row_bytes, sum_tree  # noqa: E402
from jaxrl_fast.replay.tiered import ReplayState  # noqa: E402
from jaxrl_fast.types import Transition  # noqa: E402

BATCH = 512
ALPHA, BETA, EPS = 0.6, 0.4, 1e-6  # ours' defaults; flashbax gets the same exponent
OBS = {
    "cartpole": ((4,), np.float32),
    "atari": ((84, 84), np.uint8),
}
METHODS = (
    "ours_sum_tree",
    "ours_cumsum",
    "ours_uniform",
    "flashbax_per",
    "flashbax_uniform",
    "numpy_tree_python",
    "numpy_tree_vectorised",
    "numpy_uniform",
)
LABELS = {
    "ours_sum_tree": "ours PER sum tree",
    "ours_cumsum": "ours PER cumsum",
    "ours_uniform": "ours uniform",
    "flashbax_per": "flashbax PER",
    "flashbax_uniform": "flashbax uniform",
    "numpy_tree_python": "numpy PER tree, Python loops",
    "numpy_tree_vectorised": "numpy PER tree, vectorised",
    "numpy_uniform": "numpy uniform",
}


def num_envs_for(capacity: int) -> int:
    """Envs per add: only sets how many `add` calls fill the buffer (rows are [T, E])."""
    return 8 if capacity <= 100_000 else 64


def mem_available() -> int:
    """Bytes of host RAM available (the library's own reading of MemAvailable)."""
    from jaxrl_fast.replay.memory import host_available_memory

    return host_available_memory()


def _td(reward, obs, next_obs, i, xp=jnp):
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
            td = _td(batch.reward, batch.obs, batch.next_obs, i)
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
            td = _td(batch.reward, batch.obs, batch.next_obs, i)
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
    a bincount); `benchmarks/gpu_suite.py` passes the backend it runs on.
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
        td = _td(first["reward"], first["obs"], second["obs"], i)
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
        td = _td(first["reward"], first["obs"], second["obs"], i)
        use = jnp.sum(td) + 1e-3 * jnp.sum(first["discount"] + first["action"])
        return carry + 1, use, (first["obs"], second["obs"])

    print(f"    compiling flashbax ({capacity:,} rows)", flush=True)
    timers = {
        "flashbax_per": scan_timer(per_step, tree, state, iters),
        "flashbax_uniform": scan_timer(uniform_step, jnp.int32(0), u_state, iters),
    }
    return timers, info


# ---- host numpy: the "original method" ---------------------------------------------------------


class SegmentSumTree:
    """A sum tree as a typical Python PER codebase writes it: one float64 numpy array, leaf
    `j` at `size + j`, one Python walk per sampled item and per updated priority."""

    def __init__(self, capacity: int):
        self.size = 1
        while self.size < capacity:
            self.size *= 2
        self.tree = np.zeros(2 * self.size, np.float64)

    def total(self) -> float:
        return self.tree[1]

    def __setitem__(self, idx: int, value: float) -> None:
        node = idx + self.size
        self.tree[node] = value
        node //= 2
        while node >= 1:
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
            node //= 2

    def __getitem__(self, idx: int) -> float:
        return self.tree[idx + self.size]

    def find_prefixsum_idx(self, mass: float) -> int:
        node = 1
        while node < self.size:
            if self.tree[2 * node] > mass:
                node = 2 * node
            else:
                mass -= self.tree[2 * node]
                node = 2 * node + 1
        return node - self.size

    def rebuild(self) -> None:
        """Recompute every parent from the leaves (after writing leaves directly)."""
        level = self.size // 2
        while level >= 1:
            n = np.arange(level, 2 * level)
            self.tree[n] = self.tree[2 * n] + self.tree[2 * n + 1]
            level //= 2


class VectorSumTree(SegmentSumTree):
    """The same tree with the descent and the update vectorised over the batch in numpy."""

    def find(self, mass: np.ndarray) -> np.ndarray:
        node = np.ones(mass.shape, np.int64)
        while node[0] < self.size:  # every node is at the same depth
            left = self.tree[2 * node]
            right = mass >= left
            mass = np.where(right, mass - left, mass)
            node = 2 * node + right
        return node - self.size

    def set(self, idx: np.ndarray, value: np.ndarray) -> None:
        node = idx + self.size
        self.tree[node] = value
        while node[0] > 1:
            node = node // 2
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]


def host_timers(state: ReplayState, num_envs: int, capacity: int, iters: int) -> dict[str, Timer]:
    """Host samplers on numpy views of our ring's rows (row `r`'s next row is `r + E`)."""
    ring = state.ring
    obs = np.asarray(ring.obs).reshape(capacity, *ring.obs.shape[2:])  # a view, no copy
    action = np.asarray(ring.action).reshape(capacity)
    reward = np.asarray(ring.reward).reshape(capacity)
    discount = np.asarray(ring.discount).reshape(capacity)
    prios = np.asarray(sum_tree.leaves(state.priorities, capacity), np.float64)
    rng = np.random.default_rng(0)

    def gather(idx):
        nxt = (idx + num_envs) % capacity
        return obs[idx], action[idx], reward[idx], discount[idx], obs[nxt]

    def per_host(tree, sample_idx, update):
        def step(i):
            seg = tree.total() / BATCH
            mass = (np.arange(BATCH) + rng.random(BATCH)) * seg
            idx = np.minimum(sample_idx(mass), capacity - 1)  # float rounding at the end
            o, a, r, d, o2 = gather(idx)
            p = tree.tree[idx + tree.size] / tree.total()
            w = (capacity * p) ** -BETA
            w /= w.max()
            td = _td(r, o, o2, i, xp=np)
            update(idx, (np.abs(td) + EPS) ** ALPHA)
            return float(np.sum(w * td) + 1e-3 * np.sum(d + a))

        return step

    py, vec = SegmentSumTree(capacity), VectorSumTree(capacity)
    for t in (py, vec):  # the same priorities as ours
        t.tree[t.size : t.size + capacity] = prios
        t.rebuild()

    def py_sample(mass):
        return np.array([py.find_prefixsum_idx(m) for m in mass.tolist()], np.int64)

    def py_update(idx, value):
        for j, v in zip(idx.tolist(), value.tolist(), strict=True):
            py[j] = v

    def uniform(i):
        idx = rng.integers(0, capacity, BATCH)
        o, a, r, d, o2 = gather(idx)
        return float(np.sum(_td(r, o, o2, i, xp=np)) + 1e-3 * np.sum(d + a))

    return {
        # ~10-20 ms per iteration at 1e6 rows: fewer iterations per round
        "numpy_tree_python": host_timer(per_host(py, py_sample, py_update), max(5, iters // 5)),
        "numpy_tree_vectorised": host_timer(per_host(vec, vec.find, vec.set), iters),
        "numpy_uniform": host_timer(uniform, iters),
    }


# ---- driver ------------------------------------------------------------------------------------


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
        "flashbax": flashbax.__version__ if hasattr(flashbax, "__version__") else _dist("flashbax"),
        "quick": q,
        "git": _git(),
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


def _git() -> str:
    """The commit measured, with "+dirty" when `jaxrl_fast/replay` has uncommitted changes."""
    import subprocess

    root = os.path.join(os.path.dirname(__file__), "..")
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "jaxrl_fast/replay"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def _dist(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _us(x: dict) -> str:
    if "us_per_iter" not in x:
        return "skipped: memory"
    return f"{x['us_per_iter']:,.0f}" if x["us_per_iter"] >= 100 else f"{x['us_per_iter']:.1f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}x"


def _summary(r: dict) -> list[str]:
    """One line on the seed article's claim: the range of host-tree / ours-sum-tree ratios."""
    lines = []
    for obs_name in OBS:
        x = [
            c["ratios"]["numpy_python_over_ours_sum_tree"]
            for c in r["cells"]
            if c["obs"] == obs_name and c["ratios"]["numpy_python_over_ours_sum_tree"]
        ]
        if x:
            lines.append(
                f"- {obs_name}: ours (sum tree, one jitted scan) is **{min(x):.0f}x to "
                f"{max(x):.0f}x** faster than the host numpy segment tree with Python loops "
                "(the seed article claims 120x)."
            )
    return [*lines, ""] if lines else []


def render(r: dict) -> str:
    m = r["machine"]
    q = " --quick" if r["quick"] else ""
    lines = [
        f"# Replay sampling, batch {r['batch_size']}{' (quick)' if r['quick'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; python {m['python']}, jax "
        f"{m['jax']} on {m['backend']}, flashbax {r['flashbax']}. Produced by "
        f"`python benchmarks/replay.py{q}` in {r['benchmark_time_s']:.0f} s, at commit "
        f"`{r['git']}`"
        + (" (`+dirty`: `jaxrl_fast/replay` had uncommitted changes)." if "+" in r["git"] else "."),
        "",
        "**Caveat:** a shared 2-core VM; absolute times move by about ±20% between runs. Compare "
        "ratios within this run.",
        "",
        *_summary(r),
        "Microseconds per iteration: sample a batch (obs, next obs, action, reward, discount) and, "
        "for PER, write the batch's new priorities. TD errors come from the batch and the "
        "iteration, so priorities change every iteration. Device methods: median of one jitted "
        "`lax.scan` (compile excluded); host methods: a Python loop. Lower is better; `a/b` = how "
        "many times faster b is than a.",
        "",
    ]
    for obs_name in OBS:
        cells = [c for c in r["cells"] if c["obs"] == obs_name]
        shape, dt = OBS[obs_name]
        lines += [
            f"## {obs_name} observations ({'x'.join(map(str, shape))} {np.dtype(dt).name})",
            "",
            "| rows | " + " | ".join(LABELS[k] for k in METHODS) + " |",
            "|---" * (len(METHODS) + 1) + "|",
        ]
        for c in cells:
            lines.append(f"| {c['capacity']:,} | " + " | ".join(_us(c[k]) for k in METHODS) + " |")
        lines += [
            "",
            "| rows | flashbax PER / ours sum tree | numpy Python tree / ours sum tree | numpy "
            "vectorised tree / ours sum tree | ours cumsum / ours sum tree | flashbax uniform / "
            "ours uniform | numpy uniform / ours uniform |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in cells:
            x = c["ratios"]
            lines.append(
                f"| {c['capacity']:,} | {_x(x['flashbax_per_over_ours_sum_tree'])} | "
                f"{_x(x['numpy_python_over_ours_sum_tree'])} | "
                f"{_x(x['numpy_vectorised_over_ours_sum_tree'])} | "
                f"{_x(x['ours_cumsum_over_ours_sum_tree'])} | "
                f"{_x(x['flashbax_uniform_over_ours_uniform'])} | "
                f"{_x(x['numpy_uniform_over_ours_uniform'])} |"
            )
        lines.append("")
    cx = r["crossover"]
    lines += [
        "## Sum tree vs cumsum sampler (ours, CartPole rows)",
        "",
        "| rows | sum tree µs | cumsum µs | faster |",
        "|---|---|---|---|",
    ]
    for row in cx["rows"]:
        faster = "sum tree" if row["sum_tree_us"] < row["cumsum_us"] else "cumsum"
        lines.append(
            f"| {row['capacity']:,} | {row['sum_tree_us']:.1f} | {row['cumsum_us']:.1f} | {faster} |"
        )
    lines += [
        "",
        f"`auto_crossover_rows` = **{cx['auto_crossover_rows']}**: the smallest tested capacity "
        "from which the sum tree is faster at every tested capacity (the value for "
        "`replay.prioritised.AUTO_SUM_TREE_FROM`).",
        "",
        "## Notes",
        "",
        "- Every buffer stores each observation once (ours: a `[T, E]` ring; flashbax: flat "
        "buffers, sequences of 2 along time; host: numpy views of our ring, next row = row + E).",
        "- Methods are interleaved: after one warm-up call each, every round runs each method "
        "once (one compiled scan of K iterations, or K host iterations), and the median round "
        "counts. When both libraries' rows do not fit in memory together, ours and the host "
        "methods are measured first, then flashbax (`interleaved` in the JSON).",
        "- The host Python tree runs a fifth of the iterations per round (at least 5); its "
        "per-iteration time is what counts.",
        "- Each loop writes the whole batch to memory (device: the sampled observations are "
        "carried to the next iteration and returned, so XLA cannot trim the gather; host: numpy "
        "fancy indexing, a fresh array per batch) and derives TD errors from one element of "
        "each observation, the reward and the iteration.",
        "- PER loops also compute importance weights (ours inside `sample`; flashbax and host in "
        "the loop) and write priorities `(|td| + eps) ** 0.6`.",
        "- Buffers are filled by each library's own `add` with random transitions (all valid); "
        "each cell's fill time is in the JSON.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
