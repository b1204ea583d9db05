"""Q-networks (flax.linen): MLP, MinAtar-sized CNN and Nature-DQN torsos, optional dueling head.

Hidden layers use He-normal init; the output layer a small normal (std 0.01) init, so initial
Q-values are near zero. The MinAtar CNN's 3x3 convolutions are computed as patches x matmul
(im2col, `lax.conv_general_dilated_patches` then a dense layer): the same function as a VALID
3x3 convolution, but XLA:CPU runs its backward pass as matmuls, which were several times faster
than its convolution kernels for MinAtar-sized inputs on a 2-core CPU. The Nature torso (8x8/4,
4x4/2, 3x3/1 strided convolutions on 84x84 frames) uses `nn.Conv`.

`dtype` is the compute dtype, `param_dtype` the storage dtype (fp32 master weights); inputs are
cast once, at the network input (uint8 frames are also scaled to [0, 1] there), and Q-values
are returned in fp32. `precision` is passed to every matmul and convolution.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_fast.config import NetworkConfig
from jaxrl_fast.envs.base import EnvSpec
from jaxrl_fast.types import Array

_hidden_init = nn.initializers.he_normal()
_head_init = nn.initializers.normal(stddev=0.01)
# (channels, kernel, stride) of the Nature-DQN torso (Mnih et al. 2015).
_NATURE_TORSO = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


class QNetwork(nn.Module):
    """Maps observations `[B, *obs_shape]` to Q-values `[B, num_actions]` (float32).

    Attributes:
      num_actions: size of the discrete action space.
      hidden_sizes: dense hidden widths.
      conv_channels: 3x3 stride-1 conv channels; empty for an MLP.
      nature: use the Nature-DQN conv torso (`conv_channels` is then ignored).
      dueling: value + advantage head.
      dtype: compute dtype.
      param_dtype: parameter dtype.
      precision: `jax.lax.Precision` for matmuls and convolutions (None: backend default).
    """

    num_actions: int
    hidden_sizes: Sequence[int] = (120, 84)
    conv_channels: Sequence[int] = ()
    nature: bool = False
    dueling: bool = False
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    precision: Any = None

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        x = obs.astype(self.dtype)
        if obs.dtype == jnp.uint8:
            x = x * jnp.asarray(1.0 / 255.0, self.dtype)
        dense = lambda n, init=_hidden_init: nn.Dense(  # noqa: E731
            n,
            kernel_init=init,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            precision=self.precision,
        )
        if self.nature:
            for c, k, s in _NATURE_TORSO:
                x = nn.relu(
                    nn.Conv(
                        c,
                        (k, k),
                        (s, s),
                        padding="VALID",
                        kernel_init=_hidden_init,
                        dtype=self.dtype,
                        param_dtype=self.param_dtype,
                        precision=self.precision,
                    )(x)
                )
        else:
            for c in self.conv_channels:
                patches = jax.lax.conv_general_dilated_patches(
                    x,
                    (3, 3),
                    (1, 1),
                    "VALID",
                    dimension_numbers=("NHWC", "HWIO", "NHWC"),
                    precision=self.precision,
                )  # [B, H-2, W-2, 9 * C_in]
                x = nn.relu(dense(c)(patches))
        x = x.reshape((x.shape[0], -1))
        for h in self.hidden_sizes:
            x = nn.relu(dense(h)(x))
        if self.dueling:
            value = dense(1, _head_init)(x)
            adv = dense(self.num_actions, _head_init)(x)
            q = value + adv - adv.mean(axis=-1, keepdims=True)
        else:
            q = dense(self.num_actions, _head_init)(x)
        return q.astype(jnp.float32)

    @classmethod
    def from_config(cls, config: NetworkConfig, spec: EnvSpec, **kwargs: Any) -> QNetwork:
        """Build the network a `NetworkConfig` describes for an env spec."""
        kind = config.kind
        if kind == "auto":
            kind = "cnn" if len(spec.obs_shape) == 3 else "mlp"
        if kind in ("cnn", "nature") and len(spec.obs_shape) != 3:
            raise ValueError(
                f"NetworkConfig.kind={kind!r} needs image observations [H, W, C]; env "
                f"{spec.name!r} gives shape {spec.obs_shape}. Use kind='mlp' or 'auto'."
            )
        if kind == "nature" and min(spec.obs_shape[:2]) < 36:
            raise ValueError(
                f"NetworkConfig.kind='nature' needs frames of at least 36x36 (84x84 in DQN); env "
                f"{spec.name!r} gives shape {spec.obs_shape}. Use kind='cnn' for small frames."
            )
        return cls(
            num_actions=spec.num_actions,
            hidden_sizes=tuple(config.hidden_sizes),
            conv_channels=tuple(config.conv_channels) if kind == "cnn" else (),
            nature=kind == "nature",
            dueling=config.dueling,
            **kwargs,
        )

    @classmethod
    def for_policy(
        cls, config: NetworkConfig, spec: EnvSpec, policy: Any, *, compute: str | None = None
    ) -> QNetwork:
        """The network for a `precision.Policy`: its compute dtype (or `compute`), fp32 params."""
        from jaxrl_fast.precision import COMPUTE_DTYPES

        return cls.from_config(
            config,
            spec,
            dtype=COMPUTE_DTYPES[compute or policy.compute],
            param_dtype=jnp.float32,
            precision=policy.lax_precision,
        )
