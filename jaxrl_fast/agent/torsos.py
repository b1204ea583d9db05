"""Torsos: observations `[B, *obs_shape]` (already cast to the compute dtype) to features `[B, F]`.

Each torso is a function called inside `QNetwork`'s compact `__call__`, so the layers it creates
belong to the network (their names, and so the parameter tree and its initial values, are the
network's own: `Dense_0`, `Conv_0`, ...). `net` is the calling `QNetwork` (widths, dtypes,
precision, `layer_norm`: a LayerNorm before every hidden ReLU) and `dense(n, init=hidden_init)`
makes one of its dense layers.

    mlp          `hidden_sizes` dense layers
    minatar_cnn  3x3 stride-1 VALID convolutions (`conv_channels`) as patches x matmul (im2col:
                 XLA:CPU runs their backward pass as matmuls, several times faster than its
                 convolution kernels at MinAtar sizes on a 2-core CPU), then the dense layers
    nature_cnn   the Nature-DQN convolutions (8x8/4 32, 4x4/2 64, 3x3/1 64; `layers.Conv`), then
                 the dense layers
    lstm_core    an LSTM between the torso and the head (`NetworkConfig.lstm`), over a carry
                 `[B, 2, H]` (cell, hidden)
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_fast.agent.layers import Conv, hidden_init, orthogonal_init
from jaxrl_fast.types import Array

# (channels, kernel, stride) of the Nature-DQN torso (Mnih et al. 2015).
NATURE_TORSO = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


def _activate(net: Any, x: Array) -> Array:
    """ReLU, after a LayerNorm when `net.layer_norm` (`NetworkConfig.layer_norm`, PQN's)."""
    if getattr(net, "layer_norm", False):
        x = nn.LayerNorm(dtype=net.dtype, param_dtype=net.param_dtype)(x)
    return nn.relu(x)


def _dense_layers(net: Any, x: Array, dense: Callable) -> Array:
    x = x.reshape((x.shape[0], -1))
    for h in net.hidden_sizes:
        x = _activate(net, dense(h)(x))
    return x


def mlp(net: Any, x: Array, dense: Callable) -> Array:
    """`hidden_sizes` ReLU dense layers on the flattened observation."""
    return _dense_layers(net, x, dense)


def minatar_cnn(net: Any, x: Array, dense: Callable) -> Array:
    """3x3 stride-1 VALID convolutions as patches x matmul, then the dense layers."""
    for c in net.conv_channels:
        patches = jax.lax.conv_general_dilated_patches(
            x,
            (3, 3),
            (1, 1),
            "VALID",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            precision=net.precision,
        )  # [B, H-2, W-2, 9 * C_in]
        # a plain dense layer whatever `NetworkConfig.dense` is: noisy nets noise the fully
        # connected layers only, not the convolutions
        conv = nn.Dense(
            c,
            kernel_init=hidden_init,
            dtype=net.dtype,
            param_dtype=net.param_dtype,
            precision=net.precision,
        )
        x = _activate(net, conv(patches))
    return _dense_layers(net, x, dense)


def nature_cnn(net: Any, x: Array, dense: Callable) -> Array:
    """The Nature-DQN strided convolutions, then the dense layers."""
    for c, k, s in NATURE_TORSO:
        conv = Conv(
            c,
            k,
            s,
            impl=net.conv_impl,
            dtype=net.dtype,
            param_dtype=net.param_dtype,
            precision=net.precision,
        )
        x = _activate(net, conv(x))
    return _dense_layers(net, x, dense)


def lstm_core(net: Any, x: Array, carry: Array) -> tuple[Array, Array]:
    """One LSTM step of width `net.lstm` from `carry [B, 2, H]` (float32, cell then hidden):
    `(features [B, H], carry)`. Recurrent kernels are orthogonal (`layers.orthogonal_init`)."""
    cell = nn.OptimizedLSTMCell(
        net.lstm,
        recurrent_kernel_init=orthogonal_init,
        dtype=net.dtype,
        param_dtype=net.param_dtype,
        name="lstm",
    )
    state = (carry[:, 0].astype(net.dtype), carry[:, 1].astype(net.dtype))
    (c, h), x = cell(state, x)
    return x, jnp.stack([c, h], axis=1).astype(jnp.float32)


TORSOS = {"mlp": mlp, "cnn": minatar_cnn, "nature": nature_cnn}
