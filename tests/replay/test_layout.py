"""Stored-row fields and bytes (`jaxrl_fast.replay.layout`) by hand, and against the arrays the
ring, the staging window, the host store and an L3 read really hold."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.replay import layout, make_ring, row_bytes, staging
from jaxrl_fast.replay.spill import HostStore, L3Rows
from jaxrl_fast.types import Batch, Transition


def _nbytes(tree) -> int:
    return sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def test_row_bytes_counts_obs_once_plus_fields():
    assert row_bytes((84, 84, 4), jnp.uint8) == 84 * 84 * 4 + 14
    assert row_bytes((4,), jnp.float32) == 16 + 14
    assert row_bytes((84, 84, 4), jnp.uint8, 4) == 84 * 84 + 1 + 14  # a frame and its flag


def test_other_row_bytes_by_hand():
    assert layout.read_row_bytes((4,), np.float32) == 2 * 16 + 16
    assert layout.prefetch_row_bytes((84, 84, 4), np.uint8) == 2 * 28_224 + 20
    assert layout.step_bytes((4,), np.float32) == 16 + 11
    assert layout.naive_row_bytes((4,), np.float32) == 2 * 16 + 9
    assert layout.staging_bytes((4,), np.float32, n_step=3, num_envs=10) == 30 * 27


@pytest.mark.parametrize("frame_stack", [0, 4], ids=["whole-obs", "dedup"])
def test_ring_and_host_store_hold_exactly_the_stored_fields(frame_stack):
    obs_shape, slots, envs = (2, 3, 4), 10, 2
    fields = layout.stored_fields(obs_shape, np.uint8, frame_stack)
    ring = jax.eval_shape(make_ring(slots * envs, envs, obs_shape, jnp.uint8, 2, frame_stack).init)
    for name, (shape, dtype) in fields.items():
        leaf = getattr(ring, name)
        assert (leaf.shape, leaf.dtype) == ((slots, envs, *shape), dtype), name
    stored = _nbytes([getattr(ring, name) for name in fields])
    assert stored == slots * envs * row_bytes(obs_shape, np.uint8, frame_stack)
    store = HostStore(
        "host", num_seeds=3, slots=slots, num_envs=envs, obs_shape=obs_shape,
        obs_dtype=np.uint8, frame_stack=frame_stack,
    )  # fmt: skip
    assert store.fields == tuple(fields)
    assert store.nbytes == 3 * slots * envs * row_bytes(obs_shape, np.uint8, frame_stack)
    store.close()


def test_read_rows_are_batch_rows_without_the_index():
    fields = layout.read_fields((3,), np.uint8)
    assert tuple(fields) == L3Rows._fields == Batch._fields[:-2]
    assert Batch._fields[-2:] == ("index", "demo")  # demo: None unless demonstrations mix in
    store = HostStore("host", num_seeds=2, slots=4, num_envs=1, obs_shape=(3,), obs_dtype=np.uint8)
    rows = store.read_uniform(0, 0, 0, shape=(5, 6))  # nothing stored: all weight 0
    for (shape, dtype), got in zip(fields.values(), rows, strict=True):
        assert got.shape == (2, 5, 6, *shape) and got.dtype == dtype
    assert _nbytes(rows) == 2 * 5 * 6 * layout.read_row_bytes((3,), np.uint8)
    store.close()


def test_staging_window_is_step_bytes():
    obs_shape, n, envs = (4,), 3, 10
    example = Transition(
        jax.ShapeDtypeStruct((envs, *obs_shape), jnp.float32),
        jax.ShapeDtypeStruct((envs,), jnp.int32),
        jax.ShapeDtypeStruct((envs,), jnp.float32),
        *[jax.ShapeDtypeStruct((envs,), jnp.bool_)] * 3,
    )
    window = jax.eval_shape(lambda: staging.init(n, example))
    assert _nbytes(window) == layout.staging_bytes(obs_shape, np.float32, n_step=n, num_envs=envs)


def test_priority_bytes_by_sampler():
    assert layout.priority_bytes(1, "sum_tree") == 2 * 2 * 4  # at least 2 leaves
    assert layout.priority_bytes(32_768, "sum_tree") == 2 * 32_768 * 4
    assert layout.priority_bytes(32_769, "sum_tree") == 2 * 65_536 * 4
    assert layout.priority_bytes(1000, "cumsum") == 4000
    with pytest.raises(ValueError, match="sampler='auto'"):
        layout.priority_bytes(10, "auto")
