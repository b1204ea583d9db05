"""The `Buffer` interface: pure functions over a replay state pytree (flashbax's shape)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from jaxrl_fast.types import Array, Batch, PRNGKey, Transition


class Buffer(NamedTuple):
    """A replay buffer as pure functions.

    Attributes:
      init: `() -> state`, an empty buffer.
      add: `(state, transition [E, ...]) -> state`; one row per env.
      sample: `(state, key) -> Batch` of `batch_size` transitions.
      update_priorities: `(state, index [B], td_error [B]) -> state` (identity for uniform replay).
      can_sample: `state -> [] bool`, at least one complete transition is stored.
      seed_axes: a pytree like the state with 0 on leaves that differ per seed and None on
        leaves that all seeds share (cursors: seeds add in lockstep). Use it as the state's
        `in_axes`/`out_axes` when vmapping over seeds: a batched write cursor would turn each
        add into a scatter that copies the whole buffer.
    """

    init: Callable[[], Any]
    add: Callable[[Any, Transition], Any]
    sample: Callable[[Any, PRNGKey], Batch]
    update_priorities: Callable[[Any, Array, Array], Any]
    can_sample: Callable[[Any], Array]
    seed_axes: Any = 0
