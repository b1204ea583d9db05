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
from typing import Any, Callable

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


class Checkpointer:
    """One run's checkpoints: where, how often (in chunks), how many, and whether to resume.

    Raises (at construction, before anything compiles):
      ValueError: `keep < 1`, `every_env_steps < 1`, or a run it cannot save yet (the L3
        tier). envpool runs are saved whole, but their emulators cannot be: a resumed one
        starts new games (`train`, `Buffer.restart_envs`).
    """

    def __init__(
        self,
        directory: str,
        config: Any,
        *,
        every_env_steps: int | None,
        keep: int,
        resume: bool,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: must be >= 1 (checkpoints kept).")
        if every_env_steps is not None and every_env_steps < 1:
            raise ValueError(f"checkpoint_every={every_env_steps}: must be >= 1 env steps.")
        if config.replay.l3 != "off":
            raise ValueError(
                f"run_dir (checkpoints) does not save the L3 tier yet: ReplayConfig.l3="
                f"{config.replay.l3!r}; use l3='off' with run_dir."
            )
        steps_per_chunk = config.blocks_per_chunk * config.train_frequency
        every = every_env_steps or max(1, config.total_env_steps // 10)
        self.every_chunks = max(1, round(every / steps_per_chunk))
        self.chunks, self.resume = config.chunks, resume
        self._where, self._keep, self._manager = directory, keep, None

    @property
    def manager(self):
        """The orbax manager, made on first use (so that a refused run creates nothing)."""
        if self._manager is None:
            self._manager = manager(self._where, self._keep)
        return self._manager

    def restore_latest(self, like: Any) -> tuple[Any, dict, int] | None:
        """`(runner, record, chunks_done)` from the newest checkpoint when resuming, else None."""
        step = latest(self.manager) if self.resume else None
        if step is None:
            return None
        runner, record = restore(self.manager, step, like)
        return runner, record, step

    def after_chunk(self, chunks_done: int, runner: Any, record: Callable[[], dict]) -> bool:
        """Save when `chunks_done` is due (every `every_chunks`, and the last); `record()` gives
        the JSON record, called only when saving. Returns whether it saved."""
        if chunks_done % self.every_chunks and chunks_done != self.chunks:
            return False
        save(self.manager, chunks_done, runner, record())
        return True
