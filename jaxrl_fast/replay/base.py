"""The `Buffer` interface: pure functions over a replay state pytree (flashbax's shape), plus the
host-side `report` and `close` that the shell calls between chunks. Nothing outside `replay/`
needs to know which tiers a buffer has."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from jaxrl_fast.config import ReplayConfig
from jaxrl_fast.types import Array, Batch, PRNGKey, Transition


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
      add: `(state, transition [E, ...]) -> state`; one env step of every env.
      sample: `(state, key) -> Batch` of `batch_size` transitions.
      update_priorities: `(state, index [B], td_error [B]) -> state`, called once after every
        `sample` whose batch was used: sets priorities (PER) and advances sample counters.
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

    @property
    def has_spill(self) -> bool:
        """The buffer has a `spill` hook (host callbacks) for the loop to call."""
        return self.spill is not _identity
