"""Several processes, one program: `jax.distributed` set-up, and reading results on the host.

Every process runs the same `train` call; replay stays in each process's devices, and
parameters, gradients and metrics cross processes only through the program's collectives and
`to_host` (an all-gather). Process 0 alone prints, shows progress and writes files.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    timeout_s: int = 120,
) -> None:
    """Join a multi-process run (`jax.distributed.initialize`), before any JAX computation.

    With no arguments JAX detects the cluster itself (SLURM, Open MPI, Cloud TPU); otherwise
    all three are needed.

    Raises:
      ValueError: some but not all of the three given, or `process_id` out of range.
    """
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given) and not all(given):
        raise ValueError(
            "--coordinator HOST:PORT, --num-processes N and --process-id I go together "
            f"(got coordinator={coordinator!r}, num_processes={num_processes!r}, "
            f"process_id={process_id!r}); give all three, or none to let JAX detect the cluster."
        )
    if all(given):
        if not (isinstance(num_processes, int) and num_processes >= 1):
            raise ValueError(f"--num-processes={num_processes!r}: expected an int >= 1")
        if not (isinstance(process_id, int) and 0 <= process_id < num_processes):
            raise ValueError(
                f"--process-id={process_id!r}: expected an int in [0, {num_processes - 1}]"
            )
        if ":" not in coordinator:
            raise ValueError(f"--coordinator={coordinator!r}: expected HOST:PORT")
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=timeout_s,
    )


def process_count() -> int:
    """The processes of this run (1 unless `initialize` joined a multi-process run)."""
    return jax.process_count()


def is_main() -> bool:
    """Whether this is process 0 (the one that prints and writes)."""
    return jax.process_index() == 0


def barrier(name: str) -> None:
    """Wait until every process reaches the barrier `name` (nothing with one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def any_process(flag: bool) -> bool:
    """Whether `flag` holds on any process: every process gets the same answer. With several
    processes this is a collective: every process must call it, in the same order."""
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.int32(bool(flag)))))


def main_decides(flag: bool) -> bool:
    """Process 0's `flag`, on every process (a collective with several processes)."""
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.bool_(flag)))


def to_host(tree: Any) -> Any:
    """Numpy copies of a pytree of (global) arrays. With several processes this is a
    collective: every process must call it, in the same order."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    def one(x):
        if not isinstance(x, jax.Array) or x.is_fully_addressable:
            return np.asarray(x)
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    return jax.tree.map(one, tree)
