"""Stored-row fields and their bytes: the single source for the ring (L2), the host store (L3),
the L3 spill and read callbacks, and sizing (`jaxrl-fast plan`).

A stored row (`replay/ring.py`) holds the fields of `stored_fields`, each laid out `[T, E, ...]`
on the device (slots, envs) and `[S, T3, E, ...]` on the host (seeds, L3 slots, envs); L3
spills exactly these fields. An L3 read hands back rows with the fields of `read_fields`
(whole `obs` and `next_obs` stacks); on the device they wait as `Batch` rows (`read_fields` plus
an int32 index). L1 staging holds raw `Transition`s (`step_bytes`). Every byte count of the
replay package is computed here from these field lists.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jaxrl_fast.replay import sum_tree

Shape = tuple[int, ...]
Fields = dict[str, tuple[Shape, np.dtype]]

# A raw env step in L1 (`Transition`): int32 action, float32 reward, bools terminated,
# truncated and reset, besides the observation.
_STEP_FIELDS = ((np.int32, 1), (np.float32, 1), (np.bool_, 3))
# The conventional layout (`baseline/replay.py`): obs, next_obs, int32 action, float32 reward,
# bool done.
_NAIVE_FIELDS = ((np.int32, 1), (np.float32, 1), (np.bool_, 1))
_INDEX = np.dtype(np.int32)  # a `Batch` row's index


def dedup_stack(dedup_frames: bool, frame_stack: int) -> int:
    """The frame stack rows deduplicate: `frame_stack` when `dedup_frames` and `k > 1`, else 0.

    Examples:
      >>> dedup_stack(True, 4), dedup_stack(False, 4), dedup_stack(True, 1)
      (4, 0, 0)
    """
    return frame_stack if dedup_frames and frame_stack > 1 else 0


def obs_bytes(obs_shape: Shape, obs_dtype: Any) -> int:
    """Bytes of one whole observation."""
    return math.prod(obs_shape) * np.dtype(obs_dtype).itemsize


def stored_fields(obs_shape: Shape, obs_dtype: Any, frame_stack: int = 0) -> Fields:
    """The fields of one stored row (L2 and L3), in spill order: name -> (shape, dtype).

    With `frame_stack` k > 1 (frame deduplication, `replay/ring.py`) `obs` is the row's newest
    frame (`obs_shape[:-1]`) and a `fresh` flag follows the other fields.

    Examples:
      >>> list(stored_fields((84, 84, 4), "uint8", 4))
      ['obs', 'action', 'reward', 'discount', 'offset', 'valid', 'fresh']
    """
    obs_shape = tuple(obs_shape)
    fields = {
        "obs": (obs_shape[:-1] if frame_stack else obs_shape, np.dtype(obs_dtype)),
        "action": ((), np.dtype(np.int32)),
        "reward": ((), np.dtype(np.float32)),  # n-step return
        "discount": ((), np.dtype(np.float32)),
        "offset": ((), np.dtype(np.int8)),  # bootstrap row offset k in [1, n_step]
        "valid": ((), np.dtype(np.bool_)),
    }
    if frame_stack:
        fields["fresh"] = ((), np.dtype(np.bool_))
    return fields


def read_fields(obs_shape: Shape, obs_dtype: Any) -> Fields:
    """The fields of one row an L3 read returns (`spill.L3Rows`), in order; `weight` is 1.0
    for a valid transition."""
    obs = (tuple(obs_shape), np.dtype(obs_dtype))
    f32 = ((), np.dtype(np.float32))
    return {
        "obs": obs,
        "action": ((), np.dtype(np.int32)),
        "reward": f32,
        "discount": f32,
        "next_obs": obs,
        "weight": f32,
    }


def _bytes(fields: Fields) -> int:
    return sum(math.prod(shape) * dtype.itemsize for shape, dtype in fields.values())


def row_bytes(obs_shape: Shape, obs_dtype: Any, frame_stack: int = 0) -> int:
    """Bytes of one stored row (L2 on the device, L3 on the host): the observation once (with
    `frame_stack`, its newest frame and a flag) plus action, reward, discount, offset and flag.

    Examples:
      >>> row_bytes((4,), "float32"), row_bytes((84, 84, 4), "uint8", 4)
      (30, 7071)
    """
    return _bytes(stored_fields(obs_shape, obs_dtype, frame_stack))


def read_row_bytes(obs_shape: Shape, obs_dtype: Any) -> int:
    """Bytes of one row an L3 read moves from the host: whole obs and next_obs stacks, action,
    reward, discount and weight."""
    return _bytes(read_fields(obs_shape, obs_dtype))


def prefetch_row_bytes(obs_shape: Shape, obs_dtype: Any) -> int:
    """Device bytes of one prefetched L3 row, a `Batch` row: a read row plus its int32 index."""
    return read_row_bytes(obs_shape, obs_dtype) + _INDEX.itemsize


def step_bytes(obs_shape: Shape, obs_dtype: Any) -> int:
    """Bytes of one raw env step in L1 staging (a `Transition` of one env)."""
    extra = sum(np.dtype(dt).itemsize * count for dt, count in _STEP_FIELDS)
    return obs_bytes(obs_shape, obs_dtype) + extra


def staging_bytes(obs_shape: Shape, obs_dtype: Any, *, n_step: int, num_envs: int) -> int:
    """Device bytes of one seed's L1 staging window: `n_step x num_envs` raw steps.

    Examples:
      >>> staging_bytes((4,), "float32", n_step=3, num_envs=10)  # 30 x (16 + 11)
      810
    """
    return n_step * num_envs * step_bytes(obs_shape, obs_dtype)


def naive_row_bytes(obs_shape: Shape, obs_dtype: Any) -> int:
    """Bytes per transition in the conventional layout that stores `obs` and `next_obs`."""
    extra = sum(np.dtype(dt).itemsize * count for dt, count in _NAIVE_FIELDS)
    return 2 * obs_bytes(obs_shape, obs_dtype) + extra


def priority_bytes(rows: int, sampler: str) -> int:
    """Device bytes of the PER priorities over `rows` L2 rows.

    Args:
      rows: L2 rows of one seed.
      sampler: "cumsum" (one float32 per row) or "sum_tree" (`2 x num_leaves(rows)` float32).

    Examples:
      >>> priority_bytes(1000, "cumsum"), priority_bytes(1000, "sum_tree")
      (4000, 8192)
    """
    if sampler == "sum_tree":
        return 2 * sum_tree.num_leaves(rows) * 4
    if sampler == "cumsum":
        return 4 * rows
    raise ValueError(f"sampler={sampler!r} is not allowed; expected 'cumsum' or 'sum_tree'.")
