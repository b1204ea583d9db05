"""Implicit quantile networks (IQN; Dabney, Ostrovski, Silver and Munos 2018): the head and the
loss "iqn".

The head maps features `psi(s) [B, F]` and quantile levels `tau [B, n]` to quantile values
`Z_tau(s, a) [B, A, n]`: each level is embedded by `phi(tau)_j = ReLU(sum_{i<E} cos(pi i tau)
w_ij + b_j)` (E = `embedding`, 64 as the paper), merged with the features by
an elementwise product `psi(s) * phi(tau)` and mapped to one value per action (or, in its
dueling form, a value stream plus advantages centred over actions) by the head's output layer.

The levels are sampled uniformly, a fresh set per row and per pass: `N` for the online net in
the loss, `N'` for the target net, `K` for acting and double-Q selection
(`samples = (N, N', K)`, (64, 64, 32) as the paper). Both are this module's config section
`TrainConfig.algo.iqn` (`IQNConfig`; `--algo.iqn.samples 64,64,32` on the command line). A pass
without the random stream "taus" (evaluation, a saved `Policy`, the xla-report) uses the `K`
midpoints `(2k + 1) / 2K` instead: a deterministic estimate of the same mean. `q_values` is the
mean over the levels.

The loss is the paper's eq. (3): with `delta_ij = r + discount * Z_tau'_j(s', a*) - Z_tau_i(s, a)`,

    loss = sum_i (1 / N') sum_j |tau_i - 1{delta_ij < 0}| * L_kappa(delta_ij) / kappa

with `L_kappa` the Huber loss of threshold kappa = `DQNConfig.huber_delta` (1 as the paper) and
`a* = argmax_a mean_k Z_tau_k(s', a)` over the target net's levels (or the online net's K with
double Q). The TD error that prioritised replay reads is the difference of the means.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.agent import heads, losses
from jaxrl_fast.agent.distributional import quantile_huber
from jaxrl_fast.agent.heads import ValueHead, head_init, unbuilt
from jaxrl_fast.agent.layers import hidden_init
from jaxrl_fast.config.fields import config_class, is_int, knob, require
from jaxrl_fast.config.sections import register_section
from jaxrl_fast.types import Array

__all__ = [
    "STREAM",
    "IQNConfig",
    "ImplicitQuantiles",
    "cosine_embedding",
    "iqn_rows",
    "quantile_levels",
]

STREAM = "taus"


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class IQNConfig:
    """The "iqn" head's settings: `TrainConfig.algo.iqn`.

    Attributes:
      samples: quantile levels per pass `(N, N', K)`: sampled for the online net in the loss,
        the target net, and acting and double-Q selection ((64, 64, 32) as Dabney et al.
        2018b); without a random stream (evaluation) K fixed midpoints.
      embedding: size of the cosine embedding of a quantile level (64 as the paper).
    """

    samples: tuple[int, int, int] = knob((64, 64, 32))
    embedding: int = knob(64)

    def __post_init__(self) -> None:
        require(
            self,
            "samples",
            isinstance(self.samples, tuple)
            and len(self.samples) == 3
            and all(is_int(n) and n >= 1 for n in self.samples),
            "a tuple of 3 positive ints (N, N', K), e.g. (64, 64, 32)",
        )
        e = self.embedding
        require(self, "embedding", is_int(e) and e >= 1, "an int >= 1")


register_section("iqn", IQNConfig)


class ImplicitQuantiles(NamedTuple):
    """The IQN head's output: quantile values `[B, A, n]` at the levels `taus [B, n]`."""

    values: Array
    taus: Array


def cosine_embedding(taus: Array, size: int) -> Array:
    """`cos(pi i tau)` for `i = 0 .. size - 1`: `[..., size]` for levels `taus [...]`."""
    i = jnp.arange(size, dtype=jnp.float32)
    return jnp.cos(jnp.pi * i * taus[..., None])


def quantile_levels(rng, batch: int, n: int) -> Array:
    """`[batch, n]` levels: uniform draws from `rng`, or the `n` midpoints when `rng` is None."""
    if rng is None:
        mid = (jnp.arange(n, dtype=jnp.float32) + 0.5) / n
        return jnp.broadcast_to(mid, (batch, n))
    return jax.random.uniform(rng, (batch, n), jnp.float32)


def _configure(settings: IQNConfig, dueling: bool) -> ValueHead:
    counts = dict(zip(("online", "target"), settings.samples[:2], strict=True))
    k = settings.samples[2]

    def apply(features: Array, num_actions: int, dense, *, rng=None, role: str = "act"):
        b, width = features.shape[0], features.shape[-1]
        taus = quantile_levels(rng, b, counts.get(role, k))  # [B, n]
        emb = cosine_embedding(taus, settings.embedding).astype(features.dtype)
        phi = jax.nn.relu(dense(width, hidden_init)(emb))  # [B, n, F]
        h = features[:, None, :] * phi
        adv = dense(num_actions, head_init)(h)  # [B, n, A]
        if dueling:
            adv = dense(1, head_init)(h) + adv - adv.mean(axis=-1, keepdims=True)
        return ImplicitQuantiles(jnp.swapaxes(adv, -1, -2), taus)

    return ValueHead("iqn", apply, _q, loss="iqn", streams=(STREAM,))


def _q(out: ImplicitQuantiles) -> Array:
    return out.values.mean(axis=-1)


def _take(x: Array, actions: Array) -> Array:
    return jnp.take_along_axis(x, actions[:, None, None].astype(jnp.int32), axis=1)[:, 0]


def iqn_rows(x: losses.LossInput):
    """IQN's quantile Huber loss per row (module docstring) and the TD error of the means."""
    theta = _take(x.out_tm1.values, x.action)  # [B, N]
    a_t = x.bootstrap_action()
    target = x.reward[:, None] + x.discount[:, None] * _take(x.out_t.values, a_t)  # [B, N']
    target = jax.lax.stop_gradient(target)
    taus = jax.lax.stop_gradient(x.out_tm1.taus)
    loss = quantile_huber(theta, taus, target, x.delta) / x.delta  # sorted, not N x N' pairs
    return loss, target.mean(axis=-1) - theta.mean(axis=-1)


IQN = ValueHead("iqn", unbuilt("iqn"), _q, _configure, "iqn", (STREAM,), section="iqn")
heads.HEADS.register("iqn", IQN, builtin=True)
losses.LOSSES.register("iqn", losses.Loss("iqn", iqn_rows, "iqn"), builtin=True)
