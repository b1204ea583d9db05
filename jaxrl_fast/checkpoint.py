"""Checkpoints of the whole train state (the fused loop's runner) with orbax-checkpoint.

The runner holds everything the loop carries: online and target parameters, optimiser state,
loss-scale state, the replay (ring, PER tree, cursors, L1 staging), the env state, the PRNG keys
and the block counter. A checkpoint is that tree after a chunk, with PRNG keys saved as their
key data, plus a JSON record: what the caller gives (chunks done, env steps, the chunk log so
far), the number of devices the seeds were spread over, and a CRC-32 of every leaf. `run_chunk`
is a pure function of the runner, so a run restored from chunk `k` and run to the end gives the
same parameters, bit for bit, as the run that never stopped (on the same device layout).

Saves are synchronous: the next chunk donates the runner's buffers, so no save may still read
them when it starts. The arrays go to orbax as they are (on CPU, no host copy is made) and are
written in data files of at most 16 MiB, so a save needs little memory beyond the state.

What can go wrong, and what happens:

* Killed during a save: orbax writes each checkpoint to `<step>.orbax-checkpoint-tmp` and renames
  it when complete, so the previous checkpoints are intact; `manager` removes the unfinished
  directory.
* A save fails (a full disk): `save` removes the unfinished checkpoint and raises `OSError`
  naming the directory and the step; the checkpoints before it are kept.
* A damaged checkpoint (a truncated, deleted or garbled file; missing metadata):
  `Checkpointer.restore_latest` warns and restores the one before; the damaged ones are renamed
  to `<step>.unreadable` (kept, never picked again). Garbled array bytes that orbax reads
  without an error are caught by the record's CRC-32s.

Multi-process runs (`jax.distributed`): every process calls `save` and `restore` together, on a
directory they all see (one machine, or a shared file system); each writes and reads only its
own shards (orbax's multi-process arrays; process 0 writes the record). The record keeps a
CRC-32 of each process's shards of every leaf (`process_checksums`), each process checks its
own after a restore, and the processes agree on every verdict (a checkpoint damaged in one
process's files is passed over by all), so they always restore the same step. Directory
changes (removing unfinished saves, setting damaged ones aside) are process 0's, behind a
barrier.
"""

from __future__ import annotations

import errno
import math
import os
import re
import shutil
import time
import warnings
import zlib
from typing import Any, Callable, Iterable, Iterator

import jax
import numpy as np

TMP_SUFFIX = ".orbax-checkpoint-tmp"  # orbax's name for a checkpoint still being written
UNREADABLE_SUFFIX = ".unreadable"
_UNFINISHED = re.compile(r"\d+" + re.escape(TMP_SUFFIX) + ".*")
_DATA_FILE_BYTES = 16 << 20  # orbax data files (and chunks): bounds a save's buffers
_CRC_BLOCK_BYTES = 64 << 20  # host bytes per CRC block where arrays cannot be read in place
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_DISK_FULL_TEXT = ("no space left on device", "disk quota exceeded", "file too large")


def _is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _data(x: Any) -> Any:
    return jax.random.key_data(x) if _is_key(x) else x


def _processes() -> int:
    return jax.process_count()


def _sync(name: str) -> None:
    """A barrier across processes (nothing with one process)."""
    if _processes() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(f"jaxrl_fast.checkpoint.{name}")


def _any_process(flag: bool) -> bool:
    """Whether `flag` holds on any process (a collective: every process calls it)."""
    if _processes() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.int32(bool(flag)))))


