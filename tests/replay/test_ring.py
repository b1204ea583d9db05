"""L2 device ring (`jaxrl_fast.replay.ring`): storage, wrap-around, gather and uniform sampling.

The ring stores `StoredRow`s committed by L1 staging; here rows are written by hand through
`make_ring`, and end to end through `make_buffer` (uniform replay).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import stack_stream

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay import StoredRow, make_buffer, make_ring, row_bytes
from jaxrl_fast.types import Transition

E = 2
OBS = (3,)
# 99.9th percentiles of the chi-square distribution by degrees of freedom (scipy.stats.chi2.ppf):
# a fixed seed passes with a margin, a sampler off by one slot fails by orders of magnitude.
CHI2_999 = {1: 10.83, 3: 16.27, 5: 20.52, 7: 24.32, 9: 27.88, 13: 34.53, 25: 52.62}


def _code(t, e):
    """Unique obs value of env `e` at slot-write `t` (fits uint8)."""
    return 10 * t + e + 1


def _decode(value):
    value = np.asarray(value, np.int64)
    return (value - 1) // 10, (value - 1) % 10


def _row(t, offset=(1, 1), valid=(True, True), obs_dtype=jnp.uint8) -> StoredRow:
    """The row every env commits at write `t`: reward t + e/2, discount 0.5 + e/4."""
    return StoredRow(
        obs=jnp.stack([jnp.full(OBS, _code(t, e), obs_dtype) for e in range(E)]),
        action=jnp.array([(t + e) % 3 for e in range(E)], jnp.int32),
        reward=jnp.array([t + 0.5 * e for e in range(E)], jnp.float32),
        discount=jnp.array([0.5 + 0.25 * e for e in range(E)], jnp.float32),
        offset=jnp.array(offset, jnp.int32),
        valid=jnp.array(valid),
    )


@functools.lru_cache(maxsize=None)
def _ring(slots: int, n: int, obs_dtype=jnp.uint8):
    """A ring with jitted add/gather/sample (compiled once per shape)."""
    ring = make_ring(slots * E, E, OBS, obs_dtype, n)
    return ring._replace(
        add=jax.jit(ring.add),
        gather=jax.jit(ring.gather),
        sample_uniform=jax.jit(
            jax.vmap(ring.sample_uniform, in_axes=(None, 0, None)), static_argnums=2
        ),
    )


def _fill(ring, rows):
    state = ring.init()
    for row in rows:
        state = ring.add(state, row)
    return state


def _draws(ring, state, num_keys=64, batch_size=32):
    keys = jax.random.split(jax.random.key(0), num_keys)
    batch = ring.sample_uniform(state, keys, batch_size)
    return jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), batch)


def _chi2_uniform(index, rows):
    """Chi-square statistic of draw counts against the uniform distribution over `rows` (flat
    row indices) and its degrees of freedom; asserts no other row was drawn."""
    counts = np.bincount(index, minlength=max(rows) + 1)
    outside = np.setdiff1d(np.flatnonzero(counts), rows)
    assert outside.size == 0, f"drew rows {outside.tolist()} outside the sampleable ones"
    expected = index.size / len(rows)
    return float(np.sum((counts[rows] - expected) ** 2 / expected)), len(rows) - 1


# --------------------------------------------------------------------------- storage


def test_init_is_empty_with_native_dtypes():
    ring = _ring(4, 2)
    state = ring.init()
    assert (ring.slots, ring.num_envs, ring.lag) == (4, E, 2)
    assert state.obs.shape == (4, E, *OBS) and state.obs.dtype == jnp.uint8
    assert state.action.dtype == jnp.int32 and state.reward.dtype == jnp.float32
    assert state.discount.dtype == jnp.float32 and state.offset.dtype == jnp.int8
    assert state.valid.dtype == jnp.bool_ and not state.valid.any()
    assert int(state.size) == 0 and int(state.insert_pos) == 0
    assert int(ring.sampleable_slots(state)) == 0


def test_wrap_around_overwrites_oldest_in_order():
    ring = _ring(4, 1)
    state = ring.init()
    expected = [(1, 1), (2, 2), (3, 3), (0, 4), (1, 4), (2, 4)]  # (insert_pos, size) after each
    for t, (pos, size) in enumerate(expected):
        state = ring.add(state, _row(t, offset=(1, 2), valid=(True, t % 2 == 0)))
        assert (int(state.insert_pos), int(state.size)) == (pos, size), t
        assert int(ring.sampleable_slots(state)) == max(size - 1, 0)
    # Writes 0..5 went to slots 0,1,2,3,0,1: slots 0 and 1 now hold writes 4 and 5.
    for slot, t in enumerate([4, 5, 2, 3]):
        for e in range(E):
            np.testing.assert_array_equal(state.obs[slot, e], _code(t, e))
            assert float(state.reward[slot, e]) == t + 0.5 * e
            assert float(state.discount[slot, e]) == 0.5 + 0.25 * e
            assert int(state.action[slot, e]) == (t + e) % 3
            assert int(state.offset[slot, e]) == 1 + e
            assert bool(state.valid[slot, e]) == (e == 0 or t % 2 == 0)


@pytest.mark.parametrize(
    "obs_dtype", [jnp.uint8, jnp.float32, jnp.int32, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name
)
def test_obs_dtype_is_kept(obs_dtype):
    ring = make_ring(4 * E, E, OBS, obs_dtype, 1)
    state = ring.add(
        ring.add(ring.init(), _row(0, obs_dtype=obs_dtype)), _row(1, obs_dtype=obs_dtype)
    )
    assert state.obs.dtype == obs_dtype
    batch = ring.sample_uniform(state, jax.random.key(0), 4)
    assert batch.obs.dtype == obs_dtype and batch.next_obs.dtype == obs_dtype
    assert batch.action.dtype == jnp.int32 and batch.reward.dtype == jnp.float32
    assert batch.discount.dtype == jnp.float32 and batch.weight.dtype == jnp.float32
    assert batch.index.dtype == jnp.int32
    np.testing.assert_array_equal(
        np.asarray(batch.obs[:, 0], np.float32), _code(0, np.asarray(batch.index) % E)
    )


def test_add_rejects_other_obs_shape():
    ring = make_ring(4 * E, E, OBS, jnp.uint8, 1)
    bad = _row(0)._replace(obs=jnp.zeros((E, 4), jnp.uint8))
    with pytest.raises(AssertionError):
        ring.add(ring.init(), bad)


@pytest.mark.parametrize(
    "capacity, num_envs, n_step",
    [
        pytest.param(7, 2, 1, id="not-multiple"),
        pytest.param(10, 4, 1, id="not-multiple-4"),
        pytest.param(2, 2, 1, id="one-slot"),
        pytest.param(6, 2, 3, id="n_step-3-needs-4-slots"),
    ],
)
def test_capacity_validation(capacity, num_envs, n_step):
    with pytest.raises(
        ValueError, match=rf"ReplayConfig\.capacity={capacity} .*num_envs={num_envs}"
    ):
        make_ring(capacity, num_envs, OBS, jnp.uint8, n_step)
    make_ring(num_envs * (n_step + 1), num_envs, OBS, jnp.uint8, n_step)  # the smallest allowed


# --------------------------------------------------------------------------- gather


def test_gather_bootstraps_offset_rows_later_in_same_env_across_the_wrap():
    # 5 slots, n = 2; env 0 rows bootstrap 1 slot ahead, env 1 rows 2 slots ahead. After 8
    # writes slots hold writes [5, 6, 7, 3, 4]: write 3 (slot 3) bootstraps from write 5
    # (slot 0) in env 1, across the wrap.
    slots, n = 5, 2
    ring = _ring(slots, n)
    state = _fill(ring, [_row(t, offset=(1, 2)) for t in range(8)])
    flat = jnp.arange(slots * E, dtype=jnp.int32)
    batch = jax.tree.map(np.asarray, ring.gather(state, flat))
    writes = [5, 6, 7, 3, 4]
    for i in range(slots * E):
        slot, e = divmod(i, E)
        t = writes[slot]
        assert tuple(_decode(batch.obs[i, 0])) == (t, e)
        assert batch.index[i] == i
        assert batch.reward[i] == t + 0.5 * e and batch.discount[i] == 0.5 + 0.25 * e
        assert batch.action[i] == (t + e) % 3 and batch.weight[i] == 1.0
        if t + 1 + e <= 7:  # the bootstrap row is written (the sampleable rows at least)
            assert tuple(_decode(batch.next_obs[i, 0])) == (t + 1 + e, e), (slot, e)
    assert int(ring.sampleable_slots(state)) == 3  # writes 3, 4, 5: all have their bootstrap


def test_gather_weight_is_valid_flag():
    ring = _ring(4, 1)
    state = _fill(ring, [_row(t, valid=(t != 1, t != 2)) for t in range(4)])
    batch = ring.gather(state, jnp.arange(8, dtype=jnp.int32))
    np.testing.assert_array_equal(batch.weight, [1, 1, 0, 1, 1, 0, 1, 1])


# --------------------------------------------------------------------------- uniform sampling


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("writes", [2, 5, 11], ids=lambda w: f"{w}-writes")
def test_uniform_never_returns_newest_n_or_unwritten_and_covers_the_rest(n, writes):
    slots = 6
    ring = _ring(slots, n)
    invalid = {(1, 0), (4, 1), (8, 0), (9, 1)}  # (write, env) of reset-like rows
    rows = [_row(t, valid=tuple((t, e) not in invalid for e in range(E))) for t in range(writes)]
    state = _fill(ring, rows)
    batch = _draws(ring, state)
    oldest, newest = max(0, writes - slots), writes - 1
    sampleable = {(t, e) for t in range(oldest, newest - n + 1) for e in range(E)}
    if not sampleable:  # nothing complete yet: every draw has weight 0
        np.testing.assert_array_equal(batch.weight, 0.0)
        return
    t, e = _decode(batch.obs[:, 0])
    drawn = list(zip(t.tolist(), e.tolist(), strict=True))
    assert set(drawn) == sampleable  # fixed seed: every complete row, nothing else
    np.testing.assert_array_equal(batch.index, (t % slots) * E + e)
    np.testing.assert_array_equal(batch.weight, [float(p not in invalid) for p in drawn])
    np.testing.assert_array_equal(batch.reward, t + 0.5 * e)
    np.testing.assert_array_equal(_decode(batch.next_obs[:, 0]), (t + 1, e))
    # uniform over the complete rows
    chi2, dof = _chi2_uniform(batch.index, sorted((t % slots) * E + e for t, e in sampleable))
    assert chi2 < CHI2_999[dof], (chi2, np.bincount(batch.index))


@pytest.mark.parametrize("writes", [10, 40], ids=["partial", "wrapped"])
def test_uniform_sampling_is_uniform_over_exactly_the_sampleable_rows(writes):
    """51,200 draws against the uniform distribution over the complete rows (chi-square, 99.9%).

    A sampler that left out the newest complete slot would leave 2 expected ~2,000-draw rows
    empty (chi-square > 3,900); one that took in the oldest incomplete slot, or an unwritten or
    overwritten one, draws a row outside the set; uneven odds (e.g. a modulo bias) show in the
    statistic.
    """
    slots, n = 16, 3
    ring = _ring(slots, n, jnp.float32)  # obs codes past 255
    state = _fill(ring, [_row(t, obs_dtype=jnp.float32) for t in range(writes)])
    batch = _draws(ring, state, num_keys=200, batch_size=256)
    complete = range(max(0, writes - slots), writes - n)  # writes whose bootstrap row exists
    rows = sorted((t % slots) * E + e for t in complete for e in range(E))
    assert len(rows) == E * min(writes - n, slots - n)
    chi2, dof = _chi2_uniform(batch.index, rows)
    assert chi2 < CHI2_999[dof], (chi2, np.bincount(batch.index))
    t, e = _decode(batch.obs[:, 0])
    np.testing.assert_array_equal(batch.index, (t % slots) * E + e)  # rows are what they say


# --------------------------------------------------------------------------- through make_buffer


def _example(num_envs=E) -> Transition:
    sds = jax.ShapeDtypeStruct
    return Transition(
        obs=sds((num_envs, *OBS), jnp.uint8),
        action=sds((num_envs,), jnp.int32),
        reward=sds((num_envs,), jnp.float32),
        terminated=sds((num_envs,), bool),
        truncated=sds((num_envs,), bool),
        reset=sds((num_envs,), bool),
    )


def _step(t) -> Transition:
    return Transition(
        obs=jnp.stack([jnp.full(OBS, _code(t, e), jnp.uint8) for e in range(E)]),
        action=jnp.array([(t + e) % 3 for e in range(E)], jnp.int32),
        reward=jnp.array([t + 0.5 * e for e in range(E)], jnp.float32),
        terminated=jnp.zeros((E,), bool),
        truncated=jnp.zeros((E,), bool),
        reset=jnp.zeros((E,), bool),
    )


def test_make_buffer_uniform_wraps_and_keeps_n_step_rows_right():
    slots, n, gamma = 6, 2, 0.5
    buffer = make_buffer(
        ReplayConfig(capacity=slots * E, batch_size=12, n_step=n), _example(), gamma=gamma
    )
    add, can_sample = jax.jit(buffer.add), jax.jit(buffer.can_sample)
    state = buffer.init()
    assert state.priorities is None and float(state.max_priority) == 1.0
    for i in range(11):
        state = add(state, _step(i))
        # add i commits step i - 1; a slot is complete once n later slots are written
        assert bool(can_sample(state)) == (i >= n), i
    # slots hold adds 6, 7, 8, 9, 10, 5 = steps 5, 6, 7, 8, 9, 4; steps 4..7 are complete.
    keys = jax.random.split(jax.random.key(1), 32)
    batch = jax.jit(jax.vmap(buffer.sample, in_axes=(None, 0)))(state, keys)
    batch = jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), batch)
    t, e = _decode(batch.obs[:, 0])
    assert set(zip(t.tolist(), e.tolist(), strict=True)) == {
        (s, v) for s in range(4, 8) for v in (0, 1)
    }
    np.testing.assert_array_equal(batch.weight, 1.0)
    np.testing.assert_array_equal(batch.reward, (t + 0.5 * e) + gamma * (t + 1 + 0.5 * e))
    np.testing.assert_array_equal(batch.discount, gamma**2)
    np.testing.assert_array_equal(_decode(batch.next_obs[:, 0]), (t + 2, e))  # step 4 wraps
    np.testing.assert_array_equal(batch.index, ((t + 1) % slots) * E + e)


def test_make_buffer_uniform_update_priorities_only_counts():
    buffer = make_buffer(ReplayConfig(capacity=4 * E, batch_size=4), _example())
    state = buffer.add(buffer.init(), _step(0))
    new = buffer.update_priorities(state, jnp.zeros(4, jnp.int32), jnp.ones(4))
    assert new.priorities is None and int(new.updates) == int(state.updates) + 1
    jax.tree.map(np.testing.assert_array_equal, new.ring, state.ring)


def test_make_buffer_no_sample_before_a_complete_row():
    buffer = make_buffer(ReplayConfig(capacity=4 * E, batch_size=8), _example())
    state = buffer.add(buffer.init(), _step(0))
    assert not bool(buffer.can_sample(state))
    np.testing.assert_array_equal(buffer.sample(state, jax.random.key(0)).weight, 0.0)


@pytest.mark.slow
def test_vmapped_seeds_share_the_cursor():
    buffer = make_buffer(ReplayConfig(capacity=4 * E, batch_size=4), _example())
    axes = buffer.seed_axes
    init = jax.vmap(lambda _: buffer.init(), axis_size=2, out_axes=axes)(jnp.arange(2))
    assert init.ring.obs.shape == (2, 4, E, *OBS)
    assert init.ring.insert_pos.shape == () and init.ring.size.shape == ()
    tr = jax.tree.map(lambda a, b: jnp.stack([a, b]), _step(0), _step(7))
    state = jax.vmap(buffer.add, in_axes=(axes, 0), out_axes=axes)(init, tr)
    state = jax.vmap(buffer.add, in_axes=(axes, 0), out_axes=axes)(state, tr)
    assert int(state.ring.insert_pos) == 2 and int(state.ring.size) == 2
    np.testing.assert_array_equal(state.ring.obs[0, 1, :, 0], [_code(0, 0), _code(0, 1)])
    np.testing.assert_array_equal(state.ring.obs[1, 1, :, 0], [_code(7, 0), _code(7, 1)])


# ---- frame deduplication (synthetic stacks; the envpool tests check real Atari stacks) ------
K, FRAME = 4, (2, 3)


def _stack_stream(steps, starts, seed=0):
    return stack_stream(steps, E, starts, frame=FRAME, k=K, seed=seed)


def _dedup_rows(stream, capacity, n_step=1):
    ring = make_ring(capacity, E, (*FRAME, K), jnp.uint8, n_step, frame_stack=K)
    add = jax.jit(ring.add)
    state = ring.init()
    for t in range(stream.shape[0]):
        row = StoredRow(
            obs=jnp.asarray(stream[t]),
            action=jnp.zeros(E, jnp.int32),
            reward=jnp.zeros(E),
            discount=jnp.ones(E),
            offset=jnp.ones(E, jnp.int8),
            valid=jnp.ones(E, bool),
        )
        state = add(state, row)
    return ring, state


@pytest.mark.slow
def test_frame_dedup_stores_one_frame_and_rebuilds_stacks_bitwise():
    starts = {(3, 0), (4, 1), (9, 0), (10, 0)}  # incl. a one-step episode
    stream = _stack_stream(16, starts)
    ring, state = _dedup_rows(stream, capacity=20 * E)
    assert state.obs.shape == (20, E, *FRAME)
    assert int(state.stack_mismatches) == 0
    fresh = {(t, e) for t in range(16) for e in range(E) if bool(state.fresh[t, e])}
    assert fresh == starts | {(0, 0), (0, 1)}
    batch = ring.gather(state, jnp.arange(15 * E, dtype=jnp.int32))
    np.testing.assert_array_equal(batch.obs, stream[:15].reshape(-1, *FRAME, K))
    np.testing.assert_array_equal(batch.next_obs, stream[1:16].reshape(-1, *FRAME, K))


def test_frame_dedup_counts_stacks_it_cannot_rebuild():
    stream = _stack_stream(6, set())
    stream[4, 1, ..., 0] ^= 1  # neither a continuation nor K copies
    _, state = _dedup_rows(stream, capacity=10 * E)
    assert int(state.stack_mismatches) == 1


def test_frame_dedup_validation_and_bytes():
    with pytest.raises(ValueError, match="last axis stacks 4 frames"):
        make_ring(10 * E, E, (2, 3, 3), jnp.uint8, 1, frame_stack=4)
    with pytest.raises(ValueError, match="at least 12 rows"):
        make_ring(5 * E, E, (2, 3, 4), jnp.uint8, 1, frame_stack=4)
    assert row_bytes((84, 84, 4), jnp.uint8, 4) == 84 * 84 + 1 + 14


def test_frame_dedup_per_zeroes_the_slots_that_lose_their_frames():
    example = Transition(
        obs=jnp.zeros((E, *FRAME, K), jnp.uint8),
        action=jnp.zeros(E, jnp.int32),
        reward=jnp.zeros(E),
        terminated=jnp.zeros(E, bool),
        truncated=jnp.zeros(E, bool),
        reset=jnp.zeros(E, bool),
    )
    slots = 8
    cfg = ReplayConfig(capacity=slots * E, batch_size=4, prioritised=True, sampler="cumsum")
    buffer = make_buffer(cfg, example, frame_stack=K)
    add = jax.jit(buffer.add)
    stream = _stack_stream(20, set())
    state = buffer.init()
    for t in range(20):
        state = add(state, example._replace(obs=jnp.asarray(stream[t])))
    prio = np.asarray(state.priorities).reshape(slots, E)
    pos = int(state.ring.insert_pos)
    lost = [(pos + j) % slots for j in range(K - 1)]  # the K - 1 oldest slots
    newest = (pos - 1) % slots  # waits for its successor
    assert np.all(prio[lost] == 0) and np.all(prio[newest] == 0)
    live = [s for s in range(slots) if s not in lost and s != newest]
    assert np.all(prio[live] > 0) and len(live) == slots - (K - 1) - 1
    batch = jax.jit(buffer.sample)(state, jax.random.key(0))
    assert batch.obs.shape == (4, *FRAME, K)
