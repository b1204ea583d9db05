"""Checkpoints of the whole train state (the fused loop's runner) with orbax-checkpoint.

The runner holds everything the loop carries: online and target parameters, optimiser state,
loss-scale state, the replay (ring, PER tree, cursors, L1 staging), the env state, the PRNG keys
and the block counter. A checkpoint is that tree after a chunk, with PRNG keys saved as their
key data, plus a JSON record (chunks done, env steps, the chunk log so far). `run_chunk` is a
pure function of the runner, so a run restored from chunk `k` and run to the end gives the same
parameters, bit for bit, as the run that never stopped.

Saves are synchronous: the next chunk donates the runner's buffers, so no save may still read
them when it starts. orbax writes each checkpoint to a temporary directory and renames it when
complete, so a run killed during a save keeps the previous checkpoint.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np


def _is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def manager(directory: str, keep: int):
    """An orbax `CheckpointManager` over `directory` keeping the last `keep` checkpoints."""
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False)
    return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def save(mngr, chunks_done: int, runner: Any, record: dict) -> None:
    """Save `runner` after `chunks_done` chunks, and `record` (JSON-ready), as that step."""
    import orbax.checkpoint as ocp

    host = jax.tree.map(lambda x: np.asarray(jax.random.key_data(x) if _is_key(x) else x), runner)
    args = ocp.args.Composite(state=ocp.args.StandardSave(host), record=ocp.args.JsonSave(record))
    mngr.save(chunks_done, args=args)
    mngr.wait_until_finished()


def latest(mngr) -> int | None:
    """The newest complete checkpoint's step (chunks done), or None."""
    return mngr.latest_step()


def restore(mngr, step: int, like: Any) -> tuple[Any, dict]:
    """Restore checkpoint `step` into a runner laid out as `like` (a runner from `init`: its
    shardings and key implementations are used); returns `(runner, record)`."""
    import orbax.checkpoint as ocp

    def target(x):
        data = jax.random.key_data(x) if _is_key(x) else x
        return jax.ShapeDtypeStruct(data.shape, data.dtype)

    args = ocp.args.Composite(
        state=ocp.args.StandardRestore(jax.tree.map(target, like)), record=ocp.args.JsonRestore()
    )
    out = mngr.restore(step, args=args)

    def place(saved, x):
        value = np.asarray(saved)
        if _is_key(x):
            value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(x))
        return jax.device_put(value, x.sharding)

    return jax.tree.map(place, out["state"], like), dict(out["record"])
