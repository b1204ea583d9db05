"""Type aliases and the small data containers shared by every part of jaxrl_fast."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

Array = jax.Array
PRNGKey = jax.Array  # a typed key from `jax.random.key`
Params = Any  # a flax parameter pytree


class Transition(NamedTuple):
    """One environment step as the replay stores it (leading axis `[num_envs]` when added).

    Attributes:
      obs: observation the action was taken in, env's own dtype.
      action: int32 action.
      reward: float32 reward of the step.
      terminated: bool, the episode ended in a terminal state (no bootstrap).
      truncated: bool, the episode was cut by a time limit (bootstrap from the next row).
      reset: bool, this was a reset step: the action was ignored and the next row is the first
        observation of a new episode. Such rows are never sampled as transitions.
      carry: a recurrent agent's state before it saw `obs` (`[E, 2, H]` float32, zeros at an
        episode's start), stored with sequences; None for a feed-forward agent.
    """

    obs: Array
    action: Array
    reward: Array
    terminated: Array
    truncated: Array
    reset: Array
    carry: Any = None


class Batch(NamedTuple):
    """A sampled batch of transitions. Leading axis `[B]`.

    Attributes:
      obs: `[B, *obs_shape]` observations, storage dtype.
      action: `[B]` int32.
      reward: `[B]` float32.
      discount: `[B]` float32 bootstrap factor: `gamma ** k` for an n-step (k-step) target,
        0 where the episode terminated.
      next_obs: `[B, *obs_shape]` the observation to bootstrap from (same episode).
      weight: `[B]` float32 loss weight; 0 for rows that are not valid transitions.
      index: `[B]` int32 flat row index (for priority updates); -1 for a row that is not in
        L2 (an L3 or demonstration row).
      demo: `[B]` bool, the row is a demonstration (`DemoConfig`); None without them.
    """

    obs: Array
    action: Array
    reward: Array
    discount: Array
    next_obs: Array
    weight: Array
    index: Array
    demo: Array | None = None


class SequenceBatch(NamedTuple):
    """Sampled sequences of consecutive steps of one env each (recurrent replay,
    `replay/sequence.py`). Leading axes `[B, W]`, W = burn-in + trained positions + n_step.

    Attributes:
      obs: `[B, W, *obs_shape]` observations, storage dtype.
      action: `[B, W]` int32.
      reward: `[B, W]` float32 one-step rewards.
      discount: `[B, W]` float32, 0 where the step terminated its episode, else 1 (gamma is
        applied by the loss).
      valid: `[B, W]` bool, the step is a transition; False for a reset step (its action was
        ignored, and the next step starts a new episode) and for never-written rows.
      carry: `[B, 2, H]` float32 recurrent state stored when the first step was acted on.
      weight: `[B]` float32 sequence weight; 0 when nothing can be sampled yet.
      index: `[B]` int32 flat row index of the first step.
    """

    obs: Array
    action: Array
    reward: Array
    discount: Array
    valid: Array
    carry: Array
    weight: Array
    index: Array