def manager(directory: str, keep: int):
    """An orbax `CheckpointManager` over `directory` keeping the last `keep` checkpoints, made
    after removing the unfinished checkpoints a killed save left there (by process 0 in a
    multi-process run, the others waiting)."""
    import orbax.checkpoint as ocp

    where = os.path.abspath(directory)
    if os.path.isdir(where) and jax.process_index() == 0:
        _remove_unfinished(where, lambda name: _UNFINISHED.fullmatch(name) is not None)
    _sync("manager")
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False)
    # L3's host arrays (numpy, or memmaps of a disk L3) are written as they are: orbax's numpy
    # handler would copy each first, and the saves are synchronous (nothing writes them meanwhile)
    from orbax.checkpoint._src.serialization import type_handler_registry, type_handlers

    host = type_handler_registry.create_type_handler_registry(
        (jax.Array, type_handlers.ArrayHandler()),  # unused; orbax warns without one
        (np.ndarray, type_handlers.NumpyHandler(deepcopy_host_arrays=False)),
    )
    handlers = {
        "state": ocp.PyTreeCheckpointHandler(),
        "record": ocp.JsonCheckpointHandler(),
        "l3": ocp.PyTreeCheckpointHandler(type_handler_registry=host),
    }
    return ocp.CheckpointManager(where, options=options, item_handlers=handlers)


def _remove_unfinished(root: str, matches: Callable[[str], bool]) -> None:
    for name in os.listdir(root):
        if matches(name):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def device_count(tree: Any) -> int:
    """The number of devices `tree`'s arrays are spread over (the most of any leaf)."""
    return max((len(x.sharding.device_set) for x in jax.tree.leaves(tree)), default=1)


def save(
    mngr,
    chunks_done: int,
    runner: Any,
    record: dict,
    *,
    num_devices: int | None = None,
    host: dict[str, np.ndarray] | None = None,
):
    """Save `runner` after `chunks_done` chunks, and `record` (JSON-ready), as that step.

    The saved record adds `num_devices` (default: the devices `runner` is spread over) and
    `checksums` (a CRC-32 per leaf). `host`: the replay's host-side arrays
    (`Buffer.host_state()`: the L3 tier), saved as the checkpoint's `l3` item when not empty.

    Raises:
      OSError: the save failed writing (e.g. a full disk): the message names the directory and
        step; the unfinished checkpoint is removed and the earlier ones are kept.
    """
    import orbax.checkpoint as ocp

    state = jax.tree.map(_data, runner)
    record = dict(record, num_devices=num_devices or device_count(runner))
    record["checksums"] = checksums(state)
    if _processes() > 1:
        record["num_processes"] = _processes()
        record["process_checksums"] = process_checksums(state)
    items = dict(
        state=ocp.args.PyTreeSave(state, ocdbt_target_data_file_size=_DATA_FILE_BYTES),
        record=ocp.args.JsonSave(record),
    )
    if host:
        items["l3"] = ocp.args.PyTreeSave(
            {k: np.asarray(v) if np.ndim(v) == 0 else v for k, v in host.items()},
            ocdbt_target_data_file_size=_DATA_FILE_BYTES,
        )
    args = ocp.args.Composite(**items)
    existed = chunks_done in mngr.all_steps()
    try:
        mngr.save(chunks_done, args=args, force=True)
        mngr.wait_until_finished()
    except Exception as err:
        if jax.process_index() == 0:  # the others' leftovers: the next start removes them
            _discard(mngr, chunks_done, keep_final=existed)
        code = _errno(err)
        if code is None:
            raise
        hint = "; the disk may be full (or a quota or file-size limit was hit)"
        kept = ", ".join(map(str, mngr.all_steps())) or "none"
        raise OSError(
            code,
            f"checkpoint of chunk {chunks_done} to {mngr.directory} failed ({_one_line(err)})"
            f"{hint if code in _DISK_FULL else ''}. The unfinished checkpoint was removed; the "
            f"checkpoints kept (steps {kept}) are intact and a resume starts from the newest.",
        ) from err


def _discard(mngr, step: int, *, keep_final: bool, quiet_s: float = 0.5) -> None:
    """Remove what a failed save of `step` left: its temporary directory, and its final one
    unless that was there before the save. A failed write does not stop tensorstore's other
    writes in flight, which may recreate files there: remove until it stays gone `quiet_s`."""
    root = os.fspath(mngr.directory)
    unfinished = re.compile(rf"{step}{re.escape(TMP_SUFFIX)}.*")

    def matches(name: str) -> bool:
        return unfinished.fullmatch(name) is not None or (name == str(step) and not keep_final)

    deadline, gone_since = time.monotonic() + 30.0, None
    while time.monotonic() < deadline:
        if any(map(matches, os.listdir(root))):
            _remove_unfinished(root, matches)
            gone_since = None
        elif gone_since is None:
            gone_since = time.monotonic()
        elif time.monotonic() - gone_since >= quiet_s:
            break
        time.sleep(0.02)
    mngr.reload()


