"""Sequence replay for recurrent agents (`replay/sequence.py`) and the n-step targets the
recurrent loss computes over a sequence (`sequence_loss.sequence_targets`), checked against L1
staging's plain-Python reference."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_staging import _reference, _sequence

from jaxrl_fast.agent.sequence_loss import sequence_targets
from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.replay import make_buffer
from jaxrl_fast.types import Transition

# ------------------------------------------------------------------------------ targets


@pytest.mark.parametrize("n", [1, 2, 3])
def test_sequence_targets_equal_the_staging_reference(n):
    gamma = 0.5
    seq = _sequence()
    ref = _reference(seq, n, gamma)
    steps = seq.reward.shape[0]
    length = steps - n
    for e in range(seq.reward.shape[1]):
        reward = seq.reward[:, e][None]
        discount = 1.0 - seq.terminated[:, e][None].astype(jnp.float32)
        valid = ~seq.reset[:, e][None]
        ret, offset, factor = (
            np.asarray(x)[0] for x in sequence_targets(reward, discount, valid, length, n, gamma)
        )
        checked = 0
        for t in range(length):
            want = ref[(t, e)]
            if want is None:  # a reset step: masked by the loss
                continue
            assert (ret[t], factor[t], offset[t]) == pytest.approx(want), (t, e)
            checked += 1
        assert checked >= length - 3


# ------------------------------------------------------------------------------ replay


def _seq_example(num_envs=2, hidden=3):
    flag = jnp.zeros(num_envs, bool)
    return Transition(
        jnp.zeros((num_envs, 2)),
        jnp.zeros(num_envs, jnp.int32),
        jnp.zeros(num_envs),
        flag,
        flag,
        flag,
        carry=jnp.zeros((num_envs, 2, hidden)),
    )


def test_sequence_buffer_samples_consecutive_written_steps_of_one_env():
    cfg = ReplayConfig(capacity=2 * 12, batch_size=24, n_step=2, sequence_length=3, burn_in=1)
    window = 1 + 3 + 2
    buf = make_buffer(cfg, _seq_example())
    state = buf.init()
    add = jax.jit(buf.add)
    sample = jax.jit(buf.sample)
    for t in range(30):  # wraps the 12-slot ring twice
        code = jnp.array([100 * t, 100 * t + 1], jnp.float32)  # (t, e) in every field
        step = _seq_example()._replace(
            obs=jnp.stack([code, code], axis=1),
            reward=code,
            reset=jnp.array([t % 5 == 4, False]),
            carry=jnp.broadcast_to(code[:, None, None], (2, 2, 3)),
        )
        state = add(state, step)
        batch = sample(state, jax.random.key(t))
        if t + 1 < window:
            assert float(batch.weight.max()) == 0.0  # no whole window written yet
            continue
        assert batch.obs.shape == (24, window, 2) and batch.carry.shape == (24, 2, 3)
        np.testing.assert_array_equal(batch.weight, 1.0)
        codes = np.asarray(batch.reward).astype(int)  # [B, W]
        env, first = codes[:, 0] % 100, codes[:, 0] // 100
        np.testing.assert_array_equal(codes % 100, env[:, None].repeat(window, 1))
        np.testing.assert_array_equal(codes // 100, first[:, None] + np.arange(window))
        assert first.min() >= max(t + 1 - 12, 0) and (first + window - 1).max() <= t
        np.testing.assert_array_equal(batch.carry[:, 0, 0], codes[:, 0])
        np.testing.assert_array_equal(batch.obs[..., 0], codes)
        # env 0's every fifth step is a reset step
        want_valid = ~((codes // 100) % 5 == 4) | (env[:, None] == 1)
        np.testing.assert_array_equal(batch.valid, want_valid)
    # every window start in [18, 24] of both envs is drawn, and no other
    starts = set()
    for i in range(8):
        codes = np.asarray(sample(state, jax.random.key(100 + i)).reward[:, 0]).astype(int)
        starts |= set(zip(codes // 100, codes % 100, strict=True))
    assert starts == {(f, e) for f in range(18, 25) for e in (0, 1)}


def test_sequence_buffer_refusals():
    plain = _seq_example()._replace(carry=None)
    cfg = ReplayConfig(capacity=24, batch_size=4, sequence_length=3)
    with pytest.raises(ValueError, match="no carry; set NetworkConfig.lstm"):
        make_buffer(cfg, plain)
    with pytest.raises(ValueError, match="dedup_frames=False"):
        make_buffer(cfg, _seq_example(), frame_stack=4)
