"""The `Buffer` interface: pure functions over a replay state pytree (flashbax's shape), plus the
host-side `report`, `close` and checkpoint hooks (`host_state`, `load_host_state`) that the
shell calls between chunks. Nothing outside `replay/` needs to know which tiers a buffer has."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.types import Array, Batch, PRNGKey, Transition

# The name a checkpoint gives a buffer's host side (`Buffer.host_state`): its L3 tier's rows.
# Kept as written by earlier versions, so that their checkpoints resume.
HOST_STATE_ITEM = "l3"


def _identity(state: Any) -> Any:
    return state


def _no_counters(state: Any) -> dict:
    del state
    return {}


def _no_report(now: dict, before: dict | None = None) -> dict:
    del now, before
    return {}


def _no_close() -> None:
    return None


def _keep_state(state: Any, fresh: Any) -> Any:
    del fresh
    return state


def _no_host_state(*, copy: bool = False) -> dict[str, np.ndarray]:
    del copy
    return {}


def _no_load_host_state(state: dict[str, Any], replay_state: Any = None) -> None:
    del replay_state
    if state:
        raise ValueError(
            f"load_host_state: this buffer keeps nothing on the host (ReplayConfig.l3='off'), "
            f"but the state holds {sorted(state)}: it was saved by a run with an L3 tier. "
            f"Resume with the config the checkpoint was saved with."
        )


def require_resolved_capacity(config: ReplayConfig) -> None:
    """Raise a `ValueError` unless `config.capacity` is a number of rows (not a share)."""
    if not isinstance(config.capacity, int):
        raise ValueError(
            f"ReplayConfig.capacity={config.capacity!r} must be resolved to a number of rows "
            f"before building the buffer (jaxrl_fast.replay.sizing.resolve_capacity)."
        )


class Buffer(NamedTuple):
    """A replay buffer as pure functions.

    Attributes:
      init: `() -> state`, an empty buffer (one seed).
      add: `(state, transition [E, ...], gamma=None) -> state`; one env step of every env.
        `gamma` (traced) is the discount of this step's n-step returns (None: the buffer's).
      sample: `(state, key, hparams=None) -> Batch` of `batch_size` transitions; PER's beta
        from `hparams` (an `HParams`) when given.
      update_priorities: `(state, index [B], td_error [B], hparams=None) -> state`, called
        once after every `sample` whose batch was used: sets priorities (PER; alpha and eps
        from `hparams` when given) and advances sample counters.
      can_sample: `state -> [] bool`, at least one complete transition is stored.
      seed_axes: a pytree like the state with 0 on leaves that differ per seed and None on
        leaves that all seeds share (cursors: seeds add in lockstep). Use it as the state's
        `in_axes`/`out_axes` when vmapping over seeds: a batched write cursor would turn each
        add into a scatter that copies the whole buffer.
      spill: `(state with seeds stacked) -> state`, called by the loop at the end of every
        block's collection (and every `sync_every` steps of the prefill), outside the seed
        vmap; it holds the buffer's host callbacks (L3), if any. The identity without L3.
      counters: `(state with seeds stacked) -> dict` of device arrays, cumulative (per seed
        `[S]` or shared `[]`); `{}` without L3.
      report: host side, `(counters_now, counters_before | None) -> dict` of python numbers
        and lists of numbers (per seed): the counters, plus this interval's `l2_hit_rate`
        computed from the differences. `{}` without L3. Print its items without knowing
        their names.
      close: `() -> None`, host side: stops the L3 reader and removes its spill files (unless
        kept). A no-op without L3.
      single_device: True when the host callbacks need all seeds on one device (L3 on: one
        ordered callback stream per program).
      restart_envs: `(state, fresh) -> state` (one seed), for envs restarted outside the loop
        (a resumed envpool run: emulators cannot be saved): the staging is taken from `fresh`
        (an `init()` state) and the newest rows, whose bootstrap observations were never
        written, leave sampling; every other stored row stays.
      host_state: host side, `(*, copy=False) -> dict[str, np.ndarray]`: what the buffer
        holds outside its state pytree, for a checkpoint to save next to the state (the L3
        store's rows, counters and prefetched rows, `spill.HostStore.host_state`); `{}`
        without L3. Call it between chunks, after the chunk's outputs are ready; it waits for
        the host callbacks still in flight. With `copy=False` the arrays are views of the
        live store (the disk tier's memory maps: no copy) that the next chunk changes, so
        write them out before running on (a synchronous save); `copy=True` gives a snapshot
        (RAM copies for host L3, kernel-made file copies in the spill dir for disk L3). The
        keys, shapes and dtypes depend only on the buffer's arguments: a fresh buffer's
        `host_state()` is the restore target.
      load_host_state: host side, `(state, replay_state=None) -> None`: puts a `host_state()`
        into this buffer's host tier (built with the same arguments, e.g. fresh), after which
        the run continues bitwise as the one that saved it. `replay_state` (seeds stacked)
        is the restored replay state: its L3 counters are checked against `state`. Call it
        between chunks, before the next `run_chunk`. Raises a `ValueError` naming the keys,
        shapes, dtypes or counters that differ (nothing is changed then); `{}` is the only
        state a buffer without L3 takes.
    """

    init: Callable[[], Any]
    add: Callable[[Any, Transition], Any]
    sample: Callable[[Any, PRNGKey], Batch]
    update_priorities: Callable[[Any, Array, Array], Any]
    can_sample: Callable[[Any], Array]
    seed_axes: Any = 0
    spill: Callable[[Any], Any] = _identity
    counters: Callable[[Any], dict] = _no_counters
    report: Callable[[dict, dict | None], dict] = _no_report
    close: Callable[[], None] = _no_close
    single_device: bool = False
    restart_envs: Callable[[Any, Any], Any] = _keep_state
    host_state: Callable[..., dict[str, np.ndarray]] = _no_host_state
    load_host_state: Callable[..., None] = _no_load_host_state

    @property
    def has_spill(self) -> bool:
        """The buffer has a `spill` hook (host callbacks) for the loop to call."""
        return self.spill is not _identity
