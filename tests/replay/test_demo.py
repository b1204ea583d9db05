"""Demonstration rows (`replay/demo.py`): built through L1 staging, so they equal the staging
reference's n-step rows, and mixed into the tail of a batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_staging import _code, _reference, _sequence

from jaxrl_fast.replay.demo import demo_rows, mix
from jaxrl_fast.types import Batch


@pytest.mark.parametrize("n", [1, 3])
def test_demo_rows_equal_the_staging_reference(n):
    seq = _sequence()
    ref = _reference(seq, n, 0.5)
    rows = demo_rows(seq, gamma=0.5, n_step=n)
    steps = seq.reward.shape[0]
    # staging commits step t at slot t + n - 1: a row is kept once its bootstrap observation
    # (step t + k, at slot t + k + n - 1) is in the ring
    want = {
        (t, e): v for (t, e), v in ref.items() if v is not None and t + v[2] + n - 1 <= steps - 1
    }
    assert len(rows.action) == len(want)
    got = {}
    for i in range(len(rows.action)):
        t, e = _code_of(rows.obs[i, 0])
        got[(t, e)] = (rows.reward[i], rows.discount[i])
        k = [1 + j for j in range(n) if _code_of(rows.next_obs[i, 0]) == (t + 1 + j, e)]
        assert k, (t, e)  # the bootstrap observation is a later step of the same env
        np.testing.assert_array_equal(rows.action[i], (t + e) % 3)
    for key, (ret, disc, _) in want.items():
        assert got[key] == pytest.approx((ret, disc)), key


def _code_of(value) -> tuple[int, int]:
    """Invert test_staging's `_code(t, e)` observation value."""
    for t in range(64):
        for e in range(2):
            if _code(t, e) == int(value):
                return t, e
    raise AssertionError(value)


def test_demo_rows_refuse_too_few_steps():
    seq = _sequence()
    short = jax.tree.map(lambda x: x[:2], seq)
    with pytest.raises(ValueError, match="too few for n_step=3"):
        demo_rows(short, gamma=0.5, n_step=3)


def test_mix_puts_demonstrations_in_the_batch_tail():
    rows = demo_rows(_sequence(), gamma=0.5, n_step=1)
    device_rows = jax.tree.map(jnp.asarray, rows)
    b, k = 12, 5
    batch = Batch(
        obs=jnp.full((b, 2), 255, jnp.uint8),
        action=jnp.full((b,), 7, jnp.int32),
        reward=jnp.zeros(b),
        discount=jnp.zeros(b),
        next_obs=jnp.zeros((b, 2), jnp.uint8),
        weight=jnp.full((b,), 0.5),
        index=jnp.arange(b, dtype=jnp.int32),
    )
    out = jax.jit(mix, static_argnums=3)(device_rows, batch, jax.random.key(0), k)
    np.testing.assert_array_equal(out.demo, [False] * (b - k) + [True] * k)
    np.testing.assert_array_equal(out.index[: b - k], np.arange(b - k))
    np.testing.assert_array_equal(out.index[b - k :], -1)
    np.testing.assert_array_equal(out.weight, [0.5] * (b - k) + [1.0] * k)
    np.testing.assert_array_equal(out.obs[: b - k], 255)
    pairs = {(int(o[0]), int(a)) for o, a in zip(rows.obs, rows.action, strict=True)}
    for i in range(b - k, b):  # each tail row is one of the demonstration rows
        assert (int(out.obs[i, 0]), int(out.action[i])) in pairs
