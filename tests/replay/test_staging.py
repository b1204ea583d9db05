"""L1 n-step staging (`jaxrl_fast.replay.staging`) checked against hand-computed rows.

The hand-made sequence below has two envs and follows the next-step auto-reset contract of
`envs/base.py`: the step after a done is a reset step (reward 0, flags off) whose *obs* is the
real final observation of the episode that just ended, and the step after that starts the new
episode. Every expected number is written out by hand (gamma = 0.5, so every return is exact in
float32) and cross-checked with a plain-Python reference on random episodes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.envs.base import EnvSpec, make_batched_env
from jaxrl_fast.replay import make_buffer, make_ring, staging
from jaxrl_fast.types import Transition

E = 2
OBS = (2,)
GAMMA = 0.5
SLOTS = 16  # ring slots for the buffer tests: no wrap-around in 14 adds

# ---------------------------------------------------------------------------- the sequence
# Hand-made steps t = 0..9 of two envs, then steps 10..13 with reward 1 and no episode end.
#
# env 0: episode A = t0, t1 (terminated at t1); t2 is a reset step (its obs is A's terminal
#        obs); episode B = t3, t4, t5 (truncated at t5); t6 is a reset step (its obs is B's
#        real final obs, the one a truncation bootstraps from); episode C from t7.
# env 1: episode A = t0..t3 (truncated at t3); t4 reset step; episode B = t5..t7 (terminated
#        at t7); t8 reset step; episode C from t9.
REWARD = [
    [1, 2, 0, 3, 4, 5, 0, 7, 8, 9, 1, 1, 1, 1],
    [1, 2, 3, 4, 0, 5, 6, 7, 0, 8, 1, 1, 1, 1],
]
TERMINATED = {(1, 0), (7, 1)}
TRUNCATED = {(5, 0), (3, 1)}
RESETS = {(2, 0), (6, 0), (4, 1), (8, 1)}
STEPS = len(REWARD[0])

# Expected committed rows by hand: HAND[n][e][t] = (n-step return, discount, offset k) or None
# for a reset row (not a transition). Listed for every t whose window t..t+n-1 lies in 0..9.
HAND = {
    1: [
        # t0        t1 term     t2 reset  t3      t4         t5 trunc
        [
            (1, 0.5, 1),
            (2, 0, 1),
            None,
            (3, 0.5, 1),
            (4, 0.5, 1),
            (5, 0.5, 1),
            None,
            (7, 0.5, 1),
            (8, 0.5, 1),
            (9, 0.5, 1),
        ],  # fmt: skip
        # t0            t1          t2          t3 trunc    t4 reset
        [
            (1, 0.5, 1),
            (2, 0.5, 1),
            (3, 0.5, 1),
            (4, 0.5, 1),
            None,
            (5, 0.5, 1),
            (6, 0.5, 1),
            (7, 0, 1),
            None,
            (8, 0.5, 1),
        ],  # fmt: skip
    ],
    2: [
        # t0: 1 + .5*2, ends terminated inside the window -> no bootstrap
        # t4: 4 + .5*5, truncated at t5 -> bootstrap gamma^2 from t6 (B's real final obs)
        # t5: 5, truncated -> gamma from t6
        [
            (2, 0, 2),
            (2, 0, 1),
            None,
            (5, 0.25, 2),
            (6.5, 0.25, 2),
            (5, 0.5, 1),
            None,
            (11, 0.25, 2),
            (12.5, 0.25, 2),
        ],  # fmt: skip
        # t2: 3 + .5*4, truncated at t3 -> gamma^2 from t4; t6: 6 + .5*7, terminated at t7
        [
            (2, 0.25, 2),
            (3.5, 0.25, 2),
            (5, 0.25, 2),
            (4, 0.5, 1),
            None,
            (8, 0.25, 2),
            (9.5, 0, 2),
            (7, 0, 1),
        ],  # fmt: skip
    ],
    3: [
        # t0: 1 + .5*2 (stops at the termination: the reset row t2 is not summed)
        # t3: 3 + .5*4 + .25*5, truncated at t5 -> gamma^3 from t6
        [
            (2, 0, 2),
            (2, 0, 1),
            None,
            (6.25, 0.125, 3),
            (6.5, 0.25, 2),
            (5, 0.5, 1),
            None,
            (13.25, 0.125, 3),
        ],  # fmt: skip
        # t1: 2 + .5*3 + .25*4, truncated at t3 -> gamma^3 from t4
        # t5: 5 + .5*6 + .25*7, terminated at t7 -> 0
        [
            (2.75, 0.125, 3),
            (4.5, 0.125, 3),
            (5, 0.25, 2),
            (4, 0.5, 1),
            None,
            (9.75, 0, 3),
            (9.5, 0, 2),
            (7, 0, 1),
        ],  # fmt: skip
    ],
}


def _code(t, e):
    """Unique observation value of env `e` at step `t` (fits uint8)."""
    return 10 * t + e + 1


def _decode(value):
    value = np.asarray(value, np.int64)
    return (value - 1) // 10, (value - 1) % 10


def _sequence(
    reward=REWARD, terminated=TERMINATED, truncated=TRUNCATED, resets=RESETS
) -> Transition:
    """The steps as one `Transition` with leading `[T, E]`."""
    num_steps, num_envs = len(reward[0]), len(reward)
    te = [[(t, e) for e in range(num_envs)] for t in range(num_steps)]
    flag = lambda s: jnp.array([[p in s for p in row] for row in te])  # noqa: E731
    obs = np.array([[_code(t, e)] * OBS[0] for t, e in sum(te, [])], np.uint8)
    return Transition(
        obs=jnp.asarray(obs.reshape(num_steps, num_envs, *OBS)),
        action=jnp.array([[(t + e) % 3 for e in range(num_envs)] for t in range(num_steps)]),
        reward=jnp.asarray(np.array(reward, np.float32).T),
        terminated=flag(terminated),
        truncated=flag(truncated),
        reset=flag(resets),
    )


def _reference(seq: Transition, n: int, gamma: float) -> dict:
    """Plain-Python n-step rows: {(t, e): (return, discount, offset) or None} (None: reset)."""
    reward = np.asarray(seq.reward, np.float64)
    term, trunc, reset = (np.asarray(x) for x in (seq.terminated, seq.truncated, seq.reset))
    num_steps, num_envs = reward.shape
    rows = {}
    for e in range(num_envs):
        for t in range(num_steps - n + 1):
            if reset[t, e]:
                rows[(t, e)] = None
                continue
            ret, discount, k = 0.0, None, 0
            for i in range(n):
                ret += gamma**i * reward[t + i, e]
                k = i + 1
                if term[t + i, e]:
                    discount = 0.0
                    break
                if trunc[t + i, e]:
                    break
            rows[(t, e)] = (ret, gamma**k if discount is None else discount, k)
    return rows


@functools.lru_cache(maxsize=None)
def _run_staging(n: int, gamma: float, num_envs: int):
    """A jitted scan that stages a `[T, E]` sequence and returns the `[T, E]` committed rows."""
    example = jax.tree.map(lambda x: x[0], _sequence())
    example = jax.tree.map(lambda x: jnp.zeros((num_envs, *x.shape[1:]), x.dtype), example)

    @jax.jit
    def run(seq):
        def body(state, step):
            return staging.stage(state, step, gamma)

        return jax.lax.scan(body, staging.init(n, example), seq)

    return run


def _rows_as_dict(rows, n):
    """Committed rows `[T, E]` -> {(t, e): (return, discount, offset) or None}, placeholders
    (the first n - 1 commits) dropped after checking that they are invalid."""
    rows = jax.tree.map(np.asarray, rows)
    assert not rows.valid[: n - 1].any(), "a warm-up placeholder was committed as valid"
    out = {}
    for i in range(n - 1, rows.valid.shape[0]):
        t = i - (n - 1)
        for e in range(rows.valid.shape[1]):
            out[(t, e)] = (
                (float(rows.reward[i, e]), float(rows.discount[i, e]), int(rows.offset[i, e]))
                if rows.valid[i, e]
                else None
            )
            assert int(_decode(rows.obs[i, e, 0])[0]) == t, "row holds the wrong step's obs"
    return out


# ---------------------------------------------------------------------------- staging alone


@pytest.mark.parametrize("n", [1, 2, 3])
def test_stage_matches_hand_computed_rows(n):
    _, rows = _run_staging(n, GAMMA, E)(_sequence())
    got = _rows_as_dict(rows, n)
    for e in range(E):
        for t, expected in enumerate(HAND[n][e]):
            assert got[(t, e)] == expected, (n, t, e)  # exact: gamma = 0.5


@pytest.mark.parametrize("n", [1, 2, 3])
def test_reference_agrees_with_hand_table(n):
    # The plain-Python reference used on random episodes below reproduces the hand table.
    ref = _reference(_sequence(), n, GAMMA)
    for e in range(E):
        for t, expected in enumerate(HAND[n][e]):
            assert ref[(t, e)] == expected, (n, t, e)


def test_n1_is_plain_dqn():
    seq = _sequence()
    _, rows = _run_staging(1, GAMMA, E)(seq)
    term = np.asarray(seq.terminated)
    np.testing.assert_array_equal(rows.reward, np.asarray(seq.reward))
    np.testing.assert_array_equal(rows.discount, GAMMA * (1.0 - term))
    np.testing.assert_array_equal(rows.offset, 1)
    np.testing.assert_array_equal(rows.obs, seq.obs)
    np.testing.assert_array_equal(rows.action, seq.action)
    np.testing.assert_array_equal(rows.valid, ~np.asarray(seq.reset))


def test_warm_up_placeholders_are_invalid_then_real_rows_follow():
    n = 3
    _, rows = _run_staging(n, GAMMA, E)(_sequence())
    valid = np.asarray(rows.valid)
    np.testing.assert_array_equal(valid[: n - 1], False)
    np.testing.assert_array_equal(valid[n - 1], True)  # step 0 of both envs


def _random_episodes(seed, num_steps, num_envs):
    """Random steps that follow the auto-reset contract, as `_sequence` arguments."""
    rng = np.random.default_rng(seed)
    reward = np.round(rng.normal(size=(num_envs, num_steps)), 2)
    terminated, truncated, resets = set(), set(), set()
    for e in range(num_envs):
        ended = False
        for t in range(num_steps):
            if ended:  # the step after a done is a reset step: reward 0, no flags
                resets.add((t, e))
                reward[e, t] = 0.0
                ended = False
                continue
            u = rng.random()
            if u < 0.15:
                terminated.add((t, e))
                ended = True
            elif u < 0.25:
                truncated.add((t, e))
                ended = True
    return reward.tolist(), terminated, truncated, resets


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_stage_matches_plain_python_reference_on_random_episodes(n):
    gamma = 0.9
    seq = _sequence(*_random_episodes(n, 25, 4))  # 25 steps: obs codes fit uint8
    _, rows = _run_staging(n, gamma, 4)(seq)
    got = _rows_as_dict(rows, n)
    ref = _reference(seq, n, gamma)
    assert got.keys() == ref.keys()
    assert sum(v is None for v in ref.values()) > 3 and sum(v[1] == 0 for v in ref.values() if v)
    for key, expected in ref.items():
        if expected is None:
            assert got[key] is None, key
        else:
            np.testing.assert_allclose(
                got[key][:2], expected[:2], rtol=1e-6, atol=1e-6, err_msg=str(key)
            )
            assert got[key][2] == expected[2], key


def test_two_episodes_are_never_mixed():
    # Mark the steps around every episode boundary: 100 on each reset row (the env gives 0
    # there; 100 makes a leak visible) and 1000 on each new episode's first step. Only the row
    # of that first step may contain the 1000, and no valid row may contain the 100.
    reward = [list(r) for r in REWARD]
    for t, e in RESETS:
        reward[e][t] = 100.0
        reward[e][t + 1] = 1000.0
    seq = _sequence(reward)
    for n in (1, 2, 3):
        _, rows = _run_staging(n, GAMMA, E)(seq)
        for (t, e), row in _rows_as_dict(rows, n).items():
            if row is None:
                assert (t, e) in RESETS
            elif (t - 1, e) in RESETS:
                assert 1000 <= row[0] < 1020, ((t, e), row)
            else:
                assert row[0] < 20, ((t, e), row)


# ---------------------------------------------------------------------------- through make_buffer


@functools.lru_cache(maxsize=None)
def _filled_buffer(n: int):
    """make_buffer (uniform) after adding the whole sequence; returns (buffer, state, ring)."""
    example = jax.tree.map(lambda x: x[0], _sequence())
    config = ReplayConfig(capacity=SLOTS * E, batch_size=32, n_step=n)
    buffer = make_buffer(config, example, gamma=GAMMA)

    @jax.jit
    def fill(seq):
        return jax.lax.scan(lambda s, x: (buffer.add(s, x), None), buffer.init(), seq)[0]

    state = fill(_sequence())
    ring = make_ring(SLOTS * E, E, OBS, jnp.uint8, n)
    return buffer, state, ring._replace(gather=jax.jit(ring.gather))


def _expected_row(n, t, e):
    """The hand row of step t (or the reference row for steps past the hand table)."""
    if t < len(HAND[n][e]):
        return HAND[n][e][t]
    return _sequence_reference(n)[(t, e)]


@functools.lru_cache(maxsize=None)
def _sequence_reference(n: int) -> dict:
    return _reference(_sequence(), n, GAMMA)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_buffer_rows_have_exact_return_discount_and_next_obs(n):
    buffer, state, ring = _filled_buffer(n)
    # Slot s holds step s - (n - 1); slots 0 .. size - n - 1 are complete (bootstrap row written).
    assert int(state.ring.size) == STEPS and int(ring.sampleable_slots(state.ring)) == STEPS - n
    flat = jnp.arange((STEPS - n) * E, dtype=jnp.int32)
    batch = jax.tree.map(np.asarray, ring.gather(state.ring, flat))
    checked = 0
    for i in range(flat.shape[0]):
        slot, e = divmod(i, E)
        t = slot - (n - 1)
        if t < 0:  # warm-up placeholder
            assert batch.weight[i] == 0.0
            continue
        assert tuple(_decode(batch.obs[i, 0])) == (t, e)
        expected = _expected_row(n, t, e)
        if expected is None:  # reset row
            assert batch.weight[i] == 0.0, (t, e)
            continue
        ret, discount, k = expected
        assert batch.weight[i] == 1.0, (t, e)
        assert batch.reward[i] == ret and batch.discount[i] == discount, (t, e)
        assert batch.action[i] == (t + e) % 3
        # next_obs: the observation k rows later in the same env column
        np.testing.assert_array_equal(batch.next_obs[i], _code(t + k, e), err_msg=str((t, e)))
        checked += 1
    assert checked >= 6 * E


def test_truncation_bootstraps_from_the_real_final_obs():
    # env 0 truncates at t5; t6 is the reset row holding episode B's real final obs.
    for n, t, k in [(1, 5, 1), (2, 4, 2), (2, 5, 1), (3, 3, 3), (3, 4, 2), (3, 5, 1)]:
        _, state, ring = _filled_buffer(n)
        flat = jnp.array([(t + n - 1) * E + 0], jnp.int32)
        batch = ring.gather(state.ring, flat)
        assert int(_decode(batch.next_obs[0, 0])[0]) == 6, (n, t)
        assert float(batch.discount[0]) == GAMMA**k, (n, t)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_buffer_samples_are_hand_rows(n):
    buffer, state, _ = _filled_buffer(n)
    keys = jax.random.split(jax.random.key(n), 64)
    batch = jax.jit(jax.vmap(buffer.sample, in_axes=(None, 0)))(state, keys)
    batch = jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), batch)
    slot, env = np.divmod(batch.index, E)
    seen = set()
    for i in range(batch.index.shape[0]):
        ti, ei = int(slot[i]) - (n - 1), int(env[i])
        seen.add((ti, ei))
        assert ti <= STEPS - 2 * n, "sampled a row whose bootstrap row is not written yet"
        expected = None if ti < 0 else _expected_row(n, ti, ei)
        if expected is None:  # warm-up placeholder or reset row
            assert batch.weight[i] == 0.0
            continue
        assert tuple(_decode(batch.obs[i, 0])) == (ti, ei)
        ret, discount, k = expected
        assert (batch.weight[i], batch.reward[i], batch.discount[i]) == (1.0, ret, discount)
        assert tuple(_decode(batch.next_obs[i, 0])) == (ti + k, ei)
    # every complete slot (placeholders included) is drawn with a fixed seed
    assert seen == {(s - (n - 1), e) for s in range(STEPS - n) for e in range(E)}


# ---------------------------------------------------------------------------- with a real env


@pytest.mark.slow
def test_real_env_truncation_row_bootstraps_from_final_obs_not_new_episode():
    # A counter env: obs = steps taken in the episode, truncated when it reaches 3. Its
    # episodes are 0 1 2 3 | 0 1 2 3 | ...; the reset row holds obs 3 (the real final obs).
    spec = EnvSpec("counter", (1,), jnp.float32, 2, E, 3)

    def reset_one(key):
        del key
        return jnp.int32(0), jnp.zeros((1,), jnp.float32)

    def step_one(key, count, action):
        del key, action
        count = count + 1
        obs = jnp.full((1,), count, jnp.float32)
        return count, obs, jnp.float32(1.0), jnp.bool_(False), count >= 3

    env = make_batched_env(spec, reset_one, step_one)
    example = Transition(
        obs=jnp.zeros((E, 1), jnp.float32),
        action=jnp.zeros((E,), jnp.int32),
        reward=jnp.zeros((E,), jnp.float32),
        terminated=jnp.zeros((E,), bool),
        truncated=jnp.zeros((E,), bool),
        reset=jnp.zeros((E,), bool),
    )
    n = 2
    buffer = make_buffer(ReplayConfig(capacity=12 * E, batch_size=8, n_step=n), example, gamma=0.5)

    @jax.jit
    def collect(key):
        env_state, obs = env.reset(key)

        def body(carry, key_step):
            env_state, obs, replay = carry
            action = jnp.zeros((E,), jnp.int32)
            env_state, next_obs, reward, _, info = env.step(key_step, env_state, action)
            tr = Transition(
                obs, action, reward, info["terminated"], info["truncated"], info["reset"]
            )
            return (env_state, next_obs, buffer.add(replay, tr)), None

        keys = jax.random.split(key, 11)
        return jax.lax.scan(body, (env_state, obs, buffer.init()), keys)[0][2]

    state = collect(jax.random.key(0))
    ring = make_ring(12 * E, E, (1,), jnp.float32, n)
    # steps 0..10: obs 0 1 2 3 0 1 2 3 0 1 2 (step 3, 7 are reset rows); slot = step + 1
    flat = jnp.arange(int(ring.sampleable_slots(state.ring)) * E, dtype=jnp.int32)
    batch = jax.tree.map(np.asarray, ring.gather(state.ring, flat))
    obs, next_obs = batch.obs[:, 0], batch.next_obs[:, 0]
    step = flat // E - (n - 1)
    for i in range(flat.shape[0]):
        t = int(step[i])
        if t < 0 or t % 4 == 3:  # placeholder or reset row
            assert batch.weight[i] == 0.0
            continue
        assert obs[i] == t % 4 and batch.weight[i] == 1.0
        # obs 1 -> 2 steps, ends by truncation at obs 2: bootstrap gamma^2 from the final obs 3
        # obs 2 -> 1 step: gamma from obs 3;  obs 0 -> 2 steps: gamma^2 from obs 2
        expected = {0: (1.5, 0.25, 2.0), 1: (1.5, 0.25, 3.0), 2: (1.0, 0.5, 3.0)}[t % 4]
        assert (batch.reward[i], batch.discount[i], next_obs[i]) == expected, t