def _errno(err: BaseException | None) -> int | None:
    """The OS error number behind `err`: an `OSError` in its chain, or the code tensorstore
    writes into its messages (`[os_error_code='28']`); None when it is no OS error."""
    while err is not None:
        if isinstance(err, OSError) and err.errno is not None:
            return err.errno
        found = re.search(r"os_error_code='?(\d+)", str(err))
        if found:
            return int(found.group(1))
        if any(text in str(err).lower() for text in _DISK_FULL_TEXT):
            return errno.ENOSPC
        err = err.__cause__ or err.__context__
    return None


def _one_line(err: BaseException, limit: int = 320) -> str:
    """`err` as one line of at most `limit` characters: its start and its end, where
    tensorstore says what failed (its messages carry their whole spec, dropped here)."""
    text = re.sub(r" ?\[tensorstore_spec='.*?'\]", "", " ".join(str(err).split())).strip()
    text = f"{type(err).__name__}: {text}"
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def latest(mngr) -> int | None:
    """The newest complete checkpoint's step (chunks done), or None."""
    return mngr.latest_step()


def restore(
    mngr, step: int, like: Any, host_like: dict[str, np.ndarray] | None = None
) -> tuple[Any, ...]:
    """Restore checkpoint `step` into a runner laid out as `like` (a runner from `init`: its
    shardings and key implementations are used); returns `(runner, record)`, and with
    `host_like` (a fresh buffer's `host_state()`, not empty) `(runner, record, host)` with the
    saved host arrays as numpy.

    The arrays are read to host memory, checked against the record's CRC-32s, then put on
    `like`'s devices one leaf at a time (each host copy is let go once placed).

    Raises:
      ValueError: a leaf does not match the CRC-32 saved with it (a damaged file); orbax's own
        errors for missing or unreadable files.
    """
    import orbax.checkpoint as ocp

    if _processes() > 1:
        return _restore_global(mngr, step, like)

    def read_as(x):
        return ocp.RestoreArgs(restore_type=np.ndarray, dtype=x.dtype)

    data = jax.tree.map(_data, like)
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), data)
    items = dict(
        state=ocp.args.PyTreeRestore(target, restore_args=jax.tree.map(read_as, data)),
        record=ocp.args.JsonRestore(),
    )
    if host_like:
        host_target = {k: np.asarray(v) if np.ndim(v) == 0 else v for k, v in host_like.items()}
        items["l3"] = ocp.args.PyTreeRestore(
            host_target, restore_args=jax.tree.map(read_as, host_target)
        )
    out = mngr.restore(step, args=ocp.args.Composite(**items))
    record = dict(out["record"])
    host_arrays = dict(out["l3"]) if host_like else None
    saved = record.get("checksums")  # None in checkpoints made before there were checksums
    host = []
    for path, value in jax.tree_util.tree_leaves_with_path(out["state"]):
        name = jax.tree_util.keystr(path)
        if saved is not None and saved.get(name) is not None and saved[name] != crc32(value):
            raise ValueError(
                f"checkpoint {step}: leaf {name} does not match the CRC-32 saved with it (a "
                f"damaged array file)."
            )
        host.append(value)
    del out
    leaves, treedef = jax.tree.flatten(like)
    placed = []
    for i, x in enumerate(leaves):
        value, host[i] = host[i], None
        if _is_key(x):
            value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(x))
        placed.append(jax.block_until_ready(jax.device_put(value, x.sharding)))  # then free
    runner = jax.tree.unflatten(treedef, placed)
    return (runner, record) if host_arrays is None else (runner, record, host_arrays)


