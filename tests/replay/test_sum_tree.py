"""Sum tree: structure, proportional sampling, and no zero-priority row at 1e6 rows in float32."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.replay import sum_tree


def test_num_leaves_rounds_up_to_power_of_two():
    assert [sum_tree.num_leaves(c) for c in (1, 2, 3, 4, 5, 1000)] == [2, 2, 4, 4, 8, 1024]
    with pytest.raises(ValueError, match="capacity=0"):
        sum_tree.num_leaves(0)


def test_update_keeps_every_parent_the_sum_of_its_children():
    tree = sum_tree.init(6)
    tree = sum_tree.update(tree, jnp.array([0, 3, 5]), jnp.array([1.0, 2.0, 4.0]))
    tree = sum_tree.update(tree, jnp.array([3, 1]), jnp.array([0.5, 3.0]))
    t = np.asarray(tree)
    n = t.shape[0] // 2
    np.testing.assert_allclose(t[n : n + 6], [1.0, 3.0, 0.0, 0.5, 0.0, 4.0])
    for node in range(1, n):
        assert t[node] == pytest.approx(t[2 * node] + t[2 * node + 1])
    assert float(sum_tree.total(tree)) == pytest.approx(8.5)
    np.testing.assert_array_equal(sum_tree.leaves(tree, 6), [1.0, 3.0, 0.0, 0.5, 0.0, 4.0])


def test_find_maps_mass_to_the_right_interval():
    tree = sum_tree.update(sum_tree.init(4), jnp.arange(4), jnp.array([1.0, 0.0, 2.0, 3.0]))
    mass = jnp.array([0.0, 0.99, 1.0, 2.5, 2.99, 3.0, 5.99])
    row, priority = sum_tree.find_with_priority(tree, mass)
    np.testing.assert_array_equal(row, [0, 0, 2, 2, 2, 3, 3])
    np.testing.assert_array_equal(priority, [1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0])


def test_sampling_frequencies_match_priorities():
    prio = jnp.array([1.0, 0.0, 2.0, 3.0, 0.5, 0.0, 1.5, 2.0])
    tree = sum_tree.update(sum_tree.init(8), jnp.arange(8), prio)
    draw = jax.jit(jax.vmap(lambda k: sum_tree.sample_with_priority(tree, k, 64)[0]))
    idx = np.asarray(draw(jax.random.split(jax.random.key(0), 500))).ravel()
    counts = np.bincount(idx, minlength=8)
    expected = np.asarray(prio) / float(prio.sum()) * idx.size
    assert counts[1] == counts[5] == 0
    nz = expected > 0
    chi2 = float(np.sum((counts[nz] - expected[nz]) ** 2 / expected[nz]))
    assert chi2 < 20.5, (counts, expected)  # 99.9th percentile of chi-square with 5 dof


@pytest.mark.slow
def test_no_zero_priority_row_at_a_million_rows_float32():
    cap = 1_000_000
    rng = np.random.default_rng(0)
    prio = rng.uniform(0.0, 2.0, cap).astype(np.float32)
    prio[rng.random(cap) < 0.5] = 0.0  # half the rows empty
    prio[-5:] = 0.0  # the right edge empty too, where rounding bites
    tree = sum_tree.update(sum_tree.init(cap), jnp.arange(cap), jnp.asarray(prio))
    n = tree.shape[0] // 2
    assert n == 1 << 20  # unwritten leaves beyond `cap` are zero as well
    draw = jax.jit(jax.vmap(lambda k: sum_tree.sample_with_priority(tree, k, 512)[0]))
    idx = np.asarray(draw(jax.random.split(jax.random.key(1), 64))).ravel()
    assert idx.min() >= 0 and idx.max() < cap
    assert np.all(prio[idx] > 0), "sampled a zero-priority row"
    # mass right at the total (the float32 edge case) still lands on a positive row
    edge = sum_tree.find_with_priority(tree, jnp.array([float(sum_tree.total(tree))]))[0]
    assert prio[int(edge[0])] > 0


def test_duplicate_indices_keep_the_tree_consistent():
    tree = sum_tree.update(sum_tree.init(4), jnp.array([2, 2, 2]), jnp.array([1.0, 5.0, 3.0]))
    t = np.asarray(tree)
    assert t[4 + 2] in (1.0, 5.0, 3.0)
    assert t[1] == pytest.approx(t[4 + 2])


def test_mass_at_the_total_never_enters_an_empty_subtree():
    # Rounding can make a mass equal (or exceed) the total: a plain "go right if mass >= left
    # sum" descent then walks into the empty right half and returns a zero-priority row.
    tree = sum_tree.update(sum_tree.init(4), jnp.arange(4), jnp.array([1.0, 2.0, 0.0, 0.0]))
    t = float(sum_tree.total(tree))
    rows = sum_tree.find_with_priority(tree, jnp.array([t, t * 1.0000001, 2.9999998]))[0]
    np.testing.assert_array_equal(rows, [1, 1, 1])
