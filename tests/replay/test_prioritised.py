"""Prioritised replay (`jaxrl_fast.replay.prioritised`: samplers, and `make_per` through
`make_buffer`) against hand numbers: sampling distribution, zero-priority rows, priority rules,
IS weights, beta schedule, new-row, evicted-row and reset-row priorities, L3 rows' weights."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay import make_buffer, sum_tree
from jaxrl_fast.replay.prioritised import (
    AUTO_SUM_TREE_FROM,
    importance_weights,
    make_sampler,
    priority_fn,
    resolve_sampler,
)
from jaxrl_fast.types import Transition

SAMPLERS = ["sum_tree", "cumsum"]
E = 2
OBS = (1,)
# 99.9th percentiles of the chi-square distribution (so a fixed seed passes with a margin).
CHI2_999 = {12: 32.91, 13: 34.53, 14: 36.12, 15: 37.70, 16: 39.25, 17: 40.79, 18: 42.31, 19: 43.82}


def _chi2(counts, prio):
    """Chi-square statistic of draw counts against priorities; asserts zero rows were not drawn."""
    prio = np.asarray(prio, np.float64)
    expected = prio / prio.sum() * counts.sum()
    assert counts[prio == 0].sum() == 0, "a zero-priority row was drawn"
    nz = prio > 0
    return float(np.sum((counts[nz] - expected[nz]) ** 2 / expected[nz])), int(nz.sum()) - 1


@functools.lru_cache(maxsize=None)
def _sampler(kind: str, capacity: int):
    s = make_sampler(kind, capacity)
    rows = lambda state, key, b: s.draw(state, key, b)[0]  # noqa: E731
    draw = jax.jit(jax.vmap(rows, in_axes=(None, 0, None)), static_argnums=2)
    return s, jax.jit(s.set), draw


def _draw(kind, prio, num_keys, batch_size, seed=0):
    s, set_, draw = _sampler(kind, len(prio))
    state = set_(s.init(), jnp.arange(len(prio)), jnp.asarray(prio, jnp.float32))
    keys = jax.random.split(jax.random.key(seed), num_keys)
    return np.asarray(draw(state, keys, batch_size)).ravel(), state


# ---------------------------------------------------------------------------- samplers


PRIO_20 = [0.5, 0, 1, 2, 3, 0, 0.25, 4, 1, 0, 2, 1.5, 0.75, 0, 3, 1, 0.5, 2.5, 1, 0]


@pytest.mark.parametrize("kind", SAMPLERS)
def test_sampling_distribution_matches_priorities(kind):
    idx, _ = _draw(kind, PRIO_20, 200, 256)  # 51,200 draws over 20 rows (15 positive)
    counts = np.bincount(idx, minlength=20)
    chi2, dof = _chi2(counts, PRIO_20)
    assert chi2 < CHI2_999[dof], (kind, chi2, counts)


@pytest.mark.slow
def test_both_samplers_draw_the_same_rows():
    # Dyadic priorities: every partial sum is exact in float32, so both samplers cut the total
    # mass into the same intervals and map the same stratified points to the same rows.
    prio = PRIO_20[:19] + [7]
    np.testing.assert_array_equal(
        _draw("sum_tree", prio, 50, 64, seed=3)[0], _draw("cumsum", prio, 50, 64, seed=3)[0]
    )
    # Random float priorities: the two frequency vectors agree (two-sample chi-square bound).
    rng = np.random.default_rng(0)
    prio = rng.uniform(0.0, 1.0, 20) * (rng.random(20) < 0.8)
    counts = [np.bincount(_draw(k, prio, 200, 256, seed=5)[0], minlength=20) for k in SAMPLERS]
    nz = prio > 0
    stat = float(np.sum((counts[0][nz] - counts[1][nz]) ** 2 / (counts[0][nz] + counts[1][nz])))
    assert stat < CHI2_999[int(nz.sum()) - 1], counts


@pytest.mark.parametrize("kind", SAMPLERS)
def test_priorities_get_and_draw_read_the_rows_priorities(kind):
    s, set_, _ = _sampler(kind, 20)
    state = set_(s.init(), jnp.arange(20), jnp.asarray(PRIO_20, jnp.float32))
    prio = np.asarray(PRIO_20, np.float32)
    np.testing.assert_array_equal(s.priorities(state), prio)
    np.testing.assert_array_equal(s.get(state, jnp.array([0, 1, 7, 19])), [0.5, 0, 4, 0])
    index, priority = jax.jit(s.draw, static_argnums=2)(state, jax.random.key(0), 64)
    np.testing.assert_array_equal(priority, prio[np.asarray(index)])  # the drawn rows' own


def _million_rows(case):
    cap = 1_000_000
    rng = np.random.default_rng(1)
    p = np.zeros(cap, np.float32)
    if case == "few-tiny":  # only a few tiny rows; the last rows are zero
        p[[17, 123_457, 654_321, 999_998]] = [1e-7, 3e-8, 1e-6, 2e-7]
    elif case == "big-and-tiny":  # tiny rows vanish next to big ones in a float32 sum
        p[:10] = 1.0
        p[rng.integers(10, cap, 30)] = 1e-8
        p[[500_000, 999_990]] = [1e-7, 1e-9]
    elif case == "half-zero":  # many positive rows: the cumsum is large and rounds
        p = rng.uniform(0.0, 2.0, cap).astype(np.float32)
        p[rng.random(cap) < 0.5] = 0.0
        p[-5:] = 0.0
    else:  # "spread": 1000 rows over 10 orders of magnitude
        idx = rng.integers(0, cap, 1000)
        p[idx] = (rng.uniform(0, 1, 1000) * 10.0 ** rng.integers(-8, 2, 1000)).astype(np.float32)
    return p


@pytest.mark.parametrize("case", ["few-tiny", "big-and-tiny", "half-zero", "spread"])
@pytest.mark.parametrize("kind", SAMPLERS)
def test_no_zero_priority_row_at_a_million_rows_float32(kind, case):
    prio = _million_rows(case)
    idx, _ = _draw(kind, prio, 64, 1024, seed=1)
    assert idx.min() >= 0 and idx.max() < prio.size
    assert np.all(prio[idx] > 0), f"{np.sum(prio[idx] == 0)} draws of zero-priority rows"


def test_resolve_sampler_auto_picks_by_capacity():
    assert resolve_sampler("auto", AUTO_SUM_TREE_FROM - 1) == "cumsum"
    assert resolve_sampler("auto", AUTO_SUM_TREE_FROM) == "sum_tree"
    assert resolve_sampler("auto", 10 * AUTO_SUM_TREE_FROM) == "sum_tree"
    assert resolve_sampler("cumsum", 10 * AUTO_SUM_TREE_FROM) == "cumsum"
    assert resolve_sampler("sum_tree", 4) == "sum_tree"
    with pytest.raises(ValueError, match=r"ReplayConfig\.sampler='tree' is not allowed"):
        resolve_sampler("tree", 4)
    assert make_sampler("auto", AUTO_SUM_TREE_FROM - 1).name == "cumsum"
    assert make_sampler("auto", AUTO_SUM_TREE_FROM).name == "sum_tree"


@pytest.mark.parametrize(
    "rows, kind", [(AUTO_SUM_TREE_FROM - 2, "cumsum"), (AUTO_SUM_TREE_FROM, "sum_tree")]
)
def test_make_buffer_auto_sampler_follows_ring_rows(rows, kind):
    config = ReplayConfig(capacity=rows, batch_size=4, prioritised=True, sampler="auto")
    state = jax.eval_shape(make_buffer(config, _example()).init)
    # flat array vs sum tree (2 x leaves, leaves the next power of two)
    size = rows if kind == "cumsum" else 2 * sum_tree.num_leaves(rows)
    assert state.priorities.shape == (size,)


# ---------------------------------------------------------------------------- priority rules


def test_priority_rules_by_hand():
    td = jnp.array([-2.5, 0.0, 0.3, 4.0], jnp.float32)
    power = priority_fn("power", 0.6, 1e-6)(td)
    np.testing.assert_allclose(
        power, [(2.500001) ** 0.6, 1e-6**0.6, (0.300001) ** 0.6, (4.000001) ** 0.6], rtol=1e-6
    )
    np.testing.assert_allclose(power[1], 2.51189e-4, rtol=1e-5)  # 1e-6 ** 0.6: never zero
    sqrt = priority_fn("sqrt", 0.6, 1e-6)(td)  # alpha and eps unused
    np.testing.assert_allclose(sqrt, [1.6811388, 0.1, 0.6477226, 2.1], rtol=1e-6)
    with pytest.raises(ValueError, match=r"ReplayConfig\.priority='cube'"):
        priority_fn("cube", 0.6, 1e-6)


def test_importance_weights_by_hand():
    prob = jnp.array([0.1, 0.2, 0.3, 0.4])
    # (N P)^-beta / max: with beta = 0.5 the smallest P has the largest weight, 1, and the
    # others are sqrt(0.1 / P).
    np.testing.assert_allclose(
        importance_weights(prob, jnp.int32(4), 0.5), [1.0, 0.70710678, 0.57735027, 0.5], rtol=1e-6
    )
    np.testing.assert_allclose(
        importance_weights(prob, jnp.int32(40), 1.0), [1.0, 0.5, 1 / 3, 0.25], rtol=1e-6
    )
    np.testing.assert_array_equal(importance_weights(prob, jnp.int32(4), 0.0), 1.0)
    # A probability-0 row gets weight 0 and does not set the max.
    np.testing.assert_allclose(
        importance_weights(jnp.array([0.0, 0.25, 0.5]), jnp.int32(3), 1.0), [0, 1, 0.5], rtol=1e-6
    )


# ---------------------------------------------------------------------------- through make_buffer


def _example() -> Transition:
    sds = jax.ShapeDtypeStruct
    return Transition(
        obs=sds((E, *OBS), jnp.uint8),
        action=sds((E,), jnp.int32),
        reward=sds((E,), jnp.float32),
        terminated=sds((E,), bool),
        truncated=sds((E,), bool),
        reset=sds((E,), bool),
    )


def _step(t, resets=(), ends=()) -> Transition:
    return Transition(
        obs=jnp.array([[(t * 10 + e + 1) % 256] for e in range(E)], jnp.uint8),
        action=jnp.zeros((E,), jnp.int32),
        reward=jnp.ones((E,), jnp.float32),
        terminated=jnp.array([(t, e) in ends for e in range(E)]),
        truncated=jnp.zeros((E,), bool),
        reset=jnp.array([(t, e) in resets for e in range(E)]),
    )


class _Per:
    """A PER buffer with its functions jitted once and a priority read-out."""

    def __init__(self, kind, *, slots, n, total_updates=None, **config):
        config = ReplayConfig(
            capacity=slots * E, n_step=n, prioritised=True, sampler=kind, **config
        )
        self.buffer = make_buffer(config, _example(), gamma=0.5, total_updates=total_updates)
        self.sampler = make_sampler(kind, slots * E)
        self.slots, self.n = slots, n
        self.add = jax.jit(self.buffer.add)
        self.sample = jax.jit(self.buffer.sample)
        self.draws = jax.jit(jax.vmap(self.buffer.sample, in_axes=(None, 0)))
        self.update = jax.jit(self.buffer.update_priorities)

    def priorities(self, state):
        """Priorities as `[slots, E]`."""
        return np.asarray(self.sampler.priorities(state.priorities)).reshape(self.slots, E)


@functools.lru_cache(maxsize=None)
def _per(kind, **kwargs):
    return _Per(kind, **kwargs)


def _expected_positive(writes, slots, n, resets):
    """Rows that must have positive priority after `writes` adds, by hand: the slot of add `i`
    holds step `i - (n - 1)`; it is live once it is neither a warm-up placeholder nor a reset
    row, not among the newest `n` slots, and not overwritten."""
    live = np.zeros((slots, E), bool)
    for i in range(max(0, writes - slots), writes - n):
        for e in range(E):
            step = i - (n - 1)
            live[i % slots, e] = step >= 0 and (step, e) not in resets
    return live


@pytest.mark.slow
@pytest.mark.parametrize("kind", SAMPLERS)
def test_new_rows_get_max_priority_reset_placeholder_newest_and_unwritten_rows_zero(kind):
    per = _per(kind, slots=10, n=2, batch_size=8, priority="sqrt")
    resets = {(3, 0), (5, 1)}
    ends = {(2, 0), (4, 1)}
    state = per.buffer.init()
    for t in range(6):
        state = per.add(state, _step(t, resets, ends))
        live = _expected_positive(t + 1, 10, 2, resets)
        np.testing.assert_array_equal(per.priorities(state), np.where(live, 1.0, 0.0), str(t))
    # after 6 adds: slots 1..3 (steps 0..2) are live; slot 0 is the placeholder; slot 4 holds
    # step 3 of env 0, a reset row; slots 4, 5 are the newest two; slots 6..9 are unwritten.
    np.testing.assert_array_equal(per.priorities(state)[:, 0], [0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    # raise the running max: sqrt(|9|) + 0.1 = 3.1 for row (slot 1, env 0)
    state = per.update(state, jnp.array([2, 5], jnp.int32), jnp.array([9.0, 0.25]))
    np.testing.assert_allclose(per.priorities(state)[1:3], [[3.1, 1.0], [1.0, 0.6]], rtol=1e-6)
    np.testing.assert_allclose(float(state.max_priority), 3.1, rtol=1e-6)
    for t in range(6, 9):
        state = per.add(state, _step(t, resets, ends))
    # adds 6..8 made slots 4 (reset row in env 0), 5 and 6 live, at the new max 3.1
    prio = per.priorities(state)
    live = _expected_positive(9, 10, 2, resets)
    np.testing.assert_array_equal(prio > 0, live)
    np.testing.assert_allclose(prio[4:7], [[0.0, 3.1], [3.1, 3.1], [3.1, 0.0]], rtol=1e-6)
    # sampling returns only live rows, all of them with a fixed seed
    batch = per.draws(state, jax.random.split(jax.random.key(0), 64))
    index = np.asarray(batch.index).ravel()
    assert set(index.tolist()) == set(np.flatnonzero(live.ravel()).tolist())
    assert np.all(np.asarray(batch.weight) > 0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", SAMPLERS)
def test_priorities_stay_positive_exactly_on_live_rows_over_wraps(kind):
    slots, n = 7, 3
    per = _per(kind, slots=slots, n=n, batch_size=8, priority="sqrt")
    rng = np.random.default_rng(0)
    resets = {(t, e) for t in range(1, 40) for e in range(E) if rng.random() < 0.2}
    ends = {(t - 1, e) for t, e in resets}
    state = per.buffer.init()
    for t in range(40):
        state = per.add(state, _step(t, resets, ends))
        live = _expected_positive(t + 1, slots, n, resets)
        assert np.array_equal(per.priorities(state) > 0, live), t
        if live.any() and t % 3 == 0:  # learning changes priorities; liveness must not change
            batch = per.sample(state, jax.random.key(t))
            td = jnp.asarray(rng.normal(size=batch.index.shape), jnp.float32)
            state = per.update(state, batch.index, td)
            assert np.array_equal(per.priorities(state) > 0, live), t


@pytest.mark.parametrize("kind", SAMPLERS)
def test_overwritten_slot_gets_priority_zero_then_max_when_ready(kind):
    slots = 4
    per = _per(kind, slots=slots, n=1, batch_size=8, priority="sqrt")
    state = per.buffer.init()
    for t in range(4):
        state = per.add(state, _step(t))
    # slots 0..2 are live at 1.0; set slot 0 to 0.6 (td 0.25) and slot 1 to 2.1 (td 4)
    state = per.update(state, jnp.array([0, 1, 2, 3]), jnp.array([0.25, 0.25, 4.0, 4.0]))
    np.testing.assert_allclose(
        per.priorities(state), [[0.6, 0.6], [2.1, 2.1], [1, 1], [0, 0]], rtol=1e-6
    )
    state = per.add(state, _step(4))  # overwrites slot 0; slot 3 becomes ready at max 2.1
    np.testing.assert_allclose(
        per.priorities(state), [[0, 0], [2.1, 2.1], [1, 1], [2.1, 2.1]], rtol=1e-6
    )
    index = np.asarray(per.draws(state, jax.random.split(jax.random.key(0), 32)).index)
    assert not np.isin(index, [0, 1]).any(), "sampled the overwritten slot"
    state = per.add(state, _step(5))  # overwrites slot 1; slot 0 (new data) is ready at 2.1
    np.testing.assert_allclose(
        per.priorities(state), [[2.1, 2.1], [0, 0], [1, 1], [2.1, 2.1]], rtol=1e-6
    )


@pytest.mark.parametrize("rule", ["power", "sqrt"])
@pytest.mark.parametrize("kind", SAMPLERS)
def test_update_priorities_sets_rule_values_exactly(kind, rule):
    per = _per(kind, slots=8, n=1, batch_size=8, priority=rule, alpha=0.5, priority_eps=0.01)
    resets = {(2, 1)}
    state = per.buffer.init()
    for t in range(8):
        state = per.add(state, _step(t, resets, {(1, 1)}))
    before = per.priorities(state).ravel()
    # rows 0, 3 and 13 are live; 5 is the reset row (step 2, env 1); 14 is the newest slot;
    # -1 marks an L3 row. Only live rows change. (The -1 next to row 0 caught a bug: L3 rows
    # were clamped to row 0 and wrote its old priority back in the same scatter.)
    index = jnp.array([0, 3, 5, 13, 14, -1], jnp.int32)
    td = np.array([-2.5, 0.0, 7.0, 0.36, 9.0, 4.0], np.float32)
    state = per.update(state, index, jnp.asarray(td))
    after = per.priorities(state).ravel()
    hand = {
        "power": [(2.5 + 0.01) ** 0.5, 0.01**0.5, (0.36 + 0.01) ** 0.5],
        "sqrt": [2.5**0.5 + 0.1, 0.1, 0.6 + 0.1],
    }[rule]
    np.testing.assert_allclose(after[[0, 3, 13]], hand, rtol=1e-6)
    assert after[5] == 0 and after[14] == 0
    untouched = np.setdiff1d(np.arange(16), [0, 3, 13])
    np.testing.assert_array_equal(after[untouched], before[untouched])
    np.testing.assert_allclose(float(state.max_priority), max(1.0, max(hand)), rtol=1e-6)
    assert int(state.updates) == 1


@pytest.mark.parametrize("kind", SAMPLERS)
def test_importance_weights_in_batch_by_hand(kind):
    per = _per(kind, slots=4, n=1, batch_size=8, priority="sqrt", beta=0.5)
    state = per.buffer.init()
    for t in range(4):
        state = per.add(state, _step(t))
    # 6 live rows (slots 0..2); priorities 0.1 + sqrt(td): 1.1, 2.1, 0.6, 1.6, 4.1, 0.1 + 0.5
    td = jnp.array([1.0, 4.0, 0.25, 2.25, 16.0, 0.25])
    state = per.update(state, jnp.arange(6, dtype=jnp.int32), td)
    prio = np.array([1.1, 2.1, 0.6, 1.6, 4.1, 0.6])
    batch = per.sample(state, jax.random.key(7))
    index = np.asarray(batch.index)
    p = prio[index] / prio.sum()
    n_rows = 3 * E  # sampleable rows
    w = (n_rows * p) ** -0.5
    # beta stays 0.5: no total_updates given
    np.testing.assert_allclose(batch.weight, w / w.max(), rtol=1e-5)
    assert batch.weight.max() == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("kind", SAMPLERS)
def test_beta_anneals_linearly_to_one_over_total_updates_or_stays_fixed(kind):
    per = _per(kind, slots=4, n=1, batch_size=8, priority="sqrt", beta=0.2, total_updates=4)
    fixed = _per(kind, slots=4, n=1, batch_size=8, priority="sqrt", beta=0.2)
    # Dopamine's fixed exponent: no annealing even with the run's length known
    held = _per(kind, slots=4, n=1, batch_size=8, priority="sqrt", beta=0.2, total_updates=4,
                beta_anneal=False)  # fmt: skip
    for buf in (per, fixed, held):
        state = buf.buffer.init()
        for t in range(2):
            state = buf.add(state, _step(t))
        # one complete slot: rows 0 and 1 at 0.1 + sqrt(td) = 1.1 and 4.1
        state = buf.update(state, jnp.array([0, 1], jnp.int32), jnp.array([1.0, 16.0]))
        ratio = 1.1 / 4.1
        for k in range(1, 8):  # `updates` counts calls; index -1 changes no priority
            batch = buf.sample(state, jax.random.key(k))
            index = np.asarray(batch.index)
            assert set(index.tolist()) == {0, 1}
            beta = 0.2 + 0.8 * min(k / 4, 1.0) if buf is per else 0.2
            # the 1.1 row has the larger weight (1); the 4.1 row has (4.1 / 1.1) ** -beta
            expected = np.where(index == 0, 1.0, ratio**beta)
            np.testing.assert_allclose(batch.weight, expected, rtol=1e-5, err_msg=str(k))
            state = buf.update(state, jnp.full((8,), -1, jnp.int32), jnp.zeros(8))


def test_prioritised_rows_are_the_uniform_rows():
    # PER changes which rows are drawn and their weights, not their content.
    per = _per("cumsum", slots=6, n=2, batch_size=8, priority="sqrt")
    state = per.buffer.init()
    for t in range(6):
        state = per.add(state, _step(t))
    batch = jax.tree.map(np.asarray, per.sample(state, jax.random.key(0)))
    slot, env = np.divmod(batch.index, E)
    step = slot - 1  # slot of add i holds step i - (n - 1)
    np.testing.assert_array_equal(batch.obs[:, 0], step * 10 + env + 1)
    np.testing.assert_array_equal(batch.next_obs[:, 0], (step + 2) * 10 + env + 1)
    np.testing.assert_array_equal(batch.reward, 1.5)
    np.testing.assert_array_equal(batch.discount, 0.25)
    np.testing.assert_array_equal(batch.weight, 1.0)  # equal priorities: equal weights


@pytest.mark.parametrize("kind", SAMPLERS)
def test_nonfinite_td_errors_leave_priorities_unchanged(kind):
    """A skipped mixed-precision update may return inf/NaN TD errors: those rows keep their
    priority and the running max stays finite."""
    per = _per(kind, slots=8, n=1, batch_size=8, priority="power", alpha=0.5, priority_eps=0.01)
    state = per.buffer.init()
    for t in range(8):
        state = per.add(state, _step(t, set(), set()))
    before = per.priorities(state).ravel()
    index = jnp.array([0, 3, 4], jnp.int32)
    state = per.update(state, index, jnp.array([jnp.inf, jnp.nan, 0.25], jnp.float32))
    after = per.priorities(state).ravel()
    assert after[0] == before[0] and after[3] == before[3]
    np.testing.assert_allclose(after[4], (0.25 + 0.01) ** 0.5, rtol=1e-6)
    assert np.isfinite(float(state.max_priority))
    assert np.isfinite(np.asarray(state.priorities)).all()  # the whole sum tree, inner nodes too
