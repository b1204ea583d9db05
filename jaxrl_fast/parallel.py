"""Spreading vmapped seeds over local devices (DESIGN §1.3, §5).

Seeds are independent, so a mesh with one `seed` axis and `jax.shard_map` runs each device's
slice of seeds with no communication at all: every device runs the very same per-seed program
on `num_seeds / num_devices` seeds. The replay's shared write cursors (`Buffer.seed_axes` None)
are replicated: every device advances them identically.

On a CPU, XLA gives one device per process unless asked; `use_cpu_cores()` asks for one device per
core (it must run before JAX's backend starts), so seeds then run on all cores.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxrl_fast.seeds import SEED_AXIS


def use_cpu_cores(n: int | None = None) -> bool:
    """Ask XLA for `n` CPU devices (default: one per core), so seeds can use every core.

    Call it before any JAX computation. It changes nothing on GPU/TPU runs (only the CPU
    backend's device count) and is a no-op once JAX's backends have started.

    Returns:
      True if the setting was applied.
    """
    n = n or os.cpu_count() or 1
    try:
        from jax._src import xla_bridge

        started = xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):  # private API moved: let the config update decide
        started = False
    if started:
        return False
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except (RuntimeError, AttributeError, ValueError):
        return False
    return True


def seed_devices(num_seeds: int, devices: Sequence[Any] | None = None) -> list:
    """Return the devices the seeds are spread over: the most that divide `num_seeds`."""
    devices = list(devices) if devices is not None else jax.local_devices()
    n = max(d for d in range(1, len(devices) + 1) if num_seeds % d == 0)
    return devices[:n]


def seed_specs(seed_axes: Any) -> Any:
    """PartitionSpecs for a per-seed state given its vmap axes (0: per seed, None: shared)."""
    return jax.tree.map(
        lambda a: P() if a is None else P(SEED_AXIS), seed_axes, is_leaf=lambda x: x is None
    )


def shard_over_seeds(fn: Callable, mesh: Mesh, in_specs: Any, out_specs: Any) -> Callable:
    """Run `fn` on each device's slice of seeds (`jax.shard_map`, no collectives)."""
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def seed_mesh(devices: Sequence[Any]) -> Mesh:
    """A 1-D mesh named `seed` over `devices`."""
    # Auto axes: results stay ordinary arrays a user can index (`params[0]`) on the host.
    return jax.make_mesh(
        (len(devices),),
        (SEED_AXIS,),
        devices=list(devices),
        axis_types=(jax.sharding.AxisType.Auto,),
    )


def put_seeds(x: Any, mesh: Mesh) -> Any:
    """Place an array with a leading seed axis on the mesh, split over seeds."""
    return jax.device_put(x, NamedSharding(mesh, P(SEED_AXIS)))
