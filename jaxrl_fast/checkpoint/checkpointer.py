"""`Checkpointer`: one run's checkpoint policy (where, how often, how many, whether to resume)
and the resume that passes over damaged checkpoints."""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable

import jax

from jaxrl_fast.checkpoint.store import device_count, manager, one_line, restore, save
from jaxrl_fast.parallel.distributed import any_process, barrier, main_decides

UNREADABLE_SUFFIX = ".unreadable"


class Checkpointer:
    """One run's checkpoints: where, how often (in chunks and in wall time), how many, and
    whether to resume.

    Args:
      directory: the checkpoints' directory (made on the first save or resume).
      config: the run's `TrainConfig`.
      every_env_steps: env steps per seed between checkpoints, rounded to whole chunks (None:
        about every 10% of the run). The last chunk is always saved.
      keep: checkpoints kept (the newest).
      resume: whether `restore_latest` restores.
      every_seconds: also save after a chunk that ends this many seconds (`clock`) after the
        last save, or after the start when there was none; None: only `every_env_steps`.
        Checkpoints come at chunk ends, so a chunk longer than this is not split.
      num_devices: the devices the seeds are spread over, recorded in each checkpoint and
        compared on resume (None: read from the runner's shardings).
      clock: seconds, monotonic (tests pass a fake one).

    Raises (at construction, before anything compiles):
      ValueError: `keep < 1`, `every_env_steps < 1`, `every_seconds <= 0` or `num_devices < 1`.
        envpool runs are saved whole, but their emulators cannot be: a resumed one starts new
        games (`train`, `Buffer.restart_envs`). A replay that keeps rows on the host has its host
        arrays saved too (the shell sets `host_state` / `load_host_state` from the `Buffer`).
    """

    def __init__(
        self,
        directory: str,
        config: Any,
        *,
        every_env_steps: int | None,
        keep: int,
        resume: bool,
        every_seconds: float | None = 600.0,
        num_devices: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep}: must be >= 1 (checkpoints kept).")
        if every_env_steps is not None and every_env_steps < 1:
            raise ValueError(f"checkpoint_every={every_env_steps}: must be >= 1 env steps.")
        if every_seconds is not None and not every_seconds > 0:
            raise ValueError(
                f"every_seconds={every_seconds!r}: must be > 0 seconds of wall time between "
                f"checkpoints (or None: save by env steps only)."
            )
        if num_devices is not None and num_devices < 1:
            raise ValueError(f"num_devices={num_devices}: must be >= 1 (or None: from the runner).")
        steps_per_chunk = config.blocks_per_chunk * config.train_frequency
        every = every_env_steps or max(1, config.total_env_steps // 10)
        self.every_chunks = max(1, round(every / steps_per_chunk))
        self.every_seconds, self.num_devices = every_seconds, num_devices
        self.chunks, self.resume = config.chunks, resume
        self._where, self._keep, self._manager = directory, keep, None
        self._clock = clock
        self._last_save = clock()
        # the replay's host side, set by the shell once the buffer exists: `() -> dict` of
        # arrays to save, and `(arrays, runner) -> None` to load them into a fresh buffer
        self.host_state: Callable[[], dict] | None = None
        self.load_host_state: Callable[[dict, Any], None] | None = None

    @property
    def directory(self) -> str:
        """The checkpoints' directory."""
        return os.fspath(self._where)

    @property
    def manager(self):
        """The orbax manager, made on first use (so that a refused run creates nothing)."""
        if self._manager is None:
            self._manager = manager(self._where, self._keep)
        return self._manager

    def restore_latest(self, like: Any) -> tuple[Any, dict, int] | None:
        """`(runner, record, chunks_done)` from the newest usable checkpoint when resuming, else
        None (also when there is no checkpoint yet).

        A checkpoint that cannot be restored gives a warning naming it and the error, and the
        one before is tried; the unusable ones newer than the one restored are renamed to
        `<step>.unreadable`. A checkpoint saved over another number of devices gives a warning:
        the resumed run equals the uninterrupted one to float rounding, not bitwise.

        Raises:
          ValueError: there are checkpoints and none can be restored.
        """
        if not self.resume:
            return None
        steps = sorted(self.manager.all_steps(), reverse=True)
        unusable = []
        for step in steps:
            error = None
            try:
                host_like = self.host_state() if self.host_state is not None else None
                runner, record, *host = restore(self.manager, step, like, host_like)
                if host:
                    self.load_host_state(host[0], runner)
            except MemoryError:  # not damage: the checkpoint may be fine
                raise
            except Exception as err:  # any damage: warn, then try the checkpoint before
                error = one_line(err)
            # every process takes the same verdict: damage in one process's files is damage
            if any_process(error is not None):
                why = error or "damaged in another process's files"
                warnings.warn(
                    f"checkpoint {step} in {self._where} cannot be restored ({why}); "
                    f"trying the one before.",
                    stacklevel=2,
                )
                unusable.append(step)
                continue
            self._set_aside(unusable)
            self._check_devices(step, record, like)
            self._last_save = self._clock()
            return runner, record, step
        if steps:
            raise ValueError(
                f"resume: none of the checkpoints in {self._where} (steps "
                f"{', '.join(map(str, steps))}) can be restored (the warnings above say why). "
                f"Nothing was changed; to start the run over, use a new run_dir."
            )
        return None

    def _set_aside(self, steps: list[int]) -> None:
        root = os.fspath(self.manager.directory)
        for step in steps if jax.process_index() == 0 else ():
            target, n = os.path.join(root, f"{step}{UNREADABLE_SUFFIX}"), 1
            while os.path.exists(target):
                target, n = os.path.join(root, f"{step}{UNREADABLE_SUFFIX}.{n}"), n + 1
            os.rename(os.path.join(root, str(step)), target)
        if steps:
            barrier("jaxrl_fast.checkpoint.set_aside")
            self.manager.reload()

    def _check_devices(self, step: int, record: dict, like: Any) -> None:
        saved, now = record.get("num_devices"), self.num_devices or device_count(like)
        if saved is not None and saved != now:
            warnings.warn(
                f"checkpoint {step} was saved from a run spread over {saved} device(s) and this "
                f"run uses {now}: the resumed run will equal an uninterrupted one to float "
                f"rounding, not bitwise (bitwise needs the same device layout).",
                stacklevel=3,
            )

    def after_chunk(self, chunks_done: int, runner: Any, record: Callable[[], dict]) -> bool:
        """Save when `chunks_done` is due (every `every_chunks`, the last, or `every_seconds`
        after the last save); `record()` gives the JSON record, called only when saving.
        Returns whether it saved."""
        due = chunks_done % self.every_chunks == 0 or chunks_done == self.chunks
        if not due and self.every_seconds is not None:
            due = self._clock() - self._last_save >= self.every_seconds
            if jax.process_count() > 1:  # process 0's clock decides for all (each must save)
                due = main_decides(due)
        if not due:
            return False
        host = self.host_state() if self.host_state is not None else None
        save(self.manager, chunks_done, runner, record(), num_devices=self.num_devices, host=host)
        self._last_save = self._clock()
        return True
