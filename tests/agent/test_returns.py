"""`agent.returns.lambda_returns` against rlax and against the forward view (a weighted mix of
n-step returns, cut at episode ends and at the rollout's end), across terminations and
truncations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from jaxrl_fast.agent.returns import lambda_returns


def _forward_view(r, term, trunc, v, gamma, lam):
    """G_t = sum_n (1 - lam) lam^(n-1) G_t^(n), the n-step returns stopping at a termination
    (no bootstrap), at a truncation (bootstrap from the final observation's value) and at the
    rollout's end, the last of them taking the remaining weight."""
    out = []
    for t in range(len(r)):
        returns, acc, disc = [], 0.0, 1.0
        for k in range(t, len(r)):
            acc += disc * r[k]
            if term[k]:
                returns.append(acc)
                break
            returns.append(acc + disc * gamma * v[k])
            if trunc[k]:
                break
            disc *= gamma
        last = len(returns) - 1
        g = sum((1 - lam) * lam**n * returns[n] for n in range(last)) + lam**last * returns[last]
        out.append(g)
    return np.asarray(out)


def _rollout(seed, t=9, e=3, p_term=0.2, p_trunc=0.15):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(t, e)).astype(np.float32)
    v = rng.normal(size=(t, e)).astype(np.float32)
    term = rng.random((t, e)) < p_term
    trunc = (rng.random((t, e)) < p_trunc) & ~term
    return r, term, trunc, v


@pytest.mark.parametrize("lam", [0.0, 0.65, 1.0])
def test_equals_rlax_with_discounts_zeroed_at_terminations(lam):
    r, term, _, v = _rollout(0)
    no_trunc = np.zeros_like(term)
    got = np.asarray(lambda_returns(r, term, no_trunc, v, 0.9, lam))
    for e in range(r.shape[1]):
        want = rlax.lambda_returns(r[:, e], 0.9 * (1.0 - term[:, e]), v[:, e], lam)
        np.testing.assert_allclose(got[:, e], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_equals_the_forward_view_across_terminations_and_truncations(lam):
    r, term, trunc, v = _rollout(1, t=12, e=4)
    assert term.any() and trunc.any()
    got = np.asarray(jax.jit(lambda_returns)(r, term, trunc, v, 0.95, lam))
    for e in range(r.shape[1]):
        want = _forward_view(r[:, e], term[:, e], trunc[:, e], v[:, e], 0.95, lam)
        np.testing.assert_allclose(got[:, e], want, rtol=1e-5, atol=1e-5)
    # rlax with lambda zeroed where an episode was truncated gives the same
    for e in range(r.shape[1]):
        want = rlax.lambda_returns(r[:, e], 0.95 * (1.0 - term[:, e]), v[:, e],
                                   lam * (1.0 - trunc[:, e]))  # fmt: skip
        np.testing.assert_allclose(got[:, e], want, rtol=1e-5, atol=1e-5)


def test_one_step_targets_at_lambda_zero_and_a_per_step_gamma():
    r, term, trunc, v = _rollout(2)
    gamma = np.linspace(0.5, 0.99, r.shape[0], dtype=np.float32)[:, None]  # a gamma schedule
    got = np.asarray(lambda_returns(r, term, trunc, v, gamma, 0.0))
    np.testing.assert_allclose(got, r + np.where(term, 0.0, gamma) * v, rtol=1e-6)


def test_no_gradient_flows_into_the_values():
    r, term, trunc, v = _rollout(3)
    grad = jax.grad(lambda v: jnp.sum(lambda_returns(r, term, trunc, v, 0.9, 0.5)))(v)
    np.testing.assert_array_equal(grad, np.zeros_like(v))
