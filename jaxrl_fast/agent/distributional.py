"""Distributional value heads and their losses: C51, QR-DQN and HL-Gauss.

Each is a value head (`agent.heads`) with settings (this module's config section
`TrainConfig.algo.distributional`, `DistributionalConfig`: `num_atoms`, `v_min`, `v_max`,
`num_quantiles`, `hl_sigma`, e.g. `--algo.distributional.num-atoms 51` on the command line;
`NetworkConfig.dueling` gives its dueling form) and a loss of the same name
(`agent.losses`) that reads its output. `q_values(output)` is the distribution's mean, so
acting, evaluation, the baseline, demonstrations' margin and the xla-report read Q-values as
from any head; double-Q selection, n-step discounts (`batch.discount`), importance weights and
padding rows work as for the TD losses.

- **c51** (Bellemare et al. 2017): logits `[B, A, N]` over `N = num_atoms` atoms evenly spaced
  in `[v_min, v_max]`. Target: the next state's distribution at the greedy (or double-Q) action,
  its atoms moved to `r + discount * z`, clipped to the support and projected back onto the atoms
  (each moved atom's mass split between its two neighbours); loss: the cross-entropy to it. The
  per-row loss is also the row's "TD error" for prioritised replay, as Rainbow's priorities.
- **qr-dqn** (Dabney et al. 2018): `N = num_quantiles` quantile values `[B, A, N]` at the
  midpoints `tau_i = (2i + 1) / 2N`; loss: the quantile Huber loss between every predicted
  quantile i and every target sample `r + discount * theta_j`:
  `sum_i mean_j |tau_i - 1{u_ij < 0}| huber_kappa(u_ij)`, with kappa `DQNConfig.huber_delta`
  (traced, so sweepable; QR-DQN's kappa = 1 is the default). rlax's `quantile_q_learning` form.
- **hl-gauss** (Farebrother et al. 2024, "Stop Regressing"): logits over `N = num_atoms` bins of
  equal width `w` covering `[v_min, v_max]` (values at the bin centres). Target: the scalar TD
  target `y = r + discount * Q_target(s', a*)` (clipped to the support) smeared by a Gaussian of
  standard deviation `hl_sigma * w`; each bin gets the Gaussian's mass over it, renormalised to
  the support: `(Phi((e_{i+1} - y) / sigma) - Phi((e_i - y) / sigma)) / (Phi(e_N) - Phi(e_0))`;
  loss: the cross-entropy to it. The TD error is `y - Q(s, a)`.

A head's output carries its atoms (a constant), so its loss needs no settings of its own.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.agent import heads, losses, rowsort
from jaxrl_fast.agent.heads import ValueHead, head_init, unbuilt
from jaxrl_fast.config.fields import config_class, is_int, is_num, knob, require
from jaxrl_fast.config.sections import register_section
from jaxrl_fast.types import Array

__all__ = [
    "Categorical",
    "DistributionalConfig",
    "Quantiles",
    "c51_rows",
    "categorical_projection",
    "hl_gauss_probs",
    "hl_gauss_rows",
    "qr_rows",
    "quantile_huber",
    "quantile_midpoints",
]


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class DistributionalConfig:
    """The distributional heads' settings: `TrainConfig.algo.distributional`.

    Attributes:
      num_atoms: atoms of "c51" / bins of "hl-gauss" (>= 2; 51 as C51).
      v_min, v_max: their support (v_min < v_max): the range the returns fall in ([-10, 10]
        as C51).
      num_quantiles: quantiles of "qr-dqn" (>= 1; 200 as QR-DQN).
      hl_sigma: "hl-gauss"'s smoothing standard deviation relative to the bin width (> 0; 0.75
        as Farebrother et al. 2024).
    """

    num_atoms: int = knob(51)
    v_min: float = knob(-10.0)
    v_max: float = knob(10.0)
    num_quantiles: int = knob(200)
    hl_sigma: float = knob(0.75)

    def __post_init__(self) -> None:
        require(self, "num_atoms", is_int(self.num_atoms) and self.num_atoms >= 2, "an int >= 2")
        require(self, "v_min", is_num(self.v_min), "a float below v_max")
        require(
            self, "v_max", is_num(self.v_max) and self.v_max > self.v_min, "a float above v_min"
        )
        n = self.num_quantiles
        require(self, "num_quantiles", is_int(n) and n >= 1, "an int >= 1")
        require(self, "hl_sigma", is_num(self.hl_sigma) and self.hl_sigma > 0, "a float > 0")


SECTION = "distributional"
register_section(SECTION, DistributionalConfig)


class Categorical(NamedTuple):
    """A categorical head's output: `logits [B, A, N]` over the values `atoms [N]` (C51's
    atoms; HL-Gauss's bin centres), and HL-Gauss's smoothing `sigma` (absolute; 0 for C51)."""

    logits: Array
    atoms: Array
    sigma: Array


class Quantiles(NamedTuple):
    """A quantile head's output: the quantile values `[B, A, N]` at `quantile_midpoints(N)`."""

    values: Array


