"""Learners: how a block's collected steps become updates, plugged in by name
(`TrainConfig.learner`).

A `Learner(name, store, learn)`:

    store(run, agent) -> Buffer
        the data store the collect step adds every env step to (`replay.Buffer`'s functions;
        its state is the seeds' `replay`), built once for one seed
    learn(parts, hooks) -> learn(seeds, fp32, block) -> (seeds, UpdateMetrics summed)
        the learning half of a training block, after its collect steps

The library's learners: "replay" (`loop.learn`: the replay buffer of `ReplayConfig`, then
`updates_per_block` x (sample -> update -> priorities)) and "rollout" (`loop.rollout`: the
block's own steps, lambda-returns from the online network, then epochs x minibatches of updates
on them: PQN). `register(name, learner)` adds one; the loop names none of them.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from jaxrl_fast.config.registry import LEARNERS


class Learner(NamedTuple):
    """A learner (module docstring)."""

    name: str
    store: Callable
    learn: Callable


def register(name: str, learner: Learner) -> None:
    """Make `learner` available as `TrainConfig(learner=name)` in this process.

    Raises:
      ValueError: `name` is empty or a built-in learner's, or is taken by another learner.
      TypeError: `learner` is not a `Learner`.
    """
    if not isinstance(learner, Learner):
        raise TypeError(
            f"register({name!r}, ...): expected a learners.Learner, got {type(learner)}."
        )
    LEARNERS.register(name, learner)


get = LEARNERS.get
names = LEARNERS.names
