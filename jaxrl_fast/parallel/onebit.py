"""1-bit exchange with error feedback, and 1-bit Adam (Tang et al., 2021) built on it.

`exchange_signs(x, axis)` sends each tensor of `x` as its signs packed 8 per byte plus one
float32 scale (the mean absolute value: the scale that minimises the squared error of
`scale * sign(x)`), gathers every replica's, and returns their mean and this replica's own
compressed value; the caller keeps `x - own` as the residual added to the next step's `x`
(error feedback), so what compression drops is delayed, not lost.

`onebit_adam` is Adam whose first `warmup_updates` steps average the gradients in full (fp32),
after which the second moment is frozen and each replica's momentum, plus its residual, is
exchanged in 1 bit. Every replica ends each step with the same momentum, so their parameters stay
equal. Phase changes follow a `step` shared by the replicas (an extra argument of `update`),
never a per-seed counter: under a seed `vmap` a per-seed predicate would run both branches,
and both collectives, at every step.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from jaxrl_fast.types import Array

_BITS = np.arange(8, dtype=np.uint8)  # numpy: importing must not start a JAX backend


def pack_signs(x: Array) -> tuple[Array, Array]:
    """`x`'s signs (>= 0 as 1) packed 8 per uint8 over its flattened elements, and the float32
    scale `mean(|x|)`."""
    flat = x.reshape(-1).astype(jnp.float32)
    pad = -flat.shape[0] % 8
    bits = (jnp.pad(flat, (0, pad)) >= 0).astype(jnp.uint8).reshape(-1, 8)
    packed = jnp.sum(bits << _BITS, axis=-1, dtype=jnp.uint8)
    return packed, jnp.mean(jnp.abs(flat))


def unpack_signs(packed: Array, scale: Array, like: Array) -> Array:
    """`scale * sign` with the shape and dtype of `like`, from `pack_signs`'s output."""
    bits = (packed[..., None] >> _BITS) & 1
    signs = bits.reshape(-1)[: like.size].astype(jnp.float32) * 2.0 - 1.0
    return (scale * signs).reshape(like.shape).astype(like.dtype)


def exchange_signs(x: Any, axis: str) -> tuple[Any, Any]:
    """Over the replicas of mesh axis `axis`: the mean of every replica's 1-bit compressed `x`
    (a pytree), and this replica's own compressed `x`. What crosses the wire per tensor of n
    elements is `ceil(n / 8)` bytes of signs and a 4-byte scale, all tensors in one uint8
    all-gather (one collective per exchange: on a CPU a collective's latency, not its bytes,
    dominates small networks)."""
    leaves, treedef = jax.tree.flatten(x)
    packed, scales = zip(*(pack_signs(leaf) for leaf in leaves), strict=True)
    scale_bytes = jax.lax.bitcast_convert_type(jnp.stack(scales), jnp.uint8).reshape(-1)
    message = jnp.concatenate([*packed, scale_bytes])
    gathered = jax.lax.all_gather(message, axis)  # [D, sum ceil(n/8) + 4 * tensors] uint8
    tail = gathered[:, -scale_bytes.shape[0] :].reshape(gathered.shape[0], len(leaves), 4)
    all_scales = jax.lax.bitcast_convert_type(tail, jnp.float32)  # [D, tensors]
    means, owns, start = [], [], 0
    for i, (leaf, own_packed) in enumerate(zip(leaves, packed, strict=True)):
        part = gathered[:, start : start + own_packed.shape[0]]
        start += own_packed.shape[0]
        replicas = jax.vmap(lambda p, s, leaf=leaf: unpack_signs(p, s, leaf))(
            part, all_scales[:, i]
        )
        means.append(jnp.mean(replicas, axis=0))
        owns.append(unpack_signs(own_packed, scales[i], leaf))
    return jax.tree.unflatten(treedef, means), jax.tree.unflatten(treedef, owns)


def compressed_bytes(tree: Any) -> int:
    """Bytes one replica sends per 1-bit exchange of `tree`: signs and a scale per tensor."""
    return sum(math.ceil(x.size / 8) + 4 for x in jax.tree.leaves(tree))


def full_bytes(tree: Any) -> int:
    """Bytes one replica contributes per fp32 exchange (all-reduce) of `tree`."""
    return sum(4 * x.size for x in jax.tree.leaves(tree))


class OneBitAdamState(NamedTuple):
    """1-bit Adam's state: the shared momentum and (frozen after the warm-up) second moment,
    and this replica's compression residual."""

    count: Array  # [] int32, steps taken
    mu: Any
    nu: Any
    error: Any


def onebit_adam(
    learning_rate: float | Callable[[Array], Array],
    *,
    axis: str,
    warmup_updates: int,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
) -> optax.GradientTransformationExtraArgs:
    """Adam over replicas of mesh axis `axis` that receive their local gradients.

    `update(grads, state, params, step=...)`: `step` is the update index shared by every seed
    and replica; steps below `warmup_updates` average the gradients in fp32 and update both
    moments (so they equal Adam on the averaged gradient); later steps freeze the second moment
    and exchange `b1 * mu + (1 - b1) * grads + residual` in 1 bit (`exchange_signs`).
    """
    if warmup_updates < 1:
        raise ValueError(f"onebit_adam: warmup_updates={warmup_updates} must be >= 1")

    def init(params: Any) -> OneBitAdamState:
        zeros = jax.tree.map(lambda p: jnp.zeros_like(p, jnp.float32), params)
        return OneBitAdamState(jnp.zeros((), jnp.int32), zeros, zeros, zeros)

    def update(grads: Any, state: OneBitAdamState, params: Any = None, *, step=None, **_):
        if step is None:
            raise ValueError("onebit_adam.update needs step= (the shared update index)")
        grads = jax.tree.map(lambda g: g.astype(jnp.float32), grads)

        def full(grads, state):
            flat, unravel = ravel_pytree(grads)
            g = unravel(jax.lax.pmean(flat, axis))  # one collective for every tensor
            mu = jax.tree.map(lambda m, x: b1 * m + (1 - b1) * x, state.mu, g)
            nu = jax.tree.map(lambda v, x: b2 * v + (1 - b2) * x * x, state.nu, g)
            return mu, nu, state.error

        def compressed(grads, state):
            x = jax.tree.map(
                lambda m, g, e: b1 * m + (1 - b1) * g + e, state.mu, grads, state.error
            )
            mean, own = exchange_signs(x, axis)
            error = jax.tree.map(jnp.subtract, x, own)
            return mean, state.nu, error

        with jax.named_scope("onebit_warmup"):  # two collectives of different sizes
            mu, nu, error = jax.lax.cond(step < warmup_updates, full, compressed, grads, state)
        count = state.count + 1
        nu_count = jnp.minimum(count, warmup_updates)
        mu_corr = 1 - b1 ** count.astype(jnp.float32)
        nu_corr = 1 - b2 ** nu_count.astype(jnp.float32)
        lr = learning_rate(state.count) if callable(learning_rate) else learning_rate
        updates = jax.tree.map(
            lambda m, v: -lr * (m / mu_corr) / (jnp.sqrt(v / nu_corr) + eps), mu, nu
        )
        return updates, OneBitAdamState(count, mu, nu, error)

    return optax.GradientTransformationExtraArgs(init, update)
