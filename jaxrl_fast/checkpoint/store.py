"""Saving and restoring one checkpoint with orbax: `manager`, `save`, `restore`, `latest`,
and what a failed save leaves behind (see the package docstring for the guarantees)."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import time
from typing import Any, Callable

import jax
import numpy as np

from jaxrl_fast.checkpoint.crc import checksums, crc32, local_crc32, process_checksums
from jaxrl_fast.parallel.distributed import barrier
from jaxrl_fast.replay.base import HOST_STATE_ITEM

TMP_SUFFIX = ".orbax-checkpoint-tmp"  # orbax's name for a checkpoint still being written
_UNFINISHED = re.compile(r"\d+" + re.escape(TMP_SUFFIX) + ".*")
_DATA_FILE_BYTES = 16 << 20  # orbax data files (and chunks): bounds a save's buffers
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_DISK_FULL_TEXT = ("no space left on device", "disk quota exceeded", "file too large")


def _is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _data(x: Any) -> Any:
    return jax.random.key_data(x) if _is_key(x) else x


def manager(directory: str, keep: int):
    """An orbax `CheckpointManager` over `directory` keeping the last `keep` checkpoints, made
    after removing the unfinished checkpoints a killed save left there (by process 0 in a
    multi-process run, the others waiting)."""
    import orbax.checkpoint as ocp

    where = os.path.abspath(directory)
    if os.path.isdir(where) and jax.process_index() == 0:
        _remove_unfinished(where, lambda name: _UNFINISHED.fullmatch(name) is not None)
    barrier("jaxrl_fast.checkpoint.manager")
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False)
    # the replay's host arrays (numpy, or memory-mapped files) are written as they are: orbax's
    # numpy handler would copy each first, and the saves are synchronous (nothing writes them
    # meanwhile)
    from orbax.checkpoint._src.serialization import type_handler_registry, type_handlers

    host = type_handler_registry.create_type_handler_registry(
        (jax.Array, type_handlers.ArrayHandler()),  # unused; orbax warns without one
        (np.ndarray, type_handlers.NumpyHandler(deepcopy_host_arrays=False)),
    )
    handlers = {
        "state": ocp.PyTreeCheckpointHandler(),
        "record": ocp.JsonCheckpointHandler(),
        HOST_STATE_ITEM: ocp.PyTreeCheckpointHandler(type_handler_registry=host),
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
    (`Buffer.host_state()`), saved as the checkpoint's `replay.HOST_STATE_ITEM` item when not
    empty.

    Raises:
      OSError: the save failed writing (e.g. a full disk): the message names the directory and
        step; the unfinished checkpoint is removed and the earlier ones are kept.
    """
    import orbax.checkpoint as ocp

    state = jax.tree.map(_data, runner)
    record = dict(record, num_devices=num_devices or device_count(runner))
    record["checksums"] = checksums(state)
    if jax.process_count() > 1:
        record["num_processes"] = jax.process_count()
        record["process_checksums"] = process_checksums(state)
    items = dict(
        state=ocp.args.PyTreeSave(state, ocdbt_target_data_file_size=_DATA_FILE_BYTES),
        record=ocp.args.JsonSave(record),
    )
    if host:
        items[HOST_STATE_ITEM] = ocp.args.PyTreeSave(
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
            f"checkpoint of chunk {chunks_done} to {mngr.directory} failed ({one_line(err)})"
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


def one_line(err: BaseException, limit: int = 320) -> str:
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

    if jax.process_count() > 1:
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
        items[HOST_STATE_ITEM] = ocp.args.PyTreeRestore(
            host_target, restore_args=jax.tree.map(read_as, host_target)
        )
    out = mngr.restore(step, args=ocp.args.Composite(**items))
    record = dict(out["record"])
    host_arrays = dict(out[HOST_STATE_ITEM]) if host_like else None
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
    if saved is not None and record.get("num_processes") == jax.process_count():
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


def read_state(directory: str, like: Any, step: int | None = None) -> tuple[Any, dict, int]:
    """A checkpoint's state as host (numpy) arrays, outside a run: for reading a run's weights
    on any device count (`jaxrl-fast export`). Nothing in `directory` is changed.

    Args:
      directory: a run's `checkpoints/` directory.
      like: the state's structure, abstract (`jax.eval_shape` of `init`); PRNG keys are read as
        their key data.
      step: the checkpoint to read (default: the newest).

    Returns:
      `(state, record, step)`: `state` in `like`'s structure with numpy leaves, checked against
      the record's CRC-32s.

    Raises:
      ValueError: no checkpoint (or not `step`) in `directory`, or a leaf that does not match
        its CRC-32; orbax's own errors for unreadable files.
    """
    import orbax.checkpoint as ocp

    where = os.path.abspath(directory)
    steps = sorted(
        int(name) for name in (os.listdir(where) if os.path.isdir(where) else ()) if name.isdigit()
    )
    if not steps or (step is not None and step not in steps):
        have = ", ".join(map(str, steps)) or "none"
        which = "no checkpoints" if step is None else f"no checkpoint {step} (has: {have})"
        raise ValueError(f"{where}: {which}.")
    step = steps[-1] if step is None else step
    data = jax.tree.map(lambda x: jax.eval_shape(jax.random.key_data, x) if _is_key(x) else x, like)
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), data)
    restore_args = jax.tree.map(
        lambda x: ocp.RestoreArgs(restore_type=np.ndarray, dtype=x.dtype), data
    )
    handlers = {"state": ocp.PyTreeCheckpointHandler(), "record": ocp.JsonCheckpointHandler()}
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)  # orbax warns that a read-only manager is read-only
    try:
        with ocp.CheckpointManager(
            where,
            options=ocp.CheckpointManagerOptions(read_only=True, enable_async_checkpointing=False),
            item_handlers=handlers,
        ) as mngr:
            out = mngr.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.PyTreeRestore(target, restore_args=restore_args),
                    record=ocp.args.JsonRestore(),
                ),
            )
    finally:
        absl.setLevel(level)
    record = dict(out["record"])
    saved = record.get("checksums") or {}
    values = []
    for path, value in jax.tree_util.tree_leaves_with_path(out["state"]):
        name = jax.tree_util.keystr(path)
        if saved.get(name) is not None and saved[name] != crc32(value):
            raise ValueError(
                f"checkpoint {step}: leaf {name} does not match the CRC-32 saved with it (a "
                f"damaged array file)."
            )
        values.append(value)
    return jax.tree.unflatten(jax.tree.structure(data), values), record, step
