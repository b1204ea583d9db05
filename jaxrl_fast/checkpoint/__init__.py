"""Checkpoints of the whole train state (the fused loop's runner) with orbax-checkpoint.

The runner holds everything the loop carries: online and target parameters, optimiser state,
loss-scale state, the replay (ring, PER tree, cursors, L1 staging), the env state, the PRNG keys
and the block counter. A checkpoint is that tree after a chunk, with PRNG keys saved as their
key data, plus a JSON record: what the caller gives (chunks done, env steps, the chunk log so
far), the number of devices the seeds were spread over, and a CRC-32 of every leaf. `run_chunk`
is a pure function of the runner, so a run restored from chunk `k` and run to the end gives the
same parameters, bit for bit, as the run that never stopped (on the same device layout).

Saves are synchronous: the next chunk donates the runner's buffers, so no save may still read
them when it starts. The arrays go to orbax as they are (on CPU, no host copy is made) and are
written in data files of at most 16 MiB, so a save needs little memory beyond the state.

What can go wrong, and what happens:

* Killed during a save: orbax writes each checkpoint to `<step>.orbax-checkpoint-tmp` and renames
  it when complete, so the previous checkpoints are intact; `manager` removes the unfinished
  directory.
* A save fails (a full disk): `save` removes the unfinished checkpoint and raises `OSError`
  naming the directory and the step; the checkpoints before it are kept.
* A damaged checkpoint (a truncated, deleted or garbled file; missing metadata):
  `Checkpointer.restore_latest` warns and restores the one before; the damaged ones are renamed
  to `<step>.unreadable` (kept, never picked again). Garbled array bytes that orbax reads
  without an error are caught by the record's CRC-32s.

Multi-process runs (`jax.distributed`): every process calls `save` and `restore` together, on a
directory they all see (one machine, or a shared file system); each writes and reads only its
own shards (orbax's multi-process arrays; process 0 writes the record). The record keeps a
CRC-32 of each process's shards of every leaf (`process_checksums`), each process checks its
own after a restore, and the processes agree on every verdict (a checkpoint damaged in one
process's files is passed over by all), so they always restore the same step. Directory
changes (removing unfinished saves, setting damaged ones aside) are process 0's, behind a
barrier.
"""

from jaxrl_fast.checkpoint.checkpointer import UNREADABLE_SUFFIX, Checkpointer
from jaxrl_fast.checkpoint.crc import checksums, crc32, local_crc32, process_checksums
from jaxrl_fast.checkpoint.store import (
    TMP_SUFFIX,
    device_count,
    latest,
    manager,
    read_state,
    restore,
    save,
)

__all__ = [
    "read_state",
    "TMP_SUFFIX",
    "UNREADABLE_SUFFIX",
    "Checkpointer",
    "checksums",
    "crc32",
    "device_count",
    "latest",
    "local_crc32",
    "manager",
    "process_checksums",
    "restore",
    "save",
]
