"""The host side of L3 (`jaxrl_fast.replay.spill.HostStore`): prefetched reads equal synchronous
ones, seeded uniform reads, the stored fields (`layout.stored_fields`) and frame-stack errors.
Spill directories are `test_spill_dirs.py`."""

from __future__ import annotations

import numpy as np
import pytest

from jaxrl_fast.replay.layout import stored_fields
from jaxrl_fast.replay.spill import HostStore


def test_prefetch_returns_what_a_synchronous_read_returns():
    kw = dict(num_seeds=2, slots=8, num_envs=2, obs_shape=(3,), obs_dtype=np.uint8)
    sync, pre = HostStore("host", prefetch=False, **kw), HostStore("host", prefetch=True, **kw)
    rng = np.random.default_rng(0)
    requests, got_sync, got_pre = [], [], []
    for b in range(6):  # write 4-slot blocks, read after each: reads see the FIFO move
        block = dict(
            obs=rng.integers(0, 255, (2, 4, 2, 3), np.uint8),
            action=rng.integers(0, 4, (2, 4, 2), np.int32),
            reward=rng.normal(size=(2, 4, 2)).astype(np.float32),
            discount=np.full((2, 4, 2), 0.9, np.float32),
            offset=np.ones((2, 4, 2), np.int8),
            valid=rng.random((2, 4, 2)) > 0.2,
        )
        for store in (sync, pre):
            store.write(4 * b, **block)
        lo = max(0, 4 * b + 4 - 8)
        req = (
            rng.integers(lo, 4 * b + 3, (2, 5, 3)),
            rng.integers(0, 2, (2, 5, 3)),
            np.ones((2, 5, 3), bool),
        )
        requests.append(req)
        got_sync.append(sync.read(*req))
        got_pre.append(pre.read(*req))
    assert got_pre[0].weight.sum() == 0  # nothing was requested before the first call
    for a, b in zip(got_sync[:-1], got_pre[1:], strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    sync.close(), pre.close()


def test_read_uniform_is_seeded_and_in_range():
    kw = dict(num_seeds=2, slots=8, num_envs=2, obs_shape=(1,), obs_dtype=np.float32)
    a, b, c = (HostStore("host", prefetch=False, seed=s, **kw) for s in (3, 3, 4))
    for store in (a, b, c):
        obs = np.arange(2 * 8 * 2, dtype=np.float32).reshape(2, 8, 2, 1)
        ones = np.ones((2, 8, 2))
        store.write(0, obs, ones.astype(np.int32), ones, ones, ones.astype(np.int8), ones > 0)
    ra, rb, rc = (s.read_uniform(5, 2, 8, shape=(3, 4)) for s in (a, b, c))
    np.testing.assert_array_equal(ra.obs, rb.obs)  # same seed and read count: same rows
    assert not np.array_equal(ra.obs, rc.obs)
    slot = (ra.obs[..., 0] % 16) // 2  # obs value = seed * 16 + slot * 2 + env
    assert ((slot >= 2) & (slot < 6)).all() and ra.weight.all()  # 8 rows = slots 2..5
    assert not a.read_uniform(6, 0, 0, shape=(3, 4)).weight.any()  # nothing to read yet
    for s in (a, b, c):
        s.close()


def test_host_store_frame_stack_errors():
    kw = dict(num_seeds=1, slots=4, num_envs=1, obs_dtype=np.uint8)
    with pytest.raises(ValueError, match="last axis stacks 4 frames"):
        HostStore("host", obs_shape=(2, 3, 3), frame_stack=4, **kw)
    store = HostStore("host", obs_shape=(2, 3, 4), frame_stack=4, **kw)
    assert store.arrays["obs"].shape == (1, 4, 1, 2, 3)
    ones = np.ones((1, 2, 1))
    block = (np.zeros((1, 2, 1, 2, 3), np.uint8), ones.astype(np.int32), ones, ones)
    with pytest.raises(ValueError, match="`fresh` flags are required"):
        store.write(0, *block, ones.astype(np.int8), ones > 0)
    store.write(0, *block, ones.astype(np.int8), ones > 0, fresh=ones > 0)
    assert store.slots_written == 2
    store.close()


def test_store_holds_the_layout_fields_positionally_or_by_name():
    kw = dict(num_seeds=1, slots=4, num_envs=1, obs_shape=(2, 3, 4), obs_dtype=np.uint8)
    store = HostStore("host", frame_stack=4, **kw)
    fields = stored_fields((2, 3, 4), np.uint8, 4)
    assert store.fields == tuple(fields)
    for name, (shape, dtype) in fields.items():
        assert store.arrays[name].shape == (1, 4, 1, *shape) and store.arrays[name].dtype == dtype
    assert store.nbytes == 4 * (6 + 1 + 14)  # layout.row_bytes per row
    block = {
        name: np.full((1, 2, 1, *shape), i + 1, dtype) for i, (name, (shape, dtype)) in
        enumerate(fields.items())
    }  # fmt: skip
    store.write(0, *block.values())
    store.write(2, **block)
    for name, value in block.items():
        np.testing.assert_array_equal(
            store.slot_rows(0, 0, 4)[name], np.concatenate([value[0]] * 2)
        )
    with pytest.raises(ValueError, match="expected fields"):
        store.write(0, **{k: v for k, v in block.items() if k != "obs"}, frames=block["obs"])
    store.close()