def _restore_global(mngr, step: int, like: Any) -> tuple[Any, dict]:
    """`restore` in a multi-process run: each process reads only its shards of each leaf,
    straight into `like`'s shardings, and checks them against its CRC-32s in the record (when
    the checkpoint was saved by as many processes)."""
    import orbax.checkpoint as ocp

    data = jax.tree.map(_data, like)
    target = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), data
    )
    restore_args = jax.tree.map(
        lambda x: ocp.ArrayRestoreArgs(sharding=x.sharding, dtype=x.dtype), data
    )
    out = mngr.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.PyTreeRestore(target, restore_args=restore_args),
            record=ocp.args.JsonRestore(),
        ),
    )
    record = dict(out["record"])
    saved = record.get("process_checksums")
    if saved is not None and record.get("num_processes") == _processes():
        me = jax.process_index()
        for path, value in jax.tree_util.tree_leaves_with_path(out["state"]):
            name = jax.tree_util.keystr(path)
            want = saved.get(name)
            if want is not None and want[me] != local_crc32(value):
                raise ValueError(
                    f"checkpoint {step}: process {me}'s shards of leaf {name} do not match the "
                    f"CRC-32 saved with them (a damaged array file)."
                )
    leaves, treedef = jax.tree.flatten(like)
    placed = []
    for x, value in zip(leaves, jax.tree.leaves(out["state"]), strict=True):
        if _is_key(x):
            impl = jax.random.key_impl(x)
            wrap = jax.jit(
                lambda d, impl=impl: jax.random.wrap_key_data(d, impl=impl),
                out_shardings=x.sharding,
            )
            value = wrap(value)
        placed.append(value)
    return jax.tree.unflatten(treedef, placed), record


def process_checksums(tree: Any) -> dict[str, list[int]]:
    """Per leaf, the CRC-32 of each process's shards (`local_crc32`), by leaf path, gathered
    from every process (a collective: every process calls it)."""
    from jax.experimental import multihost_utils

    named = jax.tree_util.tree_leaves_with_path(tree)
    local = np.array([local_crc32(x) for _, x in named], dtype=np.uint32)
    every = np.asarray(multihost_utils.process_allgather(local))  # [processes, leaves]
    every = every.reshape(_processes(), len(named))
    return {
        jax.tree_util.keystr(path): [int(c) for c in every[:, i]]
        for i, (path, _) in enumerate(named)
    }


def local_crc32(x: jax.Array) -> int:
    """CRC-32 of this process's shards of `x`, each distinct shard once (replicas: the first),
    in the order of their positions in `x`, each shard's bytes in C order."""
    shards = {}
    for shard in x.addressable_shards:
        start = tuple(sl.indices(n)[0] for sl, n in zip(shard.index, x.shape, strict=True))
        shards.setdefault(start, shard)
    return _crc(np.asarray(shards[start].data) for start in sorted(shards))


def checksums(tree: Any) -> dict[str, int | None]:
    """A CRC-32 of each leaf's bytes in C order, by leaf path; the same for any layout of the
    leaf over devices. None for a leaf this process cannot read whole (multi-process)."""
    return {
        jax.tree_util.keystr(path): crc32(x)
        for path, x in jax.tree_util.tree_leaves_with_path(tree)
    }


def crc32(x: jax.Array | np.ndarray) -> int | None:
    """CRC-32 of `x`'s bytes in C order. Read in place (no copy) for a numpy array, and where
    every shard is on a CPU device and the shards split only the leading axis; else in host
    blocks of at most 64 MiB. None where `x` is not fully addressable (multi-process)."""
    if isinstance(x, np.ndarray):
        return _crc([np.ascontiguousarray(x)])
    if not x.is_fully_addressable:
        return None
    return _crc(_shard_views(x) if _readable_in_place(x) else _host_blocks(x))


def _crc(blocks: Iterable[np.ndarray]) -> int:
    crc = 0
    for block in blocks:
        crc = zlib.crc32(block.reshape(-1).view(np.uint8), crc)
    return crc


def _readable_in_place(x: jax.Array) -> bool:
    return all(d.platform == "cpu" for d in x.sharding.device_set) and all(
        all(s == slice(None) for s in shard.index[1:]) for shard in x.addressable_shards
    )


