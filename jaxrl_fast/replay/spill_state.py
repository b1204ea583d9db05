"""The L3 host store's checkpoint state (`spill.HostStore`'s `host_state`, `check_host_state`
and `load_host_state`), the rows an L3 read returns (`L3Rows`) and the counters a checkpoint
keeps. A mixin over `HostStore`'s attributes: the store's arrays, counters, seed and prefetch."""

from __future__ import annotations

import math
import os
import shutil
from typing import Any, Mapping, NamedTuple

import numpy as np

from jaxrl_fast.replay.layout import read_fields
from jaxrl_fast.replay.spill_dirs import remove_spill_dir

__all__ = ["COUNTERS", "PREFETCHED", "HostStateMixin", "L3Rows"]


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


class HostStateMixin:
    """`HostStore`'s checkpoint methods (module docstring)."""

    # ---- checkpoints -------------------------------------------------------------------------
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
