"""What the data replicas of a seed exchange, and when: `Exchange` (from `ParallelConfig`).

Every function here runs inside the program that `jax.shard_map` runs per device, with
`check_vma=False` (`mesh.shard_over_seeds`): there, `jax.grad` of a replicated parameter gives
the local gradient, so `pmean` is the mean gradient. (Under shard_map's default `check_vma=True`
the gradient of a replicated argument is already summed over the axis and "grad then pmean"
returns `data` x the mean, a trap that doubles every step on 2 replicas.
`tests/parallel/test_data_parallel.py` checks the mean against gradients computed apart.)

- sync "every_step", compression "none": gradients averaged in fp32 at every update, before
  clipping and Adam, so every replica applies the same step and the replicas stay bitwise equal;
- "every_step", "onebit": the optimiser is `onebit.onebit_adam`, which does its own exchange;
- "every:K": no per-update exchange; the loop averages parameters (online and target) every
  K updates (`average`), local SGD.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxrl_fast.config import ParallelConfig
from jaxrl_fast.parallel import onebit
from jaxrl_fast.parallel.mesh import DATA_AXIS
from jaxrl_fast.types import Array


@dataclasses.dataclass(frozen=True)
class Exchange:
    """How a seed's `replicas` share learning over mesh axis `axis`.

    Attributes:
      replicas: data replicas per seed (1: nothing is exchanged, every method is the identity).
      sync_period: None (every update) or K (parameters averaged every K updates).
      compression: "none" or "onebit".
      warmup_updates: 1-bit Adam's full-precision updates.
      axis: the mesh axis of the replicas.
    """

    replicas: int = 1
    sync_period: int | None = None
    compression: str = "none"
    warmup_updates: int = 1
    axis: str = DATA_AXIS

    @property
    def active(self) -> bool:
        return self.replicas > 1

    @property
    def onebit(self) -> bool:
        return self.active and self.compression == "onebit"

    def grads(self, grads: Any) -> Any:
        """The mean gradient over the replicas where gradients are averaged in fp32 every
        update; else (1-bit, local SGD, one replica) the local gradient."""
        if self.active and self.sync_period is None and self.compression == "none":
            return pmean_flat(grads, self.axis)
        return grads

    def all(self, flag: Array) -> Array:
        """True where `flag` holds on every replica (e.g. all gradients finite), so replicas
        take the same branch."""
        if not self.active:
            return flag
        return jax.lax.psum(jnp.logical_not(flag).astype(jnp.int32), self.axis) == 0

    def mean(self, tree: Any) -> Any:
        """Mean over the replicas (metrics, evaluation returns)."""
        return jax.lax.pmean(tree, self.axis) if self.active else tree

    def sum(self, tree: Any) -> Any:
        """Sum over the replicas (episode counts and returns)."""
        return jax.lax.psum(tree, self.axis) if self.active else tree

    def replica(self) -> Array:
        """This device's replica index (0 with one replica)."""
        return jax.lax.axis_index(self.axis) if self.active else jnp.zeros((), jnp.int32)

    def due(self, updates_done: Array) -> Array | None:
        """Whether the parameters are averaged after `updates_done` (shared) updates; None
        where they never are (no local SGD)."""
        if not self.active or self.sync_period is None:
            return None
        return updates_done % self.sync_period == 0

    def average(self, params: Any) -> Any:
        """Parameters averaged over the replicas (local SGD's sync)."""
        return pmean_flat(params, self.axis)

    def bytes_per_update(self, params: Any) -> float:
        """Bytes one replica puts into the exchange per update: the fp32 gradients (sync
        every_step), the 1-bit momentum (onebit, after its warm-up, which sends the fp32
        gradients), or the online and target parameters every K updates, per update."""
        if not self.active:
            return 0.0
        full = onebit.full_bytes(params)
        if self.sync_period is not None:
            return 2 * full / self.sync_period
        if self.compression == "none":
            return float(full)
        return float(onebit.compressed_bytes(params))


def pmean_flat(tree: Any, axis: str) -> Any:
    """`pmean` of a pytree as one flat vector: one collective instead of one per tensor."""
    flat, unravel = ravel_pytree(tree)
    return unravel(jax.lax.pmean(flat, axis))


def make_exchange(config: ParallelConfig, total_updates: int) -> Exchange:
    """The `Exchange` of a run with `total_updates` updates per seed."""
    warmup = max(1, round(config.warmup_fraction * total_updates))
    return Exchange(
        replicas=config.data,
        sync_period=config.sync_period,
        compression=config.compression,
        warmup_updates=warmup,
    )
