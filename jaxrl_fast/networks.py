"""Q-networks (flax.linen): MLP, MinAtar-sized CNN and Nature-DQN torsos, optional dueling head.

Hidden layers use He-normal init; the output layer a small normal (std 0.01) init, so initial
Q-values are near zero. The MinAtar CNN's 3x3 convolutions are computed as patches x matmul
(im2col, `lax.conv_general_dilated_patches` then a dense layer): the same function as a VALID
3x3 convolution, but XLA:CPU runs its backward pass as matmuls, which were several times faster
than its convolution kernels for MinAtar-sized inputs on a 2-core CPU. The Nature torso (8x8/4,
4x4/2, 3x3/1 strided convolutions on 84x84 frames) uses `Conv`, which keeps `nn.Conv`'s
parameter layout. XLA:CPU runs a convolution fast (with Eigen) when its dimensions are laid
out NHWC x HWIO -> NHWC, and rewrites other convolutions into that form only outside loops:
inside the fused loop autodiff's gradient convolutions (kernel gradient `f01b_i01o->01bf`,
input gradient with swapped kernel channels) ran about 8x slower than outside
(`benchmarks/results/precision.md`). So on CPU `Conv` writes both gradients as NHWC x HWIO
convolutions itself (`conv_canonical_grads`): the kernel gradient correlates the input,
channels as batch, with the output gradient dilated by the stride; the input gradient
correlates the dilated, padded output gradient with the flipped, channel-swapped kernel.

`dtype` is the compute dtype, `param_dtype` the storage dtype (fp32 master weights); inputs are
cast once, at the network input (uint8 frames are also scaled to [0, 1] there), and Q-values
are returned in fp32. `precision` is passed to every matmul and convolution.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_fast.config import NetworkConfig
from jaxrl_fast.envs.base import EnvSpec
from jaxrl_fast.types import Array

_hidden_init = nn.initializers.he_normal()
_head_init = nn.initializers.normal(stddev=0.01)
# Newton-Schulz steps of `orthogonal_init`: a singular value s < 1 grows by about 1.5x per step
# until it nears 1, then converges quadratically; 60 steps take the smallest singular value of
# a normalised Gaussian matrix (about n^-1.5, rarely 100x less) to 1 within float32 rounding.
_ORTHOGONAL_STEPS = 60


def orthogonal_init(key, shape, dtype=jnp.float32):
    """A random orthogonal matrix `[rows, cols]` (orthonormal rows or columns), without LAPACK.

    `nn.initializers.orthogonal` takes a QR decomposition, which jaxlib's CPU backend runs as a
    LAPACK call that splits a batch (the vmapped seeds' inits) over the intra-op thread pool and
    waits for it from a pool thread: with several CPU devices initialising at once that wait
    never ended (a hung process). Here the Newton-Schulz iteration `X <- 1.5 X - 0.5 X X^T X`
    takes a Gaussian matrix, scaled to singular values in (0, 1], to its polar factor: the
    orthogonal matrix nearest to it (Haar-distributed, as the QR one): matmuls only.
    """
    rows, cols = shape[0], int(math.prod(shape[1:]))
    n = max(rows, cols)
    x = jax.random.normal(key, (n, n), jnp.float32)
    x = x / jnp.linalg.norm(x)  # Frobenius norm >= the largest singular value

    def step(x, _):
        return 1.5 * x - 0.5 * (x @ x.T) @ x, None

    x, _ = jax.lax.scan(step, x, None, length=_ORTHOGONAL_STEPS)
    return x[:rows, :cols].reshape(shape).astype(dtype)


_DIMS = ("NHWC", "HWIO", "NHWC")
# (channels, kernel, stride) of the Nature-DQN torso (Mnih et al. 2015).
_NATURE_TORSO = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


def _conv(x: Array, kernel: Array, stride: int, precision: Any) -> Array:
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), "VALID", dimension_numbers=_DIMS, precision=precision
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _conv_patches_grad(x: Array, kernel: Array, stride: int, precision: Any) -> Array:
    """A VALID NHWC convolution whose kernel gradient is computed as patches x matmul."""
    return _conv(x, kernel, stride, precision)


def _conv_patches_grad_fwd(x, kernel, stride, precision):
    return _conv(x, kernel, stride, precision), (x, kernel)


def _kernel_grad_patches(x, kernel, stride, precision, g):
    """The kernel gradient of a VALID NHWC convolution as patches x matmul."""
    k, c_in, c_out = kernel.shape[0], kernel.shape[2], kernel.shape[3]
    patches = jax.lax.conv_general_dilated_patches(
        x, (k, k), (stride, stride), "VALID", dimension_numbers=_DIMS, precision=precision
    )  # [B, H', W', C_in * k * k], input channel major
    d_kernel = jnp.einsum("bhwp,bhwo->po", patches, g.astype(patches.dtype), precision=precision)
    return d_kernel.reshape(c_in, k, k, c_out).transpose(1, 2, 0, 3).astype(kernel.dtype)


def _conv_patches_grad_bwd(stride, precision, residuals, g):
    x, kernel = residuals
    d_kernel = _kernel_grad_patches(x, kernel, stride, precision, g)
    _, vjp_x = jax.vjp(lambda x: _conv(x, kernel, stride, precision), x)
    (d_x,) = vjp_x(g)
    return d_x, d_kernel


_conv_patches_grad.defvjp(_conv_patches_grad_fwd, _conv_patches_grad_bwd)


# Above this batch size `conv_canonical_grads` computes the kernel gradient as patches x matmul:
# as a convolution whose input channels are the batch it was faster at batch 32 and 64 and
# slower at 128 and 256 on a 2-core CPU (`benchmarks/precision.py`, kernel-gradient table).
CANONICAL_KERNEL_GRAD_MAX_BATCH = 64


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _conv_canonical_grads(
    x: Array, kernel: Array, stride: int, precision: Any, kernel_grad: str = "conv"
) -> Array:
    """A VALID NHWC convolution whose two gradients are also NHWC x HWIO convolutions
    (`kernel_grad="patches"`: the kernel gradient as patches x matmul)."""
    return _conv(x, kernel, stride, precision)


def _conv_canonical_grads_fwd(x, kernel, stride, precision, kernel_grad):
    return _conv(x, kernel, stride, precision), (x, kernel)


def _conv_canonical_grads_bwd(stride, precision, kernel_grad, residuals, g):
    x, kernel = residuals
    k, s = kernel.shape[0], stride
    g = g.astype(x.dtype)
    # Rows and columns of x past the last window (VALID drops them) get zero gradient.
    rest = [(d - k) % s for d in x.shape[1:3]]
    # Input gradient: the output gradient, dilated by the stride and fully padded, correlated
    # with the kernel flipped in space and with its in/out channels swapped.
    flipped = kernel[::-1, ::-1].transpose(0, 1, 3, 2)
    d_x = jax.lax.conv_general_dilated(
        g,
        flipped,
        (1, 1),
        [(k - 1, k - 1 + r) for r in rest],
        lhs_dilation=(s, s),
        dimension_numbers=_DIMS,
        precision=precision,
    )
    if kernel_grad == "patches":
        return d_x.astype(x.dtype), _kernel_grad_patches(x, kernel, stride, precision, g)
    # Kernel gradient: input channels play the batch, the batch plays the input channels, and
    # the output gradient is the kernel, dilated by the stride.
    d_kernel = jax.lax.conv_general_dilated(
        x.transpose(3, 1, 2, 0),  # [C_in, H, W, B]
        g.transpose(1, 2, 0, 3),  # [H', W', B, C_out]
        (1, 1),
        "VALID",
        rhs_dilation=(s, s),
        dimension_numbers=_DIMS,
        precision=precision,
    )  # [C_in, k + rest, k + rest, C_out]
    d_kernel = d_kernel[:, :k, :k].transpose(1, 2, 0, 3)
    return d_x.astype(x.dtype), d_kernel.astype(kernel.dtype)


_conv_canonical_grads.defvjp(_conv_canonical_grads_fwd, _conv_canonical_grads_bwd)


class Conv(nn.Module):
    """A VALID, strided 2-D convolution on NHWC inputs, with `nn.Conv`'s parameters.

    Attributes:
      features: output channels.
      kernel: square kernel size.
      stride: stride in both spatial dims.
      impl: "conv" (`lax.conv_general_dilated`), "patches" (patches x matmul, forward and
        backward), "conv_patches_grad" (a convolution whose kernel gradient is patches x
        matmul), "conv_canonical_grads" (a convolution whose gradients are NHWC x HWIO
        convolutions too) or "auto": conv_canonical_grads on the CPU backend, conv elsewhere.
        All give the same function of the same parameters (kernel `[k, k, C_in, features]`,
        bias `[features]`) and the same gradients up to float rounding.
      dtype, param_dtype, precision: as in `QNetwork`.
    """

    features: int
    kernel: int
    stride: int
    impl: str = "auto"
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    precision: Any = None

    @nn.compact
    def __call__(self, x: Array) -> Array:
        k, s, c_in = self.kernel, self.stride, x.shape[-1]
        kernel = self.param("kernel", _hidden_init, (k, k, c_in, self.features), self.param_dtype)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), self.param_dtype)
        x, kernel, bias = nn.dtypes.promote_dtype(x, kernel, bias, dtype=self.dtype)
        dims = ("NHWC", "HWIO", "NHWC")
        impl = self.impl
        if impl == "auto":
            impl = "conv_canonical_grads" if jax.default_backend() == "cpu" else "conv"
        if impl == "conv_patches_grad":
            y = _conv_patches_grad(x, kernel, s, self.precision)
        elif impl == "conv_canonical_grads":
            # the kernel gradient's form is chosen here, by batch size, when traced
            large = x.shape[0] > CANONICAL_KERNEL_GRAD_MAX_BATCH
            y = _conv_canonical_grads(x, kernel, s, self.precision, "patches" if large else "conv")
        elif impl == "patches":
            patches = jax.lax.conv_general_dilated_patches(
                x, (k, k), (s, s), "VALID", dimension_numbers=dims, precision=self.precision
            )  # [B, H', W', C_in * k * k], input channel major
            w = kernel.transpose(2, 0, 1, 3).reshape(c_in * k * k, self.features)
            y = jax.lax.dot_general(patches, w, (((3,), (0,)), ((), ())), precision=self.precision)
        else:
            y = jax.lax.conv_general_dilated(
                x, kernel, (s, s), "VALID", dimension_numbers=dims, precision=self.precision
            )
        return y + bias


class QNetwork(nn.Module):
    """Maps observations `[B, *obs_shape]` to Q-values `[B, num_actions]` (float32).

    With `lstm > 0` it is recurrent: `(obs [B, *obs_shape], carry [B, 2, lstm]) -> (q, carry)`,
    an LSTM between the torso (conv and `hidden_sizes` layers) and the head; the carry holds
    the LSTM's cell and hidden state (in that order, float32), zeros at an episode's start
    (`initial_carry`).

    Attributes:
      num_actions: size of the discrete action space.
      hidden_sizes: dense hidden widths.
      conv_channels: 3x3 stride-1 conv channels; empty for an MLP.
      nature: use the Nature-DQN conv torso (`conv_channels` is then ignored).
      conv_impl: the Nature torso's `Conv.impl`.
      dueling: value + advantage head.
      lstm: LSTM width (0: a feed-forward network).
      dtype: compute dtype.
      param_dtype: parameter dtype.
      precision: `jax.lax.Precision` for matmuls and convolutions (None: backend default).
    """

    num_actions: int
    hidden_sizes: Sequence[int] = (120, 84)
    conv_channels: Sequence[int] = ()
    nature: bool = False
    conv_impl: str = "auto"
    dueling: bool = False
    lstm: int = 0
    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    precision: Any = None

    def initial_carry(self, batch: int) -> Array:
        """The recurrent state at an episode's start: `[batch, 2, lstm]` float32 zeros."""
        return jnp.zeros((batch, 2, self.lstm), jnp.float32)

    @nn.compact
    def __call__(self, obs: Array, carry: Array | None = None) -> Array | tuple[Array, Array]:
        if (carry is None) != (self.lstm == 0):
            raise ValueError(
                f"QNetwork(lstm={self.lstm}) takes "
                + ("a carry [B, 2, lstm]" if self.lstm else "no carry")
                + f"; got carry={None if carry is None else carry.shape}."
            )
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
                conv = Conv(
                    c,
                    k,
                    s,
                    impl=self.conv_impl,
                    dtype=self.dtype,
                    param_dtype=self.param_dtype,
                    precision=self.precision,
                )
                x = nn.relu(conv(x))
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
        if self.lstm:
            cell = nn.OptimizedLSTMCell(
                self.lstm,
                recurrent_kernel_init=orthogonal_init,
                dtype=self.dtype,
                param_dtype=self.param_dtype,
                name="lstm",
            )
            state = (carry[:, 0].astype(self.dtype), carry[:, 1].astype(self.dtype))
            (c, h), x = cell(state, x)
            carry = jnp.stack([c, h], axis=1).astype(jnp.float32)
        if self.dueling:
            value = dense(1, _head_init)(x)
            adv = dense(self.num_actions, _head_init)(x)
            q = value + adv - adv.mean(axis=-1, keepdims=True)
        else:
            q = dense(self.num_actions, _head_init)(x)
        if self.lstm:
            return q.astype(jnp.float32), carry
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
            lstm=config.lstm,
            **{"conv_impl": config.conv_impl, **kwargs},
        )

    @classmethod
    def for_precision(
        cls, config: NetworkConfig, spec: EnvSpec, precision: Any, **kwargs: Any
    ) -> QNetwork:
        """The network for a `precision.PrecisionPolicy`: its compute dtype, fp32 params, its matmul
        precision; `kwargs` override module attributes (e.g. `conv_impl`)."""
        from jaxrl_fast.precision import COMPUTE_DTYPES

        return cls.from_config(
            config,
            spec,
            **{
                "dtype": COMPUTE_DTYPES[precision.compute],
                "param_dtype": jnp.float32,
                "precision": precision.lax_precision,
                **kwargs,
            },
        )
