"""Learners: how a block's collected steps become updates, plugged in by name
(`TrainConfig.learner`).

A `Learner(name, store, learn, replay=True, check=None, with_num_envs=None)`:

    store(run, agent) -> Buffer
        the data store the collect step adds every env step to (`replay.Buffer`'s functions;
        its state is the seeds' `replay`), built once for one seed
    learn(parts, hooks) -> learn(seeds, fp32, block) -> (seeds, UpdateMetrics summed)
        the learning half of a training block, after its collect steps
    replay
        whether it learns from a replay buffer of `ReplayConfig`'s rows (a prefill of at least
        two rows per env, a capacity in whole rows); False: from its own blocks (no prefill)
    check(config) -> None
        its own checks of a `TrainConfig` that names it (a `ValueError` naming the field),
        run when the config is made, before anything compiles
    with_num_envs(config, num_envs) -> dict
        the changes `TrainConfig.with_num_envs` makes for it (its blocks keep their steps per
        env, say), merged over the generic ones

A learner's own knobs are its config section (`config.sections`, `TrainConfig.algo.NAME`).

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
    replay: bool = True
    check: Callable | None = None
    with_num_envs: Callable | None = None


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