def _shard_views(x: jax.Array) -> Iterator[np.ndarray]:
    """Zero-copy views of `x`'s shards (CPU), in order along the leading axis, one per rows."""
    if x.ndim == 0:
        yield np.asarray(x.addressable_shards[0].data)
        return
    seen = {}
    for shard in x.addressable_shards:
        seen.setdefault(shard.index[0].indices(x.shape[0])[0], shard)  # replicas: the first
    for start in sorted(seen):
        yield np.asarray(seen[start].data)


def _host_blocks(x: jax.Array) -> Iterator[np.ndarray]:
    """`x`'s values in C order as host arrays of at most `_CRC_BLOCK_BYTES` (one slice on
    device each, so neither device nor host holds a second copy of `x`)."""
    if x.nbytes <= _CRC_BLOCK_BYTES:
        yield np.asarray(x.copy())  # np.asarray(x) itself would keep a host copy on `x`
        return
    for index in _block_index(x.shape, x.dtype.itemsize):
        yield np.asarray(x[index])


def _block_index(shape: tuple[int, ...], itemsize: int) -> Iterator[tuple]:
    """Indices (ints, then one slice) covering `shape` in C order, each at most
    `_CRC_BLOCK_BYTES` (or one element of the last axis)."""
    if len(shape) == 1:
        inner = itemsize
    else:
        inner = math.prod(shape[1:]) * itemsize
    if inner > _CRC_BLOCK_BYTES:
        for i in range(shape[0]):
            for rest in _block_index(shape[1:], itemsize):
                yield (i, *rest)
        return
    step = max(1, _CRC_BLOCK_BYTES // inner)
    for i in range(0, shape[0], step):
        yield (slice(i, min(i + step, shape[0])),)


class Checkpointer:
    """One run's checkpoints: where, how often (in chunks and in wall time), how many, and
    whether to resume.

    Args:
      directory: the checkpoints' directory (made on the first save or resume).
      config: the run's `TrainConfig`.
      every_env_steps: env steps per seed between checkpoints, rounded to whole chunks (None:
        about every 10% of the run). The last chunk is always saved.
      keep: checkpoints kept (the newest).
      resume: whether `restore_latest` restores.
      every_seconds: also save after a chunk that ends this many seconds (`clock`) after the
        last save, or after the start when there was none; None: only `every_env_steps`.
        Checkpoints come at chunk ends, so a chunk longer than this is not split.
      num_devices: the devices the seeds are spread over, recorded in each checkpoint and
        compared on resume (None: read from the runner's shardings).
      clock: seconds, monotonic (tests pass a fake one).

    Raises (at construction, before anything compiles):
      ValueError: `keep < 1`, `every_env_steps < 1`, `every_seconds <= 0` or `num_devices < 1`.
        envpool runs are saved whole, but their emulators cannot be: a resumed one starts new
        games (`train`, `Buffer.restart_envs`). With L3 on, its host arrays are saved too (the
        shell sets `host_state` / `load_host_state` from the replay `Buffer`).
    """

    def __init__(
        self,
        directory: str,
        config: Any,
        *,
        every_env_steps: int | None,
        keep: int,
        resume: bool,
        every_seconds: float | None = 600.0,
        num_devices: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: must be >= 1 (checkpoints kept).")
        if every_env_steps is not None and every_env_steps < 1:
            raise ValueError(f"checkpoint_every={every_env_steps}: must be >= 1 env steps.")
        if every_seconds is not None and not every_seconds > 0:
            raise ValueError(
                f"every_seconds={every_seconds!r}: must be > 0 seconds of wall time between "
                f"checkpoints (or None: save by env steps only)."
            )
        if num_devices is not None and num_devices < 1:
            raise ValueError(f"num_devices={num_devices}: must be >= 1 (or None: from the runner).")
        steps_per_chunk = config.blocks_per_chunk * config.train_frequency
        every = every_env_steps or max(1, config.total_env_steps // 10)
        self.every_chunks = max(1, round(every / steps_per_chunk))
        self.every_seconds, self.num_devices = every_seconds, num_devices
        self.chunks, self.resume = config.chunks, resume
        self._where, self._keep, self._manager = directory, keep, None
        self._clock = clock
        self._last_save = clock()
        # the replay's host side (L3), set by the shell once the buffer exists: `() -> dict` of
        # arrays to save, and `(arrays, runner) -> None` to load them into a fresh buffer
        self.host_state: Callable[[], dict] | None = None
        self.load_host_state: Callable[[dict, Any], None] | None = None

    @property
    def manager(self):
        """The orbax manager, made on first use (so that a refused run creates nothing)."""
        if self._manager is None:
            self._manager = manager(self._where, self._keep)
        return self._manager

    def restore_latest(self, like: Any) -> tuple[Any, dict, int] | None:
        """`(runner, record, chunks_done)` from the newest usable checkpoint when resuming, else
        None (also when there is no checkpoint yet).

        A checkpoint that cannot be restored gives a warning naming it and the error, and the
        one before is tried; the unusable ones newer than the one restored are renamed to
        `<step>.unreadable`. A checkpoint saved over another number of devices gives a warning:
        the resumed run equals the uninterrupted one to float rounding, not bitwise.

        Raises:
          ValueError: there are checkpoints and none can be restored.
        """
        if not self.resume:
            return None
        steps = sorted(self.manager.all_steps(), reverse=True)
        unusable = []
        for step in steps:
            error = None
            try:
                host_like = self.host_state() if self.host_state is not None else None
                runner, record, *host = restore(self.manager, step, like, host_like)
                if host:
                    self.load_host_state(host[0], runner)
            except MemoryError:  # not damage: the checkpoint may be fine
                raise
            except Exception as err:  # any damage: warn, then try the checkpoint before
                error = _one_line(err)
            # every process takes the same verdict: damage in one process's files is damage
            if _any_process(error is not None):
                why = error or "damaged in another process's files"
                warnings.warn(
                    f"checkpoint {step} in {self._where} cannot be restored ({why}); "
                    f"trying the one before.",
                    stacklevel=2,
                )
                unusable.append(step)
                continue
            self._set_aside(unusable)
            self._check_devices(step, record, like)
            self._last_save = self._clock()
            return runner, record, step
        if steps:
            raise ValueError(
                f"resume: none of the checkpoints in {self._where} (steps "
                f"{', '.join(map(str, steps))}) can be restored (the warnings above say why). "
                f"Nothing was changed; to start the run over, use a new run_dir."
            )
        return None

    def _set_aside(self, steps: list[int]) -> None:
        root = os.fspath(self.manager.directory)
        for step in steps if jax.process_index() == 0 else ():
            target, n = os.path.join(root, f"{step}{UNREADABLE_SUFFIX}"), 1
            while os.path.exists(target):
                target, n = os.path.join(root, f"{step}{UNREADABLE_SUFFIX}.{n}"), n + 1
            os.rename(os.path.join(root, str(step)), target)
        if steps:
            _sync("set_aside")
            self.manager.reload()

    def _check_devices(self, step: int, record: dict, like: Any) -> None:
        saved, now = record.get("num_devices"), self.num_devices or device_count(like)
        if saved is not None and saved != now:
            warnings.warn(
                f"checkpoint {step} was saved from a run spread over {saved} device(s) and this "
                f"run uses {now}: the resumed run will equal an uninterrupted one to float "
                f"rounding, not bitwise (bitwise needs the same device layout).",
                stacklevel=3,
            )

    def after_chunk(self, chunks_done: int, runner: Any, record: Callable[[], dict]) -> bool:
        """Save when `chunks_done` is due (every `every_chunks`, the last, or `every_seconds`
        after the last save); `record()` gives the JSON record, called only when saving.
        Returns whether it saved."""
        due = chunks_done % self.every_chunks == 0 or chunks_done == self.chunks
        if not due and self.every_seconds is not None:
            due = self._clock() - self._last_save >= self.every_seconds
            if _processes() > 1:  # process 0's clock decides for all (each must save)
                from jax.experimental import multihost_utils

                due = bool(multihost_utils.broadcast_one_to_all(np.bool_(due)))
        if not due:
            return False
        host = self.host_state() if self.host_state is not None else None
        save(self.manager, chunks_done, runner, record(), num_devices=self.num_devices, host=host)
        self._last_save = self._clock()
        return True
