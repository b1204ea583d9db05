"""Device ring buffer (`jaxrl_fast.replay.ring`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay import make_buffer, make_ring_buffer
from jaxrl_fast.types import Transition

E = 2  # envs
OBS = (3,)


def _example(num_envs=E, obs_shape=OBS, obs_dtype=jnp.uint8) -> Transition:
    sds = jax.ShapeDtypeStruct
    return Transition(
        obs=sds((num_envs, *obs_shape), obs_dtype),
        action=sds((num_envs,), jnp.int32),
        reward=sds((num_envs,), jnp.float32),
        terminated=sds((num_envs,), bool),
        truncated=sds((num_envs,), bool),
        reset=sds((num_envs,), bool),
    )


def _code(t, e):
    """Unique obs value of env `e` at global step `t` (fits uint8)."""
    return 10 * t + e + 1


def _decode(value):
    return (value - 1) // 10, (value - 1) % 10


def _step(
    t, reset=(False,) * E, terminated=(False,) * E, truncated=(False,) * E, obs_dtype=jnp.uint8
):
    """The transition every env writes at global step `t`."""
    return Transition(
        obs=jnp.stack([jnp.full(OBS, _code(t, e), obs_dtype) for e in range(E)]),
        action=jnp.array([(t + e) % 3 for e in range(E)], jnp.int32),
        reward=jnp.array([t + 0.5 * e for e in range(E)], jnp.float32),
        terminated=jnp.array(terminated),
        truncated=jnp.array(truncated),
        reset=jnp.array(reset),
    )


def _draws(buffer, state, num_keys):
    """`num_keys` batches in one vmapped sample, flattened to one numpy `Batch`."""
    keys = jax.random.split(jax.random.key(0), num_keys)
    batch = jax.jit(jax.vmap(buffer.sample, in_axes=(None, 0)))(state, keys)
    return jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), batch)


def _fill(buffer, steps, **kwargs):
    add = jax.jit(buffer.add)
    state = buffer.init()
    for t in range(steps):
        state = add(state, _step(t, **kwargs))
    return state


# --------------------------------------------------------------------------- storage


def test_init_is_empty():
    buffer = make_ring_buffer(ReplayConfig(capacity=8, batch_size=4), _example())
    state = buffer.init()
    assert state.obs.shape == (4, E, *OBS) and state.obs.dtype == jnp.uint8
    assert state.action.dtype == jnp.int32 and state.reward.dtype == jnp.float32
    assert state.terminated.dtype == jnp.bool_ and state.reset.dtype == jnp.bool_
    assert int(state.size) == 0 and int(state.insert_pos) == 0
    assert not bool(buffer.can_sample(state))


def test_wrap_around_overwrites_oldest_in_order():
    slots = 4
    buffer = make_ring_buffer(ReplayConfig(capacity=slots * E, batch_size=4), _example())
    add = jax.jit(buffer.add)
    state = buffer.init()
    expected = [(1, 1), (2, 2), (3, 3), (0, 4), (1, 4), (2, 4)]  # (insert_pos, size) after each
    for t, (pos, size) in enumerate(expected):
        state = add(state, _step(t))
        assert (int(state.insert_pos), int(state.size)) == (pos, size), t
        assert bool(buffer.can_sample(state)) == (t >= 1)
    # Steps 0..5 went to slots 0,1,2,3,0,1: slots 0 and 1 now hold steps 4 and 5.
    obs = np.asarray(state.obs)
    for slot, t in enumerate([4, 5, 2, 3]):
        for e in range(E):
            np.testing.assert_array_equal(obs[slot, e], _code(t, e))
            assert float(state.reward[slot, e]) == t + 0.5 * e
            assert int(state.action[slot, e]) == (t + e) % 3


@pytest.mark.parametrize(
    "obs_dtype", [jnp.uint8, jnp.float32, jnp.int32, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name
)
def test_obs_dtype_is_kept(obs_dtype):
    buffer = make_ring_buffer(
        ReplayConfig(capacity=4 * E, batch_size=4), _example(obs_dtype=obs_dtype)
    )
    state = buffer.add(buffer.init(), _step(0, obs_dtype=obs_dtype))
    state = buffer.add(state, _step(1, obs_dtype=obs_dtype))
    assert state.obs.dtype == obs_dtype
    batch = buffer.sample(state, jax.random.key(0))
    assert batch.obs.dtype == obs_dtype and batch.next_obs.dtype == obs_dtype
    assert batch.action.dtype == jnp.int32 and batch.reward.dtype == jnp.float32
    assert batch.terminated.dtype == jnp.bool_ and batch.weight.dtype == jnp.float32
    assert batch.index.dtype == jnp.int32


def test_add_rejects_other_obs_dtype_and_shape():
    buffer = make_ring_buffer(ReplayConfig(capacity=4 * E, batch_size=4), _example())
    with pytest.raises(AssertionError):
        buffer.add(buffer.init(), _step(0, obs_dtype=jnp.float32))
    bad = _step(0)._replace(obs=jnp.zeros((E, 4), jnp.uint8))
    with pytest.raises(AssertionError):
        buffer.add(buffer.init(), bad)


@pytest.mark.parametrize(
    "capacity, num_envs",
    [
        pytest.param(7, 2, id="not-multiple"),
        pytest.param(10, 4, id="not-multiple-4"),
        pytest.param(2, 2, id="one-slot"),
        pytest.param(3, 3, id="one-slot-3"),
    ],
)
def test_capacity_validation(capacity, num_envs):
    pattern = rf"ReplayConfig\.capacity={capacity} .*num_envs={num_envs}"
    with pytest.raises(ValueError, match=pattern):
        make_ring_buffer(ReplayConfig(capacity=capacity, batch_size=1), _example(num_envs=num_envs))


def test_make_buffer_is_a_ring():
    buffer = make_buffer(ReplayConfig(capacity=4 * E, batch_size=4), _example())
    assert buffer.init().obs.shape == (4, E, *OBS)
    state = buffer.init()
    assert buffer.update_priorities(state, jnp.zeros(4, jnp.int32), jnp.ones(4)) is state


# --------------------------------------------------------------------------- sampling


# Env 0: episode A is steps 0-1 (terminates at 1), step 2 is a reset step, episode B is 3-5
#        (truncated at 5), step 6 is a reset step, episode C from 7.
# Env 1: terminates at 3, reset step at 4, then runs on.
TERMINATED = {(1, 0), (3, 1)}
TRUNCATED = {(5, 0)}
RESETS = {(2, 0), (6, 0), (4, 1)}


def _episode_step(t):
    return _step(
        t,
        reset=tuple((t, e) in RESETS for e in range(E)),
        terminated=tuple((t, e) in TERMINATED for e in range(E)),
        truncated=tuple((t, e) in TRUNCATED for e in range(E)),
    )


@pytest.mark.parametrize("steps", [3, 6, 9, 11], ids=lambda s: f"{s}-adds")
def test_next_obs_is_same_env_next_row_and_reset_rows_have_weight_zero(steps):
    slots = 6
    buffer = make_ring_buffer(ReplayConfig(capacity=slots * E, batch_size=slots * E), _example())
    add = jax.jit(buffer.add)
    state = buffer.init()
    for t in range(steps):
        state = add(state, _episode_step(t))
    newest = steps - 1
    oldest = max(0, steps - slots)
    batch = _draws(buffer, state, 40)
    # Every element of a row carries the same code.
    assert (batch.obs == batch.obs[:, :1]).all()
    t, e = _decode(batch.obs[:, 0].astype(np.int64))
    # Only written rows that have a successor: never the newest slot.
    assert ((oldest <= t) & (t < newest)).all(), sorted(set(zip(t, e, strict=True)))
    np.testing.assert_array_equal(batch.index, (t % slots) * E + e)
    # The transition's own fields.
    np.testing.assert_array_equal(batch.action, (t + e) % 3)
    np.testing.assert_array_equal(batch.reward, t + 0.5 * e)
    pairs = list(zip(t.tolist(), e.tolist(), strict=True))
    np.testing.assert_array_equal(batch.terminated, [p in TERMINATED for p in pairs])
    # next_obs is the next row of the same env.
    np.testing.assert_array_equal(batch.next_obs, np.repeat(_code(t + 1, e)[:, None], OBS[0], 1))
    # Rows written by reset steps are not transitions.
    np.testing.assert_array_equal(batch.weight, [0.0 if p in RESETS else 1.0 for p in pairs])
    seen = set(pairs)
    # The sampled rows cover exactly the rows with a successor.
    assert seen == {(t, e) for t in range(oldest, newest) for e in range(E)}


def test_weighted_rows_never_cross_an_episode_boundary():
    # A row with weight 1 goes obs -> next_obs within one episode: its successor is never the
    # first obs of a new episode. Here: the row before each reset step is the episode's final
    # transition (terminated or truncated), and the reset row itself (final obs -> new first obs)
    # has weight 0.
    slots, steps = 8, 8
    buffer = make_ring_buffer(ReplayConfig(capacity=slots * E, batch_size=16), _example())
    state = buffer.init()
    add = jax.jit(buffer.add)
    for t in range(steps):
        state = add(state, _episode_step(t))
    batch = _draws(buffer, state, 8)
    for i in range(len(batch.weight)):
        t, e = _decode(int(batch.obs[i, 0]))
        next_t, next_e = _decode(int(batch.next_obs[i, 0]))
        assert (next_t, next_e) == (t + 1, e)
        if batch.weight[i] == 1.0:
            assert (t, e) not in RESETS
        else:
            assert (t, e) in RESETS
        # A truncated row bootstraps: weight 1 and not terminated.
        if (t, e) in TRUNCATED:
            assert batch.weight[i] == 1.0 and not batch.terminated[i]


def test_before_wrap_only_written_rows_are_sampled():
    slots = 8
    buffer = make_ring_buffer(ReplayConfig(capacity=slots * E, batch_size=16), _example())
    state = _fill(buffer, 3)
    batch = _draws(buffer, state, 8)
    index = batch.index
    # Slots 0 and 1 have successors; slot 2 is the newest; slots 3..7 were never written.
    assert set(index.tolist()) == set(range(2 * E))
    np.testing.assert_array_equal(batch.weight, 1.0)


def test_single_slot_gives_weight_zero():
    buffer = make_ring_buffer(ReplayConfig(capacity=4 * E, batch_size=8), _example())
    state = _fill(buffer, 1)
    assert not bool(buffer.can_sample(state))
    batch = buffer.sample(state, jax.random.key(0))
    np.testing.assert_array_equal(batch.weight, 0.0)


def test_vmapped_seeds_share_the_cursor():
    buffer = make_ring_buffer(ReplayConfig(capacity=4 * E, batch_size=4), _example())
    axes = buffer.seed_axes
    init = jax.vmap(lambda _: buffer.init(), axis_size=2, out_axes=axes)(jnp.arange(2))
    assert init.obs.shape == (2, 4, E, *OBS)
    assert init.insert_pos.shape == () and init.size.shape == ()
    tr = jax.tree.map(lambda a, b: jnp.stack([a, b]), _step(0), _step(7))
    state = jax.vmap(buffer.add, in_axes=(axes, 0), out_axes=axes)(init, tr)
    assert int(state.insert_pos) == 1 and int(state.size) == 1
    np.testing.assert_array_equal(state.obs[0, 0, :, 0], [_code(0, 0), _code(0, 1)])
    np.testing.assert_array_equal(state.obs[1, 0, :, 0], [_code(7, 0), _code(7, 1)])
