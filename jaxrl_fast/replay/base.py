"""The `Buffer` interface: pure functions over a replay state pytree (flashbax's shape)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from jaxrl_fast.types import Array, Batch, PRNGKey, Transition


def _identity(state: Any) -> Any:
    return state


def _no_metrics(state: Any) -> dict:
    del state
    return {}


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
      host_sync: `(state with seeds stacked) -> state`, called by the loop once per iteration
        at the top level of the scan body, outside the seed vmap; it holds the buffer's host
        callbacks (L3), if any.
      metrics: `(state with seeds stacked) -> dict` of cumulative counters.
      store: the host-side L3 store (`replay.spill.HostStore`) or None; `close()` it when done.
      layout: the L3 layout (`replay.tiered.L3Layout`) or None.
    """

    init: Callable[[], Any]
    add: Callable[[Any, Transition], Any]
    sample: Callable[[Any, PRNGKey], Batch]
    update_priorities: Callable[[Any, Array, Array], Any]
    can_sample: Callable[[Any], Array]
    seed_axes: Any = 0
    host_sync: Callable[[Any], Any] = _identity
    metrics: Callable[[Any], dict] = _no_metrics
    store: Any = None
    layout: Any = None