def quantile_midpoints(n: int) -> Array:
    """`tau_i = (2i + 1) / 2n`, the quantile levels of QR-DQN's `n` outputs."""
    return (jnp.arange(n, dtype=jnp.float32) + 0.5) / n


def _per_action(features: Array, num_actions: int, n: int, dense, dueling: bool) -> Array:
    """`[B, A, n]` outputs per action; dueling: a value stream `[B, 1, n]` plus the advantages
    centred over actions."""
    adv = dense(num_actions * n, head_init)(features)
    adv = adv.reshape(*features.shape[:-1], num_actions, n)
    if not dueling:
        return adv
    value = dense(n, head_init)(features)[..., None, :]
    return value + adv - adv.mean(axis=-2, keepdims=True)


def _take(x: Array, actions: Array) -> Array:
    """`x[b, actions[b]]` for `x [B, A, N]`: `[B, N]`."""
    return jnp.take_along_axis(x, actions[:, None, None].astype(jnp.int32), axis=1)[:, 0]


def _categorical_q(out: Categorical) -> Array:
    return jnp.sum(jax.nn.softmax(out.logits, axis=-1) * out.atoms, axis=-1)


def _categorical_head(name: str, loss: str, smoothed: bool):
    def configure(settings: DistributionalConfig, dueling: bool) -> ValueHead:
        n, v_min, v_max = settings.num_atoms, settings.v_min, settings.v_max
        if smoothed:  # bin centres of n equal bins over [v_min, v_max]
            width = (v_max - v_min) / n
            atoms = v_min + width * (jnp.arange(n, dtype=jnp.float32) + 0.5)
            sigma = settings.hl_sigma * width
        else:
            atoms, sigma = jnp.linspace(v_min, v_max, n, dtype=jnp.float32), 0.0

        def apply(features: Array, num_actions: int, dense) -> Categorical:
            logits = _per_action(features, num_actions, n, dense, dueling)
            return Categorical(logits, atoms, jnp.asarray(sigma, jnp.float32))

        return ValueHead(name, apply, _categorical_q, loss=loss)

    return ValueHead(name, unbuilt(name), _categorical_q, configure, loss, section=SECTION)


def _quantile_head(settings: DistributionalConfig, dueling: bool) -> ValueHead:
    def apply(features: Array, num_actions: int, dense) -> Quantiles:
        return Quantiles(_per_action(features, num_actions, settings.num_quantiles, dense, dueling))

    return ValueHead("qr-dqn", apply, _quantile_q, loss="qr-dqn")


def _quantile_q(out: Quantiles) -> Array:
    return out.values.mean(axis=-1)


