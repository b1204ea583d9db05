"""The host side of L3: host RAM or memory-mapped files that the compiled loop reaches through
`io_callback`s (DESIGN §4); the device side, which makes those calls, is `replay/l3.py`.

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

Spill directories (`l3="disk"`) are `spill_dir/jaxrl_fast-l3-<pid>-<random>/` and hold an
`owner.json` naming the process that made them: host, machine and boot ids, pid namespace, pid
and the pid's start time (/proc/<pid>/stat field 22), so a reused pid is not taken for the owner.
`close()` (or the store's garbage collection, or a normal exit) removes the directory; a run
killed with SIGKILL cannot. So every new disk store first reclaims, in its `spill_dir`, the
directories whose owner is certainly gone (`reclaim_spill_dirs`) and warns in one line how many
and how many bytes (apparent and on disk) it removed. Never touched: directories of live
processes, of processes this machine cannot check (another host, another pid namespace, another
user), those kept by `keep_spill=True`, and directories without `owner.json` (made before owner
files existed: they are only reported, with their paths, sizes and the `rm -rf` that removes them,
since nothing tells whether their run is still live).
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
import shutil
import socket
import tempfile
import time
import warnings
import weakref
from typing import NamedTuple

import numpy as np

from jaxrl_fast.replay.layout import stored_fields


class L3Rows(NamedTuple):
    """Rows read from L3, leading `[S, M, B3]`: the fields of `layout.read_fields`, in order."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    next_obs: np.ndarray
    weight: np.ndarray  # 1.0 for a valid transition, 0.0 otherwise (bad request or reset row)


def check_spill_dir(spill_dir: str, needed_bytes: int) -> None:
    """Raise a clear `ValueError` unless `spill_dir` exists, is writable and has room.

    Args:
      spill_dir: the directory the L3 files go under.
      needed_bytes: bytes the L3 files will take.
    """
    if not os.path.isdir(spill_dir):
        raise ValueError(
            f"ReplayConfig.spill_dir={spill_dir!r} is not allowed; expected an existing "
            f"directory (create it first)."
        )
    try:
        with tempfile.TemporaryFile(dir=spill_dir):
            pass
    except OSError as e:
        raise ValueError(
            f"ReplayConfig.spill_dir={spill_dir!r} is not allowed; expected a writable "
            f"directory ({e.strerror})."
        ) from None
    free = shutil.disk_usage(spill_dir).free
    if free < needed_bytes:
        raise ValueError(
            f"ReplayConfig.spill_dir={spill_dir!r} has {free / 2**30:.2f} GiB free; the "
            f"configured L3 (l3_capacity x seeds) needs {needed_bytes / 2**30:.2f} GiB. Lower "
            f"ReplayConfig.l3_capacity or choose another spill_dir."
        )


