"""Loop extensions: what a run adds to the fused loop, as hooks the loop folds over.

The loop (`loop.make_train`) is written once and names no feature. Whatever a run adds to it
(reward shaping, env parameters varying over seeds or training, data replicas, the replay's
host callbacks, the precision fallback, a user's own piece) is an `Extension`: a named tuple of
pure functions, each a hook the loop calls at one place, every one optional (a hook left None is
not called, so an extension costs nothing where it has nothing to do). The loop applies the
extensions' hooks in the order of the list; hooks that touch different parts of the state
commute.

Hooks (`S` seeds, `E` envs per seed; all but `env` traced inside the compiled loop):

    env(seeded_env) -> seeded_env
        the training envs the loop resets and steps (a two-player game against the
        extension's own opponents, say); called once, when the loop is built
    init_keys(key [S], key_env [S]) -> (key, key_env)
        the seeds' loop and env keys before the envs reset (a replica folds its index in)
    reset_params(seed_ids [S], params) -> params
        env parameters the envs reset with ({field: [S]} or None: the env's own)
    reward(obs, action, reward, next_obs, info, gamma [S]) -> reward [S, E]
        the reward the agent learns from (episode statistics keep the env's own)
    after_collect(seeds, i, steps) -> seeds
        after collect step `i` (of `steps` in this iteration, `loop.collect_steps_per_block`
        per block)
    after_update(agent_state, updates_done) -> agent_state
        after each gradient step, per seed (`updates_done` shared by the seeds)
    after_block(seeds, stats, block, training) -> seeds
        after an iteration's learning and target update (`stats` its `StepStats`; `block`
        the shared block counter before it, -1 in the prefill; `training` `block >= 0`)
    reduce_chunk(stats, update_metrics) -> (stats, update_metrics)
        a chunk's summed metrics before they become means (over replicas, say)
    eval_params(runner, params) -> params
        the env parameters an evaluation uses ({field: [S]} or None)
    eval_keys(keys [S]) -> keys, eval_reduce(returns [S]) -> returns
        around an evaluation

An extension is built from the loop's parts by a builder, `builder(parts) -> Extension | None`
(None: nothing to add for this run): `extensions.DEFAULT` lists the library's, in order;
`make_train(run, extensions=[...])` appends a user's.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence


class Extension(NamedTuple):
    """One loop extension: a name and the hooks it supplies (None: not used)."""

    name: str
    env: Callable | None = None
    init_keys: Callable | None = None
    reset_params: Callable | None = None
    reward: Callable | None = None
    after_collect: Callable | None = None
    after_update: Callable | None = None
    after_block: Callable | None = None
    reduce_chunk: Callable | None = None
    eval_params: Callable | None = None
    eval_keys: Callable | None = None
    eval_reduce: Callable | None = None


HOOKS = Extension._fields[1:]


class Hooks(NamedTuple):
    """The extensions of a run, folded: each hook applies every extension's in order."""

    extensions: tuple[Extension, ...]

    def _of(self, hook: str) -> list[Callable]:
        return [f for e in self.extensions if (f := getattr(e, hook)) is not None]

    def has(self, hook: str) -> bool:
        return bool(self._of(hook))

    def env(self, seeded_env):
        for f in self._of("env"):
            seeded_env = f(seeded_env)
        return seeded_env

    def init_keys(self, key, key_env):
        for f in self._of("init_keys"):
            key, key_env = f(key, key_env)
        return key, key_env

    def reset_params(self, seed_ids) -> Any:
        params = None
        for f in self._of("reset_params"):
            params = f(seed_ids, params)
        return params

    def reward(self, obs, action, reward, next_obs, info, gamma):
        for f in self._of("reward"):
            reward = f(obs, action, reward, next_obs, info, gamma)
        return reward

    def after_collect(self, seeds, i, steps):
        for f in self._of("after_collect"):
            seeds = f(seeds, i, steps)
        return seeds

    def after_update(self, agent_state, updates_done):
        for f in self._of("after_update"):
            agent_state = f(agent_state, updates_done)
        return agent_state

    def after_block(self, seeds, stats, block, training):
        for f in self._of("after_block"):
            seeds = f(seeds, stats, block, training)
        return seeds

    def reduce_chunk(self, stats, update_metrics):
        for f in self._of("reduce_chunk"):
            stats, update_metrics = f(stats, update_metrics)
        return stats, update_metrics

    def eval_params(self, runner, params=None):
        for f in self._of("eval_params"):
            params = f(runner, params)
        return params

    def eval_keys(self, keys):
        for f in self._of("eval_keys"):
            keys = f(keys)
        return keys

    def eval_reduce(self, returns):
        for f in self._of("eval_reduce"):
            returns = f(returns)
        return returns


def fold(builders: Sequence[Callable], parts: Any) -> Hooks:
    """Build every extension of `builders` from the loop's `parts` (skipping those that give
    None) and fold them into `Hooks`.

    Raises:
      TypeError: a builder gives something other than an `Extension` or None.
    """
    built = []
    for builder in builders:
        ext = builder(parts)
        if ext is None:
            continue
        if not isinstance(ext, Extension):
            raise TypeError(
                f"loop extension builder {getattr(builder, '__name__', builder)!r} returned "
                f"{type(ext).__name__}; expected an Extension (jaxrl_fast.loop.Extension) or None."
            )
        built.append(ext)
    names = [e.name for e in built]
    if len(set(names)) != len(names):
        raise ValueError(f"loop extensions with the same name: {names}; names must be unique.")
    return Hooks(tuple(built))