# ---- targets and losses -----------------------------------------------------------------------
def categorical_projection(probs: Array, values: Array, atoms: Array) -> Array:
    """Project a distribution with `probs [B, M]` on `values [B, M]` onto the fixed `atoms [N]`
    (evenly spaced): each value is clipped to `[atoms[0], atoms[-1]]` and its mass split between
    the two nearest atoms in proportion to closeness. Returns `[B, N]`."""
    dz = atoms[1] - atoms[0]
    values = jnp.clip(values, atoms[0], atoms[-1])
    weight = jnp.clip(1.0 - jnp.abs(values[:, :, None] - atoms[None, None, :]) / dz, 0.0, 1.0)
    return jnp.einsum("bm,bmn->bn", probs, weight)


def c51_rows(x: losses.LossInput):
    """C51's cross-entropy per row, and the same as the row's priority signal."""
    out_t = x.out_t
    p_t = jax.nn.softmax(_take(out_t.logits, x.bootstrap_action()), axis=-1)
    moved = x.reward[:, None] + x.discount[:, None] * out_t.atoms[None, :]
    target = jax.lax.stop_gradient(categorical_projection(p_t, moved, out_t.atoms))
    log_p = jax.nn.log_softmax(_take(x.out_tm1.logits, x.action), axis=-1)
    loss = -jnp.sum(target * log_p, axis=-1)
    return loss, loss


def quantile_huber(theta: Array, tau: Array, target: Array, kappa) -> Array:
    """`sum_i mean_j |tau_i - 1{u_ij < 0}| huber_kappa(u_ij)`, `u_ij = target_j - theta_i`, per
    row: `theta, tau [B, N]`, `target [B, M]` (a constant: no gradient flows into it), `kappa`
    >= 0. Returns `[B]`.

    Computed in O((N + M) log M) per row, not over the N x M pairs: the targets are sorted once,
    and each theta_i splits them, at `theta_i - kappa`, `theta_i` and `theta_i + kappa`
    (`searchsorted`), into four runs on which the weight and the Huber piece are fixed; each run's
    sum of the loss is a polynomial in theta_i of the run's count, sum and sum of squares (prefix
    sums of the sorted targets). The sort and the counts are `agent.rowsort`'s (a sorting network
    and a blocked search: several times faster than `jnp.sort` and `searchsorted` on a CPU).
    Values are centred on the row's mean target first (u is unchanged) so that the sums of
    squares do not cancel at large returns. Autodiff through it
    gives the pairwise form's gradient in theta (the counts are piecewise constant); the pairwise
    form is the test's oracle (`tests/agent/test_distributional.py`)."""
    target = jax.lax.stop_gradient(target.astype(jnp.float32))
    centre = jnp.mean(target, axis=-1, keepdims=True)
    t = rowsort.sort_rows(target - centre)
    theta = theta.astype(jnp.float32) - centre
    zero = jnp.zeros_like(t[:, :1])
    c1 = jnp.concatenate([zero, jnp.cumsum(t, axis=-1)], axis=-1)  # [B, M + 1]
    c2 = jnp.concatenate([zero, jnp.cumsum(t * t, axis=-1)], axis=-1)
    at = jax.lax.stop_gradient(theta)
    n = theta.shape[-1]
    queries = jnp.concatenate([at - kappa, at, at + kappa], axis=-1)
    at_most = jnp.arange(3 * n) >= 2 * n  # the last n count the targets <= theta + kappa
    counts = rowsort.count_below(t, queries, inclusive=at_most)
    k_lo = counts[:, :n]  # targets below theta - kappa
    k_mid = counts[:, n : 2 * n]  # below theta: u < 0
    k_hi = counts[:, 2 * n :]  # at most theta + kappa
    k_end = jnp.full_like(k_mid, t.shape[-1])

    def run(a, b):  # count, sum and sum of squares of the sorted targets [a, b)
        s1 = jnp.take_along_axis(c1, b, -1) - jnp.take_along_axis(c1, a, -1)
        s2 = jnp.take_along_axis(c2, b, -1) - jnp.take_along_axis(c2, a, -1)
        return (b - a).astype(jnp.float32), s1, s2

    n_a, s1_a, _ = run(jnp.zeros_like(k_lo), k_lo)  # u < -kappa: kappa (|u| - kappa / 2)
    n_b, s1_b, s2_b = run(k_lo, k_mid)  # -kappa <= u < 0: u^2 / 2
    n_c, s1_c, s2_c = run(k_mid, k_hi)  # 0 <= u <= kappa: u^2 / 2
    n_d, s1_d, _ = run(k_hi, k_end)  # u > kappa
    below = kappa * (n_a * theta - s1_a - 0.5 * kappa * n_a)
    below += 0.5 * (s2_b - 2.0 * theta * s1_b + n_b * theta**2)
    above = 0.5 * (s2_c - 2.0 * theta * s1_c + n_c * theta**2)
    above += kappa * (s1_d - n_d * theta - 0.5 * kappa * n_d)
    per_quantile = (1.0 - tau) * below + tau * above
    return jnp.sum(per_quantile, axis=-1) / t.shape[-1]


