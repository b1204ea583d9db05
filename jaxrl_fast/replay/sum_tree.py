"""A sum tree for proportional prioritised sampling, as pure functions over one array.

Layout: `tree` has `2 * L` float32 entries where `L` is the capacity rounded up to a power of
two; the root is `tree[1]`, node `i` has children `2i` and `2i + 1`, and leaf `j` (row `j` of the
buffer) is `tree[L + j]`. `tree[0]` is unused. Sampling and updating are O(B log L).

Numerical safety (flashbax shipped float32 PER that returned zero-priority rows): rounding
can leave a parent's sum slightly larger than its children's, so a descent that goes right at a
node whose right child is empty would end on a zero leaf. Here every step prefers the child
with positive mass: a descent never enters a subtree whose sum is zero, so a zero-priority or
unwritten row is never returned while any row has positive priority. Parents are recomputed
from their children on every update (no accumulated deltas), so the tree does not drift.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_fast.types import Array, PRNGKey


def num_leaves(capacity: int) -> int:
    """Leaves of a tree holding `capacity` rows: the next power of two (at least 2)."""
    if capacity < 1:
        raise ValueError(f"sum tree capacity={capacity!r} is not allowed; expected an int >= 1.")
    return max(2, 1 << (capacity - 1).bit_length())


def init(capacity: int) -> Array:
    """An all-zero tree for `capacity` rows: `[2 * num_leaves(capacity)]` float32."""
    return jnp.zeros((2 * num_leaves(capacity),), jnp.float32)


def total(tree: Array) -> Array:
    """Sum of all priorities (`[]` float32)."""
    return tree[1]


def leaves(tree: Array, capacity: int) -> Array:
    """The priorities of rows `0 .. capacity - 1`."""
    n = tree.shape[0] // 2
    return tree[n : n + capacity]


def update(tree: Array, index: Array, priority: Array) -> Array:
    """Set the priorities of rows `index` (`[B]` int32) to `priority` (`[B]`, >= 0).

    Duplicate indices in one call keep one of their values (XLA's scatter picks one); the
    parents are recomputed from the children, so the tree stays consistent either way.
    """
    n = tree.shape[0] // 2
    depth = n.bit_length() - 1
    node = index.astype(jnp.int32) + n
    tree = tree.at[node].set(priority.astype(jnp.float32))

    def level(_, carry):
        tree, node = carry
        node = node // 2
        tree = tree.at[node].set(tree[2 * node] + tree[2 * node + 1])
        return tree, node

    tree, _ = jax.lax.fori_loop(0, depth, level, (tree, node))
    return tree


def find_with_priority(tree: Array, mass: Array) -> tuple[Array, Array]:
    """Rows whose cumulative priority interval holds `mass` (`[B]`, in `[0, total)`), and their
    priorities.

    A step goes right when `mass >= left sum`, unless the right subtree is empty, and left
    when the left subtree is empty: the result always has positive priority while the total is
    positive. The priorities are read inside the descent, so that no read of `tree` is left
    for after it: a later `update` of the tree then runs in place (XLA copies a buffer that is
    still to be read after it is written: 8 MB per step at 1e6 rows).
    """
    n = tree.shape[0] // 2
    depth = n.bit_length() - 1

    def level(_, carry):
        node, mass, _ = carry
        left = 2 * node
        left_sum, right_sum = tree[left], tree[left + 1]
        go_right = jnp.logical_or(jnp.logical_and(mass >= left_sum, right_sum > 0), left_sum <= 0)
        mass = jnp.where(go_right, jnp.maximum(mass - left_sum, 0.0), mass)
        return jnp.where(go_right, left + 1, left), mass, jnp.where(go_right, right_sum, left_sum)

    start = (jnp.ones_like(mass, jnp.int32), mass, jnp.zeros_like(mass))
    node, _, priority = jax.lax.fori_loop(0, depth, level, start)
    return node - n, priority


def sample_with_priority(tree: Array, key: PRNGKey, batch_size: int) -> tuple[Array, Array]:
    """Draw `batch_size` rows with probability proportional to priority (stratified), and each
    drawn row's priority (read during the descent; see `find_with_priority`).

    The total mass is cut into `batch_size` equal strata and one point is drawn uniformly in
    each, as in Schaul et al. (2016); the points are clamped just below the total so rounding
    cannot push one past the last positive leaf.

    Returns:
      `[batch_size]` int32 row indices (meaningless if the total is 0) and `[batch_size]`
      float32 priorities.
    """
    t = total(tree)
    u = (jnp.arange(batch_size) + jax.random.uniform(key, (batch_size,))) / batch_size
    mass = jnp.minimum(u * t, jnp.nextafter(t, jnp.float32(0.0)))
    return find_with_priority(tree, mass)
