"""The host side of L3: host RAM or memory-mapped files that the compiled loop reaches through
`io_callback`s (docs/replay-tiers.md); the device side, which makes those calls, is `replay/l3.py`.

Layout mirrors L2 (`replay/ring.py`): every field of `layout.stored_fields` is `[S, T3, E, ...]`
(seeds, slots, envs);
global slot `g` (the `g`-th slot ever committed to L2) lives at `g % T3`, so L3 is a FIFO of
the last `T3` slots. Writes come in blocks of `K` consecutive slots for all seeds at once.

With frame deduplication (`frame_stack=k`, `replay/ring.py`) L3 keeps L2's layout too: one
frame and a `fresh` flag per row. A read rebuilds the `obs` and `next_obs` stacks as L2 does,
walking back from a row one slot per frame but staying on a fresh row; a row whose walk would
leave the slots L3 still holds is not requested (the device asks only for rows at least
`k - 1` slots newer than the oldest slot held).

Reads are requests of rows (global slot, env) per seed. With `prefetch=True` (the default)
a read call hands back the rows of the *previous* request, gathered by a worker thread while
the device ran, and starts gathering the new one: the device never waits on the gather, only
on the call itself. Every write and read first waits for the gather in flight, so the data a
request returns is exactly what a synchronous read at request time returns (a test checks it).

Disk stores (`l3="disk"`) live in a fresh, owned spill directory that `close()` removes and
that later stores reclaim if the run was killed (`replay/spill_dirs.py`).

Checkpoints: `host_state()` gives everything a resumed run needs from the store (its rows, its
counters and the rows the next read call hands back), `load_host_state` puts it into a fresh
store of the same layout, after which every callback returns what it would have returned had
the run never stopped. Both must run between chunks, with no callback in flight.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import shutil
import weakref
from typing import Any, Mapping, NamedTuple

import numpy as np

from jaxrl_fast.replay.layout import read_fields, stored_fields
from jaxrl_fast.replay.spill_dirs import (
    check_spill_dir,
    make_spill_dir,
    reclaim_spill_dirs,
    remove_spill_dir,
)


class L3Rows(NamedTuple):
    """Rows read from L3, leading `[S, M, B3]`: the fields of `layout.read_fields`, in order."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    next_obs: np.ndarray
    weight: np.ndarray  # 1.0 for a valid transition, 0.0 otherwise (bad request or reset row)


# `host_state` keys besides the stored fields: the store's counters (int64 scalars), the seed of
# its draws, and (prefetching) whether rows wait for the next read call, and those rows.
COUNTERS = (
    "blocks_written",
    "slots_written",
    "bytes_written",
    "bytes_read",
    "rows_read",
    "read_calls",
)
PREFETCHED = "prefetched"
_SLAB_BYTES = 64 * 2**20  # load_host_state copies rows in slabs of about this many bytes


def _shape_dtype(x: Any) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and numpy dtype of an array-like, without reading it (a numpy array or memmap, a
    `tensorstore.TensorStore`, a python scalar)."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        x = np.asarray(x)
    return tuple(x.shape), np.dtype(getattr(x.dtype, "numpy_dtype", x.dtype))


