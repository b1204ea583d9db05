"""CRC-32s of a checkpoint's arrays: per leaf (`checksums`, `crc32`), and per process's shards
in a multi-process run (`process_checksums`, `local_crc32`). A leaf's CRC-32 is over its bytes
in C order, so it is the same for any layout of the leaf over devices."""

from __future__ import annotations

import math
import zlib
from typing import Any, Iterable, Iterator

import jax
import numpy as np

_CRC_BLOCK_BYTES = 64 << 20  # host bytes per CRC block where arrays cannot be read in place


def process_checksums(tree: Any) -> dict[str, list[int]]:
    """Per leaf, the CRC-32 of each process's shards (`local_crc32`), by leaf path, gathered
    from every process (a collective: every process calls it)."""
    from jax.experimental import multihost_utils

    named = jax.tree_util.tree_leaves_with_path(tree)
    local = np.array([local_crc32(x) for _, x in named], dtype=np.uint32)
    every = np.asarray(multihost_utils.process_allgather(local))  # [processes, leaves]
    every = every.reshape(jax.process_count(), len(named))
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
