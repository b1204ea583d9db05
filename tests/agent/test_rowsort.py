"""`agent.rowsort`: the sorting network and the blocked count against numpy's sort and
searchsorted, with ties, infinities and lengths around the padding."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxrl_fast.agent import rowsort


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 200, 256, 257])
def test_sort_rows_equals_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(3, 2, n)).astype(np.float32)
    x[0, 0] = np.round(x[0, 0])  # ties
    x[1, 1, : n // 2] = -np.inf
    got = np.asarray(jax.jit(rowsort.sort_rows)(x))
    np.testing.assert_array_equal(got, np.sort(x, axis=-1))


@pytest.mark.parametrize("m", [1, 5, 8, 9, 200])
def test_count_below_equals_searchsorted(m):
    rng = np.random.default_rng(m)
    s = np.round(rng.normal(size=(4, m)) * 4) / 4
    s[0, 0] = 0.0  # an exact zero (CPUs flush denormals: no nextafter tricks)
    s = np.sort(s, axis=-1).astype(np.float32)
    # queries: every value itself (ties), between values, beyond both ends, the infinities
    q = np.concatenate(
        [s, s + 0.1, s - 0.1, np.full((4, 2), [-np.inf, np.inf]), s[:, :1] - 9, s[:, -1:] + 9],
        axis=-1,
    ).astype(np.float32)
    got = np.asarray(jax.jit(rowsort.count_below)(s, q))
    want = np.stack([np.searchsorted(s[r], q[r], side="left") for r in range(4)])
    np.testing.assert_array_equal(got, want)
    right = np.asarray(jax.jit(rowsort.count_below)(s, q, True))
    want_right = np.stack([np.searchsorted(s[r], q[r], side="right") for r in range(4)])
    np.testing.assert_array_equal(right, want_right)
    mixed = np.arange(q.shape[1]) % 2 == 1  # a side per query
    got = np.asarray(jax.jit(rowsort.count_below)(s, q, mixed))
    np.testing.assert_array_equal(got, np.where(mixed, want_right, want))
