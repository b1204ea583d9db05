"""Noisy nets (Fortunato et al. 2018, factorised Gaussian): the dense layer kind "noisy".

Each layer keeps mean weights `mu` and noise scales `sigma` (both learned) and computes

    y = x @ (mu_W + sigma_W * (f(e_in) f(e_out)^T)) + mu_b + sigma_b * f(e_out)
    f(e) = sign(e) sqrt|e|

with `e_in [fan_in]`, `e_out [features]` standard normal, one draw per call for the whole batch
(the paper's factorised form: fan_in + features draws, not their product). The noisy matrix is
formed (fan_in x features elementwise operations) and applied in one matmul: that costs one
matmul forward and two backward, as a plain layer, where `x @ mu_W + ((x * f(e_in)) @ sigma_W)
* f(e_out)` costs two and four (measured: noisy nets ran at 0.48x of DQN's env-steps/s on
MinAtar that way, benchmarks/results/dqn_family/minatar.md). `sigma`
starts at `sigma0 / sqrt(fan_in)` (this module's config section `TrainConfig.algo.noisy`,
`NoisyConfig.sigma0`, 0.5 as the paper; `--algo.noisy.sigma0` on the command line). `mu_W` and
`mu_b` start uniform in `[-1/sqrt(fan_in), 1/sqrt(fan_in)]` (`mu_init="uniform"`: the paper's
Section 3.2, as Dopamine), or `mu_W` with the initialiser the torso or head asks for and the
biases zero (`mu_init="layer"`: output layers then start near zero).

The noise comes from the flax random stream "noise": the agent passes it a key per act (from the
acting key) and per update (online, target and selection passes each their own, from
`AgentState.rng`). A call without that stream (evaluation, a saved `Policy`, the xla-report)
computes the mean function `x @ mu_W + mu_b`: evaluation is noise-free.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_fast.agent.dense import DenseKind
from jaxrl_fast.config.fields import config_class, is_num, knob, require
from jaxrl_fast.config.registry import DENSE_LAYERS
from jaxrl_fast.config.sections import register_section
from jaxrl_fast.types import Array

__all__ = ["NOISY", "NoisyConfig", "NoisyDense", "scaled_noise"]

STREAM = "noise"
MU_INITS = ("uniform", "layer")


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class NoisyConfig:
    """The noisy layers' settings: `TrainConfig.algo.noisy`.

    Attributes:
      sigma0: the initial noise scale, sigma = sigma0 / sqrt(fan-in) (> 0; 0.5 as Fortunato
        et al. 2018 for factorised noise).
      mu_init: how the mean weights start: "uniform" (U[-1/sqrt(fan-in), 1/sqrt(fan-in)] for
        weights and biases, the paper's and Dopamine's) or "layer" (the initialiser the torso
        or head gives a plain layer, biases zero).
    """

    sigma0: float = knob(0.5)
    mu_init: str = knob("uniform")

    def __post_init__(self) -> None:
        require(self, "sigma0", is_num(self.sigma0) and self.sigma0 > 0, "a float > 0")
        require(self, "mu_init", self.mu_init in MU_INITS, f"one of {MU_INITS}")


register_section("noisy", NoisyConfig)


def scaled_noise(key, n: int) -> Array:
    """`f(e) = sign(e) sqrt|e|` of `n` standard normal draws (float32)."""
    e = jax.random.normal(key, (n,), jnp.float32)
    return jnp.sign(e) * jnp.sqrt(jnp.abs(e))


class NoisyDense(nn.Module):
    """A factorised-Gaussian noisy dense layer (module docstring)."""

    features: int
    kernel_init: Callable = nn.initializers.lecun_normal()
    sigma0: float = 0.5
    mu_init: str = "uniform"
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    precision: Any = None

    @nn.compact
    def __call__(self, x: Array) -> Array:
        fan_in = x.shape[-1]
        shape = (fan_in, self.features)
        sigma = nn.initializers.constant(self.sigma0 / math.sqrt(fan_in))
        if self.mu_init == "uniform":
            bound = 1.0 / math.sqrt(fan_in)
            w_init = b_init = _uniform(bound)
        else:
            w_init, b_init = self.kernel_init, nn.initializers.zeros
        mu_w = self.param("kernel", w_init, shape, self.param_dtype)
        mu_b = self.param("bias", b_init, (self.features,), self.param_dtype)
        sigma_w = self.param("sigma_kernel", sigma, shape, self.param_dtype)
        sigma_b = self.param("sigma_bias", sigma, (self.features,), self.param_dtype)
        w, b = mu_w, mu_b
        if self.has_rng(STREAM):  # else the mean function
            k_in, k_out = jax.random.split(self.make_rng(STREAM))
            f_in, f_out = scaled_noise(k_in, fan_in), scaled_noise(k_out, self.features)
            w = mu_w + sigma_w * (f_in[:, None] * f_out[None, :])
            b = mu_b + sigma_b * f_out
        x = x.astype(self.dtype)
        return jnp.dot(x, w.astype(self.dtype), precision=self.precision) + b.astype(self.dtype)


def _uniform(bound: float) -> Callable:
    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _noisy(features, init, *, dtype, param_dtype, precision, settings):
    s = settings or NoisyConfig()
    return NoisyDense(features, init, s.sigma0, s.mu_init, dtype, param_dtype, precision)


NOISY = DenseKind("noisy", _noisy, streams=(STREAM,), explores=True, section="noisy")
DENSE_LAYERS.register("noisy", NOISY, builtin=True)