class HostStore:
    """L3 storage and its host-side callbacks.

    Args:
      kind: "host" (numpy arrays in RAM) or "disk" (`np.memmap` files in a fresh subdirectory
        of `spill_dir`, removed by `close()` unless `keep`; making it first reclaims the
        subdirectories that killed runs left, `reclaim_spill_dirs`).
      num_seeds, slots, num_envs: the `[S, T3, E]` layout.
      obs_shape, obs_dtype: one observation.
      spill_dir, keep: for "disk".
      prefetch: hand back each read one call later (see module doc).
      seed: with the read count, seeds `read_uniform`'s draws (reproducible runs).
      frame_stack: `k > 1` stores one frame per row (`obs_shape[-1] == k`) and rebuilds stacks
        on read; 0 stores whole observations.
      read_shape: `(M, B3)`, rows per seed of every read request (`l3.make_l3` passes its
        layout's); it fixes the prefetched rows `host_state` saves. None: learnt from the first
        read (`host_state` has no prefetched rows before it).
    """

    def __init__(
        self,
        kind: str,
        *,
        num_seeds: int,
        slots: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype,
        spill_dir: str | None = None,
        keep: bool = False,
        prefetch: bool = True,
        seed: int = 0,
        frame_stack: int = 0,
        read_shape: tuple[int, int] | None = None,
    ) -> None:
        if kind not in ("host", "disk"):
            raise ValueError(f"ReplayConfig.l3={kind!r} is not allowed; expected 'host' or 'disk'.")
        self.kind, self.slots, self.num_envs = kind, slots, num_envs
        self.num_seeds, self.prefetch, self.keep, self.seed = num_seeds, prefetch, keep, seed
        self.obs_shape, self.obs_dtype = tuple(obs_shape), np.dtype(obs_dtype)
        self.frame_stack = frame_stack if frame_stack > 1 else 0
        if self.frame_stack and (len(self.obs_shape) < 2 or self.obs_shape[-1] != frame_stack):
            raise ValueError(
                f"frame_stack={frame_stack} needs observations whose last axis stacks "
                f"{frame_stack} frames; got shape {self.obs_shape}."
            )
        lead = (num_seeds, slots, num_envs)
        fields = stored_fields(self.obs_shape, self.obs_dtype, self.frame_stack)
        self.fields = tuple(fields)  # the order `write` takes them in
        specs = {name: (lead + shape, dtype) for name, (shape, dtype) in fields.items()}
        self.nbytes = sum(math.prod(s) * d.itemsize for s, d in specs.values())
        self.path: str | None = None
        if kind == "disk":
            if spill_dir is None:
                raise ValueError("ReplayConfig.spill_dir is required when l3='disk'.")
            check_spill_dir(spill_dir, 0)  # exists and is writable
            reclaim_spill_dirs(spill_dir)  # before measuring the free space: it frees some
            check_spill_dir(spill_dir, self.nbytes)
            self.path = make_spill_dir(spill_dir, keep=keep)
            self._finalizer = None if keep else weakref.finalize(self, remove_spill_dir, self.path)
            self.arrays = {
                name: np.memmap(os.path.join(self.path, f"{name}.bin"), dtype=d, mode="w+", shape=s)
                for name, (s, d) in specs.items()
            }
        else:
            self.arrays = {name: np.zeros(s, d) for name, (s, d) in specs.items()}
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="l3-read")
        self._pending: concurrent.futures.Future | None = None
        self._ready: L3Rows | None = None
        self.read_shape = None if read_shape is None else tuple(read_shape)
        self._snapshot: str | None = None  # the latest `host_state(copy=True)` files (disk)
        self.blocks_written = 0
        self.slots_written = 0
        self.bytes_written = 0
        self.bytes_read = 0
        self.rows_read = 0
        self.read_calls = 0
        self.closed = False

    # ---- host callbacks ----------------------------------------------------------------------
    def write(self, start, *values, **named) -> None:
        """Store a block: global slots `[start, start + K)` for all seeds (`[S, K, E, ...]`).

        The block's arrays are the fields of `layout.stored_fields` (`obs, action, reward,
        discount, offset, valid`, then `fresh` with frame deduplication), positionally in that
        order or by name; with frame deduplication `obs` holds frames.
        """
        self._wait()
        parts = dict(zip(self.fields[: len(values)], values, strict=True), **named)
        if set(parts) != set(self.fields) or len(values) + len(named) != len(self.fields):
            if ("fresh" in parts) != bool(self.frame_stack):
                raise ValueError(
                    "HostStore.write: `fresh` flags are required with frame_stack and only then"
                )
            raise ValueError(f"HostStore.write: expected fields {self.fields}, got {tuple(parts)}")
        start = int(start)
        k = int(np.shape(parts["action"])[1])
        pos = start % self.slots
        if pos + k > self.slots:
            raise RuntimeError(f"L3 block at slot {start} (+{k}) crosses the end of the store")
        for name, value in parts.items():  # the inputs are read-only views: copy into the store
            self.arrays[name][:, pos : pos + k] = np.asarray(value)
        self.blocks_written += 1
        self.slots_written += k
        self.bytes_written += sum(np.asarray(v).nbytes for v in parts.values())

    def read(self, slot, env, ok) -> L3Rows:
        """Request rows (`[S, M, B3]` global slot, env, request-valid); returns the previous
        request's rows when prefetching, else this one's."""
        slot, env, ok = (np.array(x, copy=True) for x in (slot, env, ok))
        if self.read_shape is None:
            self.read_shape = tuple(slot.shape[1:])
        if slot.shape != (self.num_seeds, *self.read_shape):
            raise ValueError(
                f"HostStore.read: requests are {(self.num_seeds, *self.read_shape)} (seeds, "
                f"read_shape), got {slot.shape}"
            )
        self.read_calls += 1
        if not self.prefetch:
            return self._gather(slot, env, ok)
        self._wait()
        previous, self._ready = self._ready, None
        self._pending = self._executor.submit(self._gather, slot, env, ok)
        if previous is None:  # first call: nothing was requested before
            previous = self._gather(slot, env, np.zeros_like(ok))
        return previous

    def read_uniform(self, fetch, lo, count, *, shape: tuple[int, int]) -> L3Rows:
        """Request `shape` rows per seed drawn uniformly from the `count` rows from global slot
        `lo` on (row `u` is slot `lo + u // E`, env `u % E`); returns like `read`.

        The draw uses numpy's PCG64 seeded by `(seed, fetch)`, so a run is reproducible.
        """
        fetch, lo, count = int(fetch), int(lo), int(count)
        full = (self.num_seeds, *shape)
        if count <= 0:
            zero = np.zeros(full, np.int64)
            return self.read(zero, zero, np.zeros(full, bool))
        u = np.random.default_rng((self.seed, fetch)).integers(0, count, full)
        return self.read(lo + u // self.num_envs, u % self.num_envs, np.ones(full, bool))

    # ---- host-side helpers -------------------------------------------------------------------
    def _wait(self) -> None:
        """Finish the gather in flight; its rows wait in `_ready` for the next read call."""
        if self._pending is not None:
            self._ready, self._pending = self._pending.result(), None

    def _gather(self, slot: np.ndarray, env: np.ndarray, ok: np.ndarray) -> L3Rows:
        a = self.arrays
        s = np.arange(self.num_seeds).reshape((-1,) + (1,) * (slot.ndim - 1))
        s = np.broadcast_to(s, slot.shape)
        pos = slot.astype(np.int64) % self.slots
        nxt = (pos + a["offset"][s, pos, env].astype(np.int64)) % self.slots
        valid = np.logical_and(ok.astype(bool), a["valid"][s, pos, env])
        rows = L3Rows(
            obs=self._obs(s, pos, env),
            action=a["action"][s, pos, env],
            reward=a["reward"][s, pos, env],
            discount=a["discount"][s, pos, env],
            next_obs=self._obs(s, nxt, env),
            weight=valid.astype(np.float32),
        )
        if ok.any():
            self.rows_read += int(ok.sum())
            self.bytes_read += int(sum(np.asarray(x).nbytes for x in rows))
        return rows

    def _obs(self, s: np.ndarray, pos: np.ndarray, env: np.ndarray) -> np.ndarray:
        """Observations of rows `(s, pos, env)`: stored ones, or stacks rebuilt from frames."""
        obs = self.arrays["obs"]
        if not self.frame_stack:
            return np.ascontiguousarray(obs[s, pos, env])
        fresh = self.arrays["fresh"]
        out = np.empty(pos.shape + self.obs_shape, self.obs_dtype)
        idx = pos
        out[..., -1] = obs[s, idx, env]
        for j in range(2, self.frame_stack + 1):  # walk back, staying on a fresh row
            idx = np.where(fresh[s, idx, env], idx, (idx - 1) % self.slots)
            out[..., -j] = obs[s, idx, env]
        return out

    def _require_open(self, what: str) -> None:
        if self.closed:
            raise RuntimeError(f"HostStore.{what}: the store is closed")

    def slot_rows(self, seed: int, start: int, stop: int) -> dict[str, np.ndarray]:
        """Copies of the rows of global slots `[start, stop)` of one seed (for inspection).

        Raises:
          ValueError: the range is longer than the store.
        """
        if stop - start > self.slots:
            raise ValueError(f"slots [{start}, {stop}) exceed the L3 horizon of {self.slots}")
        pos = np.arange(start, stop) % self.slots
        return {name: np.array(arr[seed, pos]) for name, arr in self.arrays.items()}

    def close(self) -> None:
        """Stop the reader thread; remove the files unless `keep`. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        try:
            self._wait()
        finally:
            self._executor.shutdown(wait=True)
            if self.path is not None:
                for arr in self.arrays.values():
                    if isinstance(arr, np.memmap):
                        arr.flush()
                self.arrays = {}
                if self._snapshot is not None:
                    remove_spill_dir(self._snapshot)
                if not self.keep:
                    remove_spill_dir(self.path)

    def host_state(self, *, copy: bool = False) -> dict[str, np.ndarray]:
        """Everything a resumed run needs from this store, as arrays (for a checkpoint).

        Call it between chunks, with no callback in flight (`Buffer.host_state` waits for
        them); it first finishes the gather in flight, which changes nothing the device sees.

        Args:
          copy: False: the rows are read-only views of the store itself (the `np.memmap`s of a
            disk store: nothing is copied), which the next write changes, so write them out
            (a synchronous checkpoint save) before the run goes on. True: a snapshot that
            stays as it is: RAM copies (host), or copies of the spill files made by the
            kernel in the spill directory, mapped read-only (disk: no RAM; the previous
            snapshot's files go, and `close()` removes the last).

        Returns:
          The stored fields (`layout.stored_fields`, `[S, T3, E, ...]`), the int64 scalars of
          `COUNTERS` and `draw_seed`, and when prefetching (with a known `read_shape` and
          rows to read) `prefetched` (bool scalar: rows wait for the next read call) and
          `prefetched_<field>` (`[S, M, B3, ...]`, `layout.read_fields`; zeros when none wait).
          The keys, shapes and dtypes depend only on how the store was built.
        """
        self._require_open("host_state")
        self._wait()
        if copy and self.kind == "disk":
            state = self._copy_files()
        else:
            state = {}
            for name, arr in self.arrays.items():
                view = np.array(arr) if copy else arr.view()
                view.flags.writeable = False
                state[name] = view
        for name in COUNTERS:
            state[name] = np.asarray(getattr(self, name), np.int64)
        state["draw_seed"] = np.asarray(self.seed, np.int64)
        if self._saves_prefetch():
            state[PREFETCHED] = np.asarray(self._ready is not None)
            for name, (shape, dtype) in self._prefetch_spec().items():
                rows = getattr(self._ready, name[len(PREFETCHED) + 1 :], None)
                state[name] = np.zeros(shape, dtype) if rows is None else np.array(rows)
        return state

    def check_host_state(self, state: Mapping[str, Any]) -> None:
        """Raise a `ValueError` naming every key, shape, dtype or seed of `state` (from
        `host_state`) that this store does not have; changes nothing."""
        spec = {name: (arr.shape, arr.dtype) for name, arr in self.arrays.items()}
        spec |= {name: ((), np.dtype(np.int64)) for name in (*COUNTERS, "draw_seed")}
        if self._saves_prefetch():
            spec[PREFETCHED] = ((), np.dtype(bool))
            spec |= self._prefetch_spec()
        where = (
            f"this L3 store (seeds, slots, envs = {self.num_seeds}, {self.slots}, "
            f"{self.num_envs}; obs {self.obs_shape} {self.obs_dtype}; frame_stack "
            f"{self.frame_stack}; read_shape {self.read_shape})"
        )
        problems = [f"missing {k!r}" for k in spec if k not in state]
        problems += [f"unexpected {k!r}" for k in state if k not in spec]
        for key, want in spec.items():
            if key in state and _shape_dtype(state[key]) != want:
                got = _shape_dtype(state[key])
                problems.append(f"{key!r} is {got[0]} {got[1]}, expected {want[0]} {want[1]}")
        seed = int(np.asarray(state["draw_seed"])) if not problems else self.seed
        if seed != self.seed:
            problems.append(f"'draw_seed' is {seed}, expected {self.seed} (TrainConfig.seed)")
        if problems:
            raise ValueError(
                f"load_host_state: the L3 host state does not fit {where}: "
                + "; ".join(problems)
                + ". Resume with the config the checkpoint was saved with."
            )

    def load_host_state(self, state: Mapping[str, Any]) -> None:
        """Put a `host_state()` into this store, replacing everything it holds.

        Call it between chunks, with no callback in flight, on a store built with the same
        arguments (a fresh one); the next read call then returns the rows it would have
        returned in the run that saved `state`. The rows are copied in slabs of about 64 MB,
        from numpy arrays, memmaps or anything that slices to them and has `shape` and `dtype`
        (a `tensorstore.TensorStore` opened on a saved array: then no more than a slab of the
        rows is ever in RAM).

        Raises:
          ValueError: `state` does not fit this store (`check_host_state`); nothing changed.
        """
        self._require_open("load_host_state")
        self._wait()
        self.check_host_state(state)
        for name, arr in self.arrays.items():
            row = max(1, arr.nbytes // max(1, arr.shape[1]))
            step = max(1, _SLAB_BYTES // row)
            for lo in range(0, arr.shape[1], step):
                hi = min(lo + step, arr.shape[1])  # a TensorStore does not clip slices
                arr[:, lo:hi] = np.asarray(state[name][:, lo:hi])
        for name in COUNTERS:
            setattr(self, name, int(np.asarray(state[name])))
        self._ready = None
        if self._saves_prefetch() and bool(np.asarray(state[PREFETCHED])):
            n = len(PREFETCHED) + 1
            self._ready = L3Rows(**{k[n:]: np.array(state[k]) for k in self._prefetch_spec()})

    def _saves_prefetch(self) -> bool:
        return self.prefetch and self.read_shape is not None and math.prod(self.read_shape) > 0

    def _prefetch_spec(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        lead = (self.num_seeds, *self.read_shape)
        fields = read_fields(self.obs_shape, self.obs_dtype)
        return {f"{PREFETCHED}_{k}": (lead + shape, dt) for k, (shape, dt) in fields.items()}

    def _copy_files(self) -> dict[str, np.ndarray]:
        """Read-only memmaps of copies of the spill files (`host_state(copy=True)`, disk)."""
        for arr in self.arrays.values():
            arr.flush()
        old = self._snapshot
        self._snapshot = os.path.join(self.path, f"snapshot-{os.urandom(4).hex()}")
        os.mkdir(self._snapshot)
        state = {}
        for name, arr in self.arrays.items():
            dst = os.path.join(self._snapshot, f"{name}.bin")
            shutil.copyfile(arr.filename, dst)  # sendfile / copy_file_range: no user-space copy
            state[name] = np.memmap(dst, dtype=arr.dtype, mode="r", shape=arr.shape)
        if old is not None:
            remove_spill_dir(old)  # mapped files stay readable until unmapped
        return state
