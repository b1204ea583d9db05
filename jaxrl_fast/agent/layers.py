"""Layers the torsos are built from: a strided convolution with CPU-friendly gradients
(`Conv`) and an orthogonal initialiser without LAPACK (`orthogonal_init`).

The Nature torso (8x8/4, 4x4/2, 3x3/1 strided convolutions on 84x84 frames) uses `Conv`, which
keeps `nn.Conv`'s parameter layout. XLA:CPU runs a convolution fast (with Eigen) when its
dimensions are laid out NHWC x HWIO -> NHWC, and rewrites other convolutions into that form only
outside loops: inside the fused loop autodiff's gradient convolutions (kernel gradient
`f01b_i01o->01bf`, input gradient with swapped kernel channels) ran about 8x slower than outside
(`benchmarks/results/precision/precision.md`). So on CPU `Conv` writes both gradients as NHWC x HWIO
convolutions itself (`conv_canonical_grads`): the kernel gradient correlates the input, channels
as batch, with the output gradient dilated by the stride; the input gradient correlates the
dilated, padded output gradient with the flipped, channel-swapped kernel.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_fast.types import Array

hidden_init = nn.initializers.he_normal()
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
        kernel = self.param("kernel", hidden_init, (k, k, c_in, self.features), self.param_dtype)
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
