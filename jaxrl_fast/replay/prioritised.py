"""Proportional prioritised sampling (Schaul et al. 2016): samplers and priority rules.

Two samplers share one interface (`Sampler`), both over `N` rows with non-negative priorities:

- `"sum_tree"` (`replay/sum_tree.py`): O(B log N) sampling and updates;
- `"cumsum"`: priorities in a flat array; a sample takes a cumulative sum (O(N)) and
  `searchsorted`. Cheap to update and competitive for small buffers.

`"auto"` picks the sum tree from `AUTO_SUM_TREE_FROM` rows on, the capacity from which it
sampled faster in `benchmarks/replay.py` on our CPU (see `benchmarks/results/replay.md`).

Neither returns a zero-priority row while the total is positive: the sum tree never descends
into an empty subtree, and the cumsum sampler searches with `side="right"` for masses strictly
below the last cumulative sum, then moves the rare draw that still lands on a zero row (XLA's
parallel cumsum rounds per position, so a zero row's cumsum can exceed its predecessor's) to the
nearest positive row.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.replay import sum_tree
from jaxrl_fast.types import Array, PRNGKey

AUTO_SUM_TREE_FROM = 1_000
SAMPLERS = ("sum_tree", "cumsum")


class Sampler(NamedTuple):
    """Proportional sampling over `capacity` rows as pure functions of one array.

    Attributes:
      name: "sum_tree" or "cumsum".
      init: `() -> state`, all priorities 0.
      set: `(state, index [K], priority [K]) -> state`.
      sample: `(state, key, batch_size) -> index [B]` int32, stratified: one draw in each of
        `B` equal slices of the total mass (meaningless while the total is 0).
      probability: `(state, index [B]) -> [B]` float32, `priority / total`.
      draw: `(state, key, batch_size) -> (index [B], priority [B])`: `sample` plus the drawn
        rows' priorities in one pass. The sum tree reads them during its descent, which lets
        a following `set` update the tree in place instead of copying it.
      total: `state -> []` float32.
      priorities: `state -> [capacity]` float32.
      get: `(state, index [B]) -> [B]` float32, the priorities of rows `index` (no copy of
        the whole array).
    """

    name: str
    init: Callable[[], Array]
    set: Callable[[Array, Array, Array], Array]
    sample: Callable[[Array, PRNGKey, int], Array]
    probability: Callable[[Array, Array], Array]
    draw: Callable[[Array, PRNGKey, int], tuple[Array, Array]]
    total: Callable[[Array], Array]
    priorities: Callable[[Array], Array]
    get: Callable[[Array, Array], Array]


def _strata(key: PRNGKey, batch_size: int, total: Array) -> Array:
    u = (jnp.arange(batch_size) + jax.random.uniform(key, (batch_size,))) / batch_size
    return jnp.minimum(u * total, jnp.nextafter(total, jnp.float32(0.0)))


def make_sum_tree_sampler(capacity: int) -> Sampler:
    """A `Sampler` over a sum tree (`replay/sum_tree.py`)."""
    return Sampler(
        name="sum_tree",
        init=lambda: sum_tree.init(capacity),
        set=sum_tree.update,
        sample=sum_tree.sample,
        probability=sum_tree.probabilities,
        draw=sum_tree.sample_with_priority,
        total=sum_tree.total,
        priorities=lambda tree: sum_tree.leaves(tree, capacity),
        get=lambda tree, index: tree[index.astype(jnp.int32) + tree.shape[0] // 2],
    )


def make_cumsum_sampler(capacity: int) -> Sampler:
    """A `Sampler` over a flat priority array: cumsum + searchsorted per sample."""

    def sample(p: Array, key: PRNGKey, batch_size: int) -> Array:
        c = jnp.cumsum(p)
        mass = _strata(key, batch_size, c[-1])
        idx = jnp.minimum(jnp.searchsorted(c, mass, side="right"), capacity - 1)
        # XLA computes cumsum as a parallel scan: a zero row's entry can round above its
        # predecessor's (and `c` need not be monotone), so a rare draw lands on a zero row.
        # Move such a draw to the nearest positive row before it, else after it (exact scans).
        rows = jnp.arange(capacity, dtype=jnp.int32)
        before = jax.lax.cummax(jnp.where(p > 0, rows, -1))[idx]
        after = jax.lax.cummin(jnp.where(p > 0, rows, capacity - 1), reverse=True)[idx]
        snap = jnp.where(before >= 0, before, after)
        return jnp.where(p[idx] > 0, idx, snap).astype(jnp.int32)

    def probability(p: Array, index: Array) -> Array:
        return p[index] / jnp.maximum(jnp.sum(p), 1e-30)

    return Sampler(
        name="cumsum",
        init=lambda: jnp.zeros((capacity,), jnp.float32),
        set=lambda p, index, value: p.at[index].set(value.astype(jnp.float32)),
        sample=sample,
        probability=probability,
        draw=lambda p, key, b: (lambda i: (i, p[i]))(sample(p, key, b)),
        total=jnp.sum,
        priorities=lambda p: p,
        get=lambda p, index: p[index],
    )


def resolve_sampler(kind: str, capacity: int) -> str:
    """The sampler `kind` ("auto", "sum_tree", "cumsum") means for `capacity` rows."""
    if kind == "auto":
        return "sum_tree" if capacity >= AUTO_SUM_TREE_FROM else "cumsum"
    if kind not in SAMPLERS:
        raise ValueError(
            f"ReplayConfig.sampler={kind!r} is not allowed; expected one of {('auto', *SAMPLERS)}."
        )
    return kind


def make_sampler(kind: str, capacity: int) -> Sampler:
    """Build the sampler `kind` ("auto", "sum_tree" or "cumsum") over `capacity` rows.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> s = make_sampler("cumsum", 4)
      >>> state = s.set(s.init(), jnp.array([1, 3]), jnp.array([1.0, 3.0]))
      >>> sorted(set(s.sample(state, jax.random.key(0), 8).tolist()))
      [1, 3]
    """
    kind = resolve_sampler(kind, capacity)
    return make_sum_tree_sampler(capacity) if kind == "sum_tree" else make_cumsum_sampler(capacity)


def priority_fn(rule: str, alpha: float, eps: float) -> Callable[[Array], Array]:
    """Map TD errors to priorities: "power" `(|td| + eps) ** alpha`, "sqrt" `sqrt(|td|) + 0.1`."""
    if rule == "power":
        return lambda td: jnp.power(jnp.abs(td) + eps, alpha)
    if rule == "sqrt":
        return lambda td: jnp.sqrt(jnp.abs(td)) + 0.1
    raise ValueError(
        f"ReplayConfig.priority={rule!r} is not allowed; expected one of ('power', 'sqrt')."
    )


def importance_weights(probability: Array, num_rows: Array, beta: Array) -> Array:
    """`(N * P(i)) ** -beta`, divided by the batch's largest weight (so all are <= 1).

    Rows with probability 0 (never drawn while the total is positive) get weight 0. After the
    division `N` and the total cancel: passing raw priorities and `num_rows=1` gives the same
    weights, which is how `make_buffer` calls it (no read of the total after sampling).
    """
    p = jnp.maximum(probability, 1e-30)
    w = jnp.power(jnp.maximum(num_rows, 1).astype(jnp.float32) * p, -beta)
    w = jnp.where(probability > 0, w, 0.0)
    return w / jnp.maximum(jnp.max(w), 1e-30)