def _remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def format_bytes(n: float) -> str:
    """`n` bytes with an SI unit: "512 B", "30.27 kB", "1.61 GB"."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


# ---- spill directories: who owns them, and reclaiming those of runs that are gone ------------
SPILL_PREFIX = "jaxrl_fast-l3-"
OWNER_FILE = "owner.json"
_RECLAIMING = ".reclaiming"  # suffix of a directory being removed (still matches the prefix)
_GRACE_S = 60.0  # an ownerless directory this young may be a store writing its owner file
_UNKNOWN_START = -1  # the process runs, but no /proc says since when


class SpillDirUsage(NamedTuple):
    """A spill directory and its size: `apparent_bytes` (file sizes; the memory-mapped files
    are sparse) and `disk_bytes` (blocks allocated)."""

    path: str
    apparent_bytes: int
    disk_bytes: int


class StaleSpillDirs(NamedTuple):
    """Spill directories in a `spill_dir` that no live run owns.

    Attributes:
      gone: directories whose owner process is certainly gone (`reclaim_spill_dirs` removes
        them); after a reclaim, those it removed.
      unowned: directories without owner information (older jaxrl_fast): reported, never removed.
    """

    gone: list[SpillDirUsage]
    unowned: list[SpillDirUsage]


def _read_text(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _machine() -> dict:
    """What identifies this machine, its boot and this process's pid namespace."""
    machine = _read_text("/etc/machine-id") or _read_text("/var/lib/dbus/machine-id")
    boot = _read_text("/proc/sys/kernel/random/boot_id")
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = None
    return {
        "host": socket.gethostname(),
        "machine_id": machine.strip() if machine else None,
        "boot_id": boot.strip() if boot else None,
        "pid_ns": pid_ns,
    }


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot (/proc/<pid>/stat field 22).

    Returns:
      The start time; None when no such process runs (a zombie counts as gone); -1 when it runs
      but there is no /proc to say when it started (not Linux).
    """
    if pid <= 0:
        return None
    stat = _read_text(f"/proc/{pid}/stat")
    if stat is not None:
        # Field 2 (comm) may hold spaces and ")": the fields after its last ")" are 3, 4, ...
        rest = stat[stat.rindex(")") + 2 :].split()
        return None if rest[0] in ("Z", "X") else int(rest[22 - 3])
    if os.path.isdir("/proc/self"):
        return None  # Linux, and no /proc/<pid>: not running
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:  # e.g. another user's process: it runs
        pass
    return _UNKNOWN_START


def _owner(keep: bool) -> dict:
    pid = os.getpid()
    return {
        "pid": pid,
        "start": process_start(pid),
        **_machine(),
        "keep": keep,
        "made": time.time(),
    }


def _owner_gone(owner: dict, here: dict) -> bool:
    """True only when the process that made a spill directory is certainly not running."""
    if any(owner.get(k) != here[k] for k in ("host", "machine_id")):
        return False  # another machine's run (a shared file system): it cannot be checked here
    if owner.get("boot_id") and here["boot_id"] and owner["boot_id"] != here["boot_id"]:
        return True  # this machine rebooted since: no process of the earlier boot runs
    if owner.get("pid_ns") != here["pid_ns"]:
        return False  # another container's pids: the same number is another process here
    pid, started = owner.get("pid"), owner.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    now = process_start(pid)
    if now is None:
        return True
    # The pid runs: it is the owner unless it started at another time (the pid was reused).
    return isinstance(started, int) and started >= 0 and now >= 0 and now != started


def _usage(path: str) -> SpillDirUsage:
    apparent = disk = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            apparent += st.st_size
            disk += getattr(st, "st_blocks", 0) * 512  # st_blocks counts 512-byte units
    return SpillDirUsage(path, apparent, disk)


def make_spill_dir(spill_dir: str, *, keep: bool = False) -> str:
    """Make a fresh spill directory in `spill_dir`, its `owner.json` naming this process.

    Args:
      spill_dir: an existing, writable directory.
      keep: the run keeps its L3 files (`keep_spill`): never reclaimed, even once it ends.

    Returns:
      The new directory's path.
    """
    path = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-", dir=spill_dir)
    tmp = os.path.join(path, OWNER_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(_owner(keep), f)
    os.replace(tmp, os.path.join(path, OWNER_FILE))  # readers see the whole file or none
    return path


def find_stale_spill_dirs(spill_dir: str) -> StaleSpillDirs:
    """List the spill directories in `spill_dir` that no live run owns; removes nothing.

    Returns:
      `StaleSpillDirs`: `gone`, the directories of this user whose owner process is certainly
      not running (dead pid, or the pid now runs a process that started at another time, or the
      machine rebooted since) and not kept; `unowned`, directories without a readable
      `owner.json` (older than a minute, so a store still writing its owner file is not one).
    """
    gone, unowned = [], []
    try:
        entries = [e for e in os.scandir(spill_dir) if e.name.startswith(SPILL_PREFIX)]
    except OSError:
        return StaleSpillDirs(gone, unowned)
    here, uid = _machine(), os.getuid()
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        text = _read_text(os.path.join(entry.path, OWNER_FILE))
        try:
            owner = json.loads(text) if text is not None else None
        except ValueError:
            owner = None
        if not isinstance(owner, dict):
            if time.time() - st.st_mtime >= _GRACE_S:
                unowned.append(_usage(entry.path))
        elif st.st_uid == uid and not owner.get("keep") and _owner_gone(owner, here):
            gone.append(_usage(entry.path))
    return StaleSpillDirs(gone, unowned)


def _remove_owner_last(path: str) -> None:
    """Remove a spill directory, its owner file last: a removal cut short is reclaimed later."""
    try:
        for entry in os.scandir(path):
            if entry.name != OWNER_FILE:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
    except OSError:
        pass
    _remove(path)


def reclaim_spill_dirs(spill_dir: str) -> StaleSpillDirs:
    """Remove the spill directories in `spill_dir` of runs that are gone, and say so.

    Warns (`UserWarning`, one line each) with how many directories were reclaimed and their bytes
    (apparent and on disk), and with the paths, sizes and removal command of directories without
    owner information, which are left alone. Directories of live runs are not touched.

    Args:
      spill_dir: a directory holding `jaxrl_fast-l3-*` spill directories.

    Returns:
      `StaleSpillDirs`: `gone` the directories removed, `unowned` those reported.

    Examples:
      >>> import tempfile
      >>> d = tempfile.mkdtemp()
      >>> path = make_spill_dir(d)  # this process's: alive, so not reclaimed
      >>> reclaim_spill_dirs(d).gone, os.path.isdir(path)
      ([], True)
      >>> shutil.rmtree(d)
    """
    found = find_stale_spill_dirs(spill_dir)
    removed = []
    for usage in found.gone:
        path = usage.path
        if not path.endswith(_RECLAIMING):  # claim it: of two runs reclaiming, one renames it
            try:
                os.rename(path, path + _RECLAIMING)
            except OSError:
                continue
            path += _RECLAIMING
        _remove_owner_last(path)
        if not os.path.exists(path):
            removed.append(usage)
    if removed:
        apparent = sum(u.apparent_bytes for u in removed)
        disk = sum(u.disk_bytes for u in removed)
        warnings.warn(
            f"reclaimed {len(removed)} L3 spill dir(s) in {spill_dir} left by runs that are gone "
            f"(killed before they could remove them): {format_bytes(apparent)} apparent, "
            f"{format_bytes(disk)} on disk.",
            UserWarning,
            stacklevel=2,
        )
    if found.unowned:
        apparent = sum(u.apparent_bytes for u in found.unowned)
        disk = sum(u.disk_bytes for u in found.unowned)
        paths = " ".join(u.path for u in found.unowned)
        warnings.warn(
            f"{spill_dir} holds {len(found.unowned)} L3 spill dir(s) with no {OWNER_FILE} (made "
            f"by an older jaxrl_fast), {format_bytes(apparent)} apparent, {format_bytes(disk)} on "
            f"disk; they are never removed automatically, as their run may still be live. Once "
            f"no run uses them: rm -rf {paths}",
            UserWarning,
            stacklevel=2,
        )
    return StaleSpillDirs(removed, found.unowned)


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
            self._finalizer = None if keep else weakref.finalize(self, _remove, self.path)
            self.arrays = {
                name: np.memmap(os.path.join(self.path, f"{name}.bin"), dtype=d, mode="w+", shape=s)
                for name, (s, d) in specs.items()
            }
        else:
            self.arrays = {name: np.zeros(s, d) for name, (s, d) in specs.items()}
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="l3-read")
        self._pending: concurrent.futures.Future | None = None
        self._ready: L3Rows | None = None
        self._empty_shape: tuple[int, int] | None = None
        self.blocks_written = 0
        self.slots_written = 0
        self.bytes_written = 0
        self.bytes_read = 0
        self.rows_read = 0
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
                if not self.keep:
                    _remove(self.path)