def qr_rows(x: losses.LossInput):
    """QR-DQN's quantile Huber loss per row (kappa = `delta`), and the mean TD error."""
    theta = _take(x.out_tm1.values, x.action)  # [B, N]
    a_t = x.bootstrap_action()
    target = x.reward[:, None] + x.discount[:, None] * _take(x.out_t.values, a_t)  # [B, N']
    target = jax.lax.stop_gradient(target)
    tau = jnp.broadcast_to(quantile_midpoints(theta.shape[-1]), theta.shape)
    loss = quantile_huber(theta, tau, target, x.delta)
    return loss, target.mean(axis=-1) - theta.mean(axis=-1)


def hl_gauss_probs(y: Array, atoms: Array, sigma: Array) -> Array:
    """HL-Gauss's target `[B, N]`: the mass of `Normal(y, sigma)` over each bin (centres `atoms`,
    equal widths), renormalised to the bins' whole range; `y [B]` is clipped to that range."""
    width = atoms[1] - atoms[0]
    edges = jnp.concatenate([atoms - 0.5 * width, atoms[-1:] + 0.5 * width])
    y = jnp.clip(y, edges[0], edges[-1])
    cdf = jax.scipy.special.erf((edges[None, :] - y[:, None]) / (math.sqrt(2.0) * sigma))
    return (cdf[:, 1:] - cdf[:, :-1]) / (cdf[:, -1:] - cdf[:, :1])


def hl_gauss_rows(x: losses.LossInput):
    """HL-Gauss's cross-entropy per row, and the scalar TD error."""
    a_t, a_tm1 = x.bootstrap_action(), x.action
    v_t = jnp.take_along_axis(x.q_t(), a_t[:, None], axis=-1)[:, 0]
    y = jax.lax.stop_gradient(x.reward + x.discount * v_t)
    target = jax.lax.stop_gradient(hl_gauss_probs(y, x.out_t.atoms, x.out_t.sigma))
    log_p = jax.nn.log_softmax(_take(x.out_tm1.logits, a_tm1), axis=-1)
    q_a = jnp.take_along_axis(x.q_tm1(), a_tm1[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return -jnp.sum(target * log_p, axis=-1), y - q_a


C51 = _categorical_head("c51", "c51", smoothed=False)
HL_GAUSS = _categorical_head("hl-gauss", "hl-gauss", smoothed=True)
QR = ValueHead("qr-dqn", unbuilt("qr-dqn"), _quantile_q, _quantile_head, "qr-dqn", section=SECTION)
for _head in (C51, QR, HL_GAUSS):
    heads.HEADS.register(_head.name, _head, builtin=True)
for _loss in (
    losses.Loss("c51", c51_rows, "c51"),
    losses.Loss("qr-dqn", qr_rows, "qr-dqn"),
    losses.Loss("hl-gauss", hl_gauss_rows, "hl-gauss"),
):
    losses.LOSSES.register(_loss.name, _loss, builtin=True)
