"""The device mesh: seeds spread over devices, and a seed's data replicas on a `data` axis.

Seeds are independent, so a mesh with one `seed` axis and `jax.shard_map` runs each device's
slice of seeds with no communication at all: every device runs the very same per-seed program
on `num_seeds / num_devices` seeds. The replay's shared write cursors (`Buffer.seed_axes` None)
are replicated: every device advances them identically.

With `ParallelConfig.data` = D > 1 the mesh has two axes, `seed` x `data`; the program's
per-seed leaves hold one copy per replica ("lanes", `[D * S]`, replica-major: lane `d * S + s` is
replica d of seed s), split over both axes, so every device holds its replica's slice of
seeds and the collectives of `parallel.exchange` run over `data`.

On a CPU, XLA gives one device per process unless asked; `use_cpu_cores()` asks for one device per
core (it must run before JAX's backend starts), so seeds then run on all cores.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxrl_fast.parallel.seeds import SEED_AXIS

DATA_AXIS = "data"


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


def lane_mesh(num_seeds: int, data: int, devices: Sequence[Any]) -> Mesh:
    """A `seed` x `data` mesh: `data` replicas, each over the most devices that divide the
    seeds among what `devices` leaves per replica.

    Raises:
      ValueError: fewer than `data` devices.
    """
    devices = list(devices)
    if len(devices) < data:
        raise ValueError(
            f"ParallelConfig.data={data} needs {data} devices (one per replica); the run sees "
            f"{len(devices)} ({devices[0].platform if devices else 'none'}). On a CPU call "
            f"jaxrl_fast.parallel.use_cpu_cores({data}) before JAX starts (`jaxrl-fast train` "
            f"uses every core), or run `jaxrl-fast launch --local {data} -- train ...`."
        )
    per_replica = len(devices) // data
    seeds = max(d for d in range(1, per_replica + 1) if num_seeds % d == 0)
    grid = [[devices[i * data + j] for j in range(data)] for i in range(seeds)]
    return jax.make_mesh(
        (seeds, data),
        (SEED_AXIS, DATA_AXIS),
        devices=[d for row in grid for d in row],
        axis_types=(jax.sharding.AxisType.Auto,) * 2,
    )


def lane_specs(seed_axes: Any) -> Any:
    """PartitionSpecs for a state of lanes given its vmap axes (0: per lane, None: shared)."""
    return jax.tree.map(
        lambda a: P() if a is None else P((DATA_AXIS, SEED_AXIS)),
        seed_axes,
        is_leaf=lambda x: x is None,
    )


def put_global(x: Any, mesh: Mesh, spec: P) -> Any:
    """Place a host value (the same on every process) on `mesh` as `spec` says; works when the
    mesh spans several processes (typed PRNG keys included)."""
    sharding = NamedSharding(mesh, spec)
    if jax.process_count() == 1:
        return jax.device_put(x, sharding)
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        impl = jax.random.key_impl(x)
        data = np.asarray(jax.random.key_data(x))
        placed = jax.make_array_from_callback(
            data.shape, NamedSharding(mesh, P(*spec, None)), lambda index: data[index]
        )
        return jax.jit(lambda d: jax.random.wrap_key_data(d, impl=impl), out_shardings=sharding)(
            placed
        )
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])
