"""Devices, replicas and processes.

- `mesh`: the `seed` x `data` device mesh, the specs of the program's state on it, placement;
- `exchange`: what a seed's data replicas exchange and when (`Exchange`, from `ParallelConfig`);
- `onebit`: 1-bit exchange with error feedback, and 1-bit Adam;
- `distributed`: multi-process runs on `jax.distributed`, results read on the host;
- `launch`: `jaxrl-fast launch --local N`, local processes of one run.
"""

from jaxrl_fast.parallel.distributed import (
    any_process,
    barrier,
    initialize,
    is_main,
    main_decides,
    process_count,
    to_host,
)
from jaxrl_fast.parallel.exchange import Exchange, make_exchange
from jaxrl_fast.parallel.mesh import (
    DATA_AXIS,
    lane_mesh,
    lane_specs,
    put_global,
    put_seeds,
    seed_devices,
    seed_mesh,
    seed_specs,
    shard_over_seeds,
    use_cpu_cores,
)

__all__ = [
    "DATA_AXIS",
    "any_process",
    "barrier",
    "Exchange",
    "initialize",
    "is_main",
    "lane_mesh",
    "lane_specs",
    "main_decides",
    "make_exchange",
    "process_count",
    "put_global",
    "put_seeds",
    "seed_devices",
    "seed_mesh",
    "seed_specs",
    "shard_over_seeds",
    "to_host",
    "use_cpu_cores",
]
