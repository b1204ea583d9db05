"""All of prioritised replay (PER; Schaul et al. 2016): samplers, priority rules, importance
weights, and `make_per`, the PER side of the composed buffer (`replay/tiered.py`): new rows at
the running max priority, priority 0 for rows that leave L2, beta annealing, the weights of L3
rows, and the priority update.

Two samplers share one interface (`Sampler`), both over `N` rows with non-negative priorities:

- `"sum_tree"` (`replay/sum_tree.py`): O(B log N) sampling and updates;
- `"cumsum"`: priorities in a flat array; a sample takes a cumulative sum (O(N)) and
  `searchsorted`. Cheap to update and competitive for small buffers.

`"auto"` picks the sum tree from `AUTO_SUM_TREE_FROM` rows on, the capacity from which it
sampled faster in `benchmarks/replay.py` on our CPU (see `benchmarks/results/replay/replay.md`).

Neither returns a zero-priority row while the total is positive: the sum tree never descends
into an empty subtree, and the cumsum sampler searches with `side="right"` for masses strictly
below the last cumulative sum, then moves the rare draw that still lands on a zero row (XLA's
parallel cumsum rounds per position, so a zero row's cumsum can exceed its predecessor's) to the
nearest positive row.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.config import ReplayConfig, priority_rule
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
      draw: `(state, key, batch_size) -> (index [B] int32, priority [B])`, stratified: one draw
        in each of `B` equal slices of the total mass (meaningless while the total is 0), with
        the drawn rows' priorities. The sum tree reads them during its descent, which lets a
        following `set` update the tree in place instead of copying it.
      priorities: `state -> [capacity]` float32, for inspection.
      get: `(state, index [B]) -> [B]` float32, the priorities of rows `index` (no copy of
        the whole array).
    """

    name: str
    init: Callable[[], Array]
    set: Callable[[Array, Array, Array], Array]
    draw: Callable[[Array, PRNGKey, int], tuple[Array, Array]]
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
        draw=sum_tree.sample_with_priority,
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

    return Sampler(
        name="cumsum",
        init=lambda: jnp.zeros((capacity,), jnp.float32),
        set=lambda p, index, value: p.at[index].set(value.astype(jnp.float32)),
        draw=lambda p, key, b: (lambda i: (i, p[i]))(sample(p, key, b)),
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
      >>> index, priority = s.draw(state, jax.random.key(0), 8)
      >>> sorted(set(index.tolist()))
      [1, 3]
    """
    kind = resolve_sampler(kind, capacity)
    return make_sum_tree_sampler(capacity) if kind == "sum_tree" else make_cumsum_sampler(capacity)


def priority_fn(rule: str, alpha: float, eps: float) -> Callable[..., Array]:
    """Map TD errors to priorities: "power" `(|td| + eps) ** alpha`, "sqrt" `sqrt(|td|) + 0.1`
    (a `ReplayConfig.priority` formula: `ReplayConfig.priority_rule`). The function takes
    `(td, alpha=None, eps=None)`; given (traced), they replace the defaults."""
    rule = priority_rule(rule) or rule
    if rule == "power":

        def power(td, a=None, e=None):
            a, e = (alpha if a is None else a), (eps if e is None else e)
            return jnp.power(jnp.abs(td) + e, a)

        return power
    if rule == "sqrt":
        return lambda td, a=None, e=None: jnp.sqrt(jnp.abs(td)) + 0.1
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


class Per(NamedTuple):
    """The PER side of the composed buffer (one seed), as pure functions built by `make_per`.

    The state is two arrays of `ReplayState`: `priorities` (the sampler's state over the L2
    rows, flat index `slot * E + env`) and `max_priority` (`[]` float32, the running max that
    new rows get).

    Attributes:
      sampler: the `Sampler` over the L2 rows.
      init: `() -> priorities`, all 0.
      on_add: `(priorities, max_priority, pos, ring) -> priorities` after the ring wrote slot
        `pos` (`ring` is its state after the add): the rows that leave L2 get priority 0, and
        the rows `n_step` slots back, whose bootstrap rows are now written, the running max
        (0 for a row that is not a transition).
      draw: `(priorities, key, updates, hp=None) -> (index [B] int32, weight [B] float32)`:
        proportional draws and their importance weights `(N P_i)^-beta`, divided by the batch's
        largest; beta anneals linearly from `config.beta` (or `hp.beta`, an `HParams`) to 1
        over `total_updates` batches (`updates` used so far), or stays at it
        (`config.beta_anneal=False`).
      l3_weights: `use [B3] bool -> [B3]` float32, the weights of rows served by L3: 1 (the
        batch's largest) for a valid row, as if drawn uniformly.
      update: `(priorities, max_priority, index [B], td_error [B], hp=None) -> (priorities,
        max_priority)`: the priority rule's values for the batch's live L2 rows (alpha and eps
        from `hp` when given).
    """

    sampler: Sampler
    init: Callable[[], Array]
    on_add: Callable[[Array, Array, Array, Any], Array]
    draw: Callable[[Array, PRNGKey, Array], tuple[Array, Array]]
    l3_weights: Callable[[Array], Array]
    update: Callable[[Array, Array, Array, Array], tuple[Array, Array]]


def make_per(
    config: ReplayConfig,
    *,
    slots: int,
    num_envs: int,
    frame_stack: int = 0,
    total_updates: int | None = None,
) -> Per:
    """Build PER's functions over an L2 ring of `slots x num_envs` rows.

    Args:
      config: replay settings (`sampler`, `priority`, `alpha`, `priority_eps`, `beta`,
        `n_step`, `batch_size`).
      slots, num_envs: the ring's `[T, E]` rows (`ring.make_ring`).
      frame_stack: the ring's deduplicated frame stack (0: none); a write then also takes the
        `frame_stack - 1` oldest slots out of sampling (their stacks lost a frame).
      total_updates: batches over the run; with `config.beta_anneal` beta reaches 1 there
        (None: beta stays fixed).
    """
    n, rows = config.n_step, slots * num_envs
    total_updates = total_updates if config.beta_anneal else None
    sampler = make_sampler(config.sampler, rows)
    to_priority = priority_fn(config.priority, config.alpha, config.priority_eps)
    env = jnp.arange(num_envs, dtype=jnp.int32)

    def on_add(priorities: Array, max_priority: Array, pos: Array, ring: Any) -> Array:
        ready = (pos - n) % slots
        ready_ok = jnp.logical_and(ring.valid[ready], ring.size > n)
        # The slot just overwritten leaves; with frame deduplication the next frame_stack - 1
        # oldest slots leave too: their stacks need the frame just overwritten.
        gone = [(pos + j) % slots for j in range(max(frame_stack, 1))]
        index = jnp.concatenate([g * num_envs + env for g in gone] + [ready * num_envs + env])
        value = jnp.concatenate(
            [jnp.zeros((num_envs * len(gone),)), jnp.where(ready_ok, max_priority, 0.0)]
        )
        return sampler.set(priorities, index, value)

    def beta(updates: Array, start=None) -> Array:
        start = config.beta if start is None else start
        if not total_updates:
            return jnp.asarray(start, jnp.float32)
        frac = jnp.minimum(updates.astype(jnp.float32) / total_updates, 1.0)
        return start + (1.0 - start) * frac

    def draw(
        priorities: Array, key: PRNGKey, updates: Array, hp: Any = None
    ) -> tuple[Array, Array]:
        index, priority = sampler.draw(priorities, key, config.batch_size)
        # (N P_i)^-beta / max_j (N P_j)^-beta: N and the total cancel, priorities suffice.
        start = None if hp is None else hp.beta
        return index, importance_weights(priority, jnp.float32(1.0), beta(updates, start))

    def l3_weights(use: Array) -> Array:
        return jnp.where(use, 1.0, 0.0)

    def update(
        priorities: Array, max_priority: Array, index: Array, td_error: Array, hp: Any = None
    ) -> tuple[Array, Array]:
        # L3 rows (index -1) have no L2 row: point them at one L2 row of the batch with that
        # row's TD error. A scatter keeps one of the values written to a row, so clamping them
        # to row 0 with its old priority could undo row 0's update.
        anchor = jnp.argmax(index)  # an L2 row of the batch, if it has one
        row = jnp.where(index >= 0, index, index[anchor])
        td = jnp.where(index >= 0, td_error, td_error[anchor])
        safe = jnp.maximum(row, 0)
        current = sampler.get(priorities, safe)
        knobs = () if hp is None else (hp.alpha, hp.priority_eps)
        new = to_priority(td.astype(jnp.float32), *knobs)
        # Only rows that are live (priority > 0), came from L2 (index >= 0) and got a finite TD
        # error change (a skipped mixed-precision update may return inf/NaN TD errors).
        live = (row >= 0) & (current > 0) & jnp.isfinite(td)
        priorities = sampler.set(priorities, safe, jnp.where(live, new, current))
        return priorities, jnp.maximum(max_priority, jnp.max(jnp.where(live, new, 0.0)))

    return Per(sampler, sampler.init, on_add, draw, l3_weights, update)
