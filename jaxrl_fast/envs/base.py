"""The functional `Env` interface, batched over `num_envs`, with next-step auto-reset.

Auto-reset contract (the one envpool and Gymnasium 1.x vector envs use): the step that ends an
episode returns the episode's *real* final observation with `terminated` or `truncated` set. The
next step of that env is a *reset step*: it ignores the action, returns the first observation of a
new episode with reward 0, and sets `info["reset"]`. Replay therefore stores each observation once
and always finds the next observation in the next row of the same env stream; reset rows are never
sampled, and truncated transitions bootstrap from the true final observation.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_fast.types import Array, PRNGKey


class EnvSpec(NamedTuple):
    """What the loop must know about an env at build time."""

    name: str
    obs_shape: tuple[int, ...]
    obs_dtype: Any
    num_actions: int
    num_envs: int
    max_episode_steps: int
    seed_vmappable: bool = True  # False for handle-based envs (envpool)
    frame_stack: int = 0  # k > 1: obs stack the last k frames on the last axis (Atari)
    # True: the env allows only some actions in some states, and the last `num_actions` entries
    # of each (flat) observation are its legal-action mask, nonzero where legal
    # (`append_legal`; the agent masks its Q-values and exploration: `agent.masks`)
    action_mask: bool = False


class EnvState(NamedTuple):
    """Batched env state. Leaves have a leading `[num_envs]` axis."""

    inner: Any
    needs_reset: Array  # [E] bool: the last step ended an episode
    episode_return: Array  # [E] float32, return so far of the running episode
    episode_length: Array  # [E] int32


class Env(NamedTuple):
    """An environment as pure functions over `EnvState`.

    `reset(key) -> (state, obs)`; `step(key, state, action) -> (state, obs, reward, done, info)`
    with `obs [E, *obs_shape]`, `reward [E] float32`, `done [E] bool` and `info` holding `[E]`
    arrays `terminated`, `truncated`, `reset`, `episode_return` and `episode_length` (the latter
    two give the finished episode's totals where `done`).
    """

    spec: EnvSpec
    reset: Callable[[PRNGKey], tuple[EnvState, Array]]
    step: Callable[[PRNGKey, EnvState, Array], tuple[EnvState, Array, Array, Array, dict]]
    # Envs whose parameters vary over seeds or training (`envs.variation`); None elsewhere.
    # reset_with(key, overrides {field: scalar}) resets with those parameters, which the state
    # then carries (steps and auto-resets use them); params_of(state) -> {field: scalar};
    # with_params(state, overrides) -> state (taking effect from the next step).
    reset_with: Callable[[PRNGKey, dict], tuple[EnvState, Array]] | None = None
    params_of: Callable[[EnvState], dict] | None = None
    with_params: Callable[[EnvState, dict], EnvState] | None = None
    # Two-player games (`Opponent`); None elsewhere. against(opponent, ctx) -> the same game's
    # envs against `opponent`, whose own state starts at `ctx` (the state is then `Versus`).
    against: Callable[[Opponent, Any], Env] | None = None


class Opponent(NamedTuple):
    """Who plays the other side of a two-player game (`Env.against`): pure functions over the
    opponent's own state `ctx`, one per seed and shared by its envs (a pool of parameter
    snapshots, say), which the env carries and never reads.

    `draw(key, ctx) -> member` (int32) picks the opponent of a new episode in one env;
    `act(key, ctx, member, game_state, obs) -> action` is its move, `obs` its own view in the
    learner's layout (its legal-action mask appended); `record(ctx, member [E], outcome [E],
    ended [E]) -> ctx` sees every step's ended episodes, `outcome` the learner's final return
    (+1 a win, 0 a draw, -1 a loss in Pgx's games).
    """

    draw: Callable[[PRNGKey, Any], Array]
    act: Callable[[PRNGKey, Any, Array, Any, Array], Array]
    record: Callable[[Any, Array, Array, Array], Any]


def fixed_opponent(move: Callable[[PRNGKey, Any], Array]) -> Opponent:
    """An `Opponent` with no state of its own that plays `move(key, game_state) -> action`."""
    return Opponent(
        draw=lambda key, ctx: jnp.int32(0),
        act=lambda key, ctx, member, game_state, obs: move(key, game_state),
        record=lambda ctx, member, outcome, ended: ctx,
    )


class Versus(NamedTuple):
    """The state of a two-player game's envs against an opponent with state (`Env.against`)."""

    envs: EnvState
    ctx: Any  # the opponent's state (`Opponent`)


def append_legal(obs: Array, legal: Array) -> Array:
    """One observation flattened with its legal-action mask `[A]` appended (the layout of a
    masked env's observations, `EnvSpec.action_mask`), in the observation's dtype (bool stays
    bool, a byte per entry)."""
    flat = obs.reshape(-1)
    return jnp.concatenate([flat, legal.astype(flat.dtype)])


SingleReset = Callable[[PRNGKey], tuple[Any, Array]]
SingleStep = Callable[[PRNGKey, Any, Array], tuple[Any, Array, Array, Array, Array]]


def make_batched_env(
    spec: EnvSpec,
    reset_one: SingleReset,
    step_one: SingleStep,
    *,
    reset_with_one: Callable[[PRNGKey, dict], tuple[Any, Array]] | None = None,
) -> Env:
    """Batch single-env functions over `spec.num_envs` and add auto-reset and episode stats.

    Args:
      spec: the batched env's spec.
      reset_one: `key -> (inner_state, obs)` for one env.
      step_one: `(key, inner_state, action) -> (inner_state, obs, reward, terminated, truncated)`
        for one env, without any reset.
      reset_with_one: for an env with varying parameters, `(key, overrides) -> (inner_state,
        obs)` with `inner_state = (its state, overrides)`: auto-resets keep the overrides, and
        the `Env` gets `reset_with`, `params_of` and `with_params`.

    Returns:
      An `Env` following the next-step auto-reset contract of this module.
    """
    n = spec.num_envs

    def _start(inner: Any) -> EnvState:
        return EnvState(
            inner=inner,
            needs_reset=jnp.zeros((n,), bool),
            episode_return=jnp.zeros((n,), jnp.float32),
            episode_length=jnp.zeros((n,), jnp.int32),
        )

    def reset(key: PRNGKey) -> tuple[EnvState, Array]:
        inner, obs = jax.vmap(reset_one)(jax.random.split(key, n))
        return _start(inner), obs

    def _reset_again(key_reset, inner):
        if reset_with_one is None:
            return reset_one(key_reset)
        return reset_with_one(key_reset, inner[1])  # keep this env's parameters

    def _step_one(key_step, key_reset, inner, needs_reset, action):
        inner_s, obs_s, reward, terminated, truncated = step_one(key_step, inner, action)
        inner_r, obs_r = _reset_again(key_reset, inner)
        pick = lambda r, s: jax.lax.select(needs_reset, r, s)  # noqa: E731
        inner = jax.tree.map(pick, inner_r, inner_s)
        obs = pick(obs_r, obs_s)
        reward = jnp.where(needs_reset, 0.0, reward).astype(jnp.float32)
        terminated = jnp.logical_and(~needs_reset, terminated)
        truncated = jnp.logical_and(~needs_reset, jnp.logical_and(truncated, ~terminated))
        return inner, obs, reward, terminated, truncated

    def step(key: PRNGKey, state: EnvState, action: Array):
        keys = jax.random.split(key, (2, n))  # step and reset keys in one draw
        inner, obs, reward, terminated, truncated = jax.vmap(_step_one)(
            keys[0], keys[1], state.inner, state.needs_reset, action.astype(jnp.int32)
        )
        done = jnp.logical_or(terminated, truncated)
        was_reset = state.needs_reset
        ep_return = jnp.where(was_reset, 0.0, state.episode_return + reward)
        ep_length = jnp.where(was_reset, 0, state.episode_length + 1).astype(jnp.int32)
        new_state = EnvState(
            inner=inner,
            needs_reset=done,
            episode_return=ep_return,
            episode_length=ep_length,
        )
        info = {
            "terminated": terminated,
            "truncated": truncated,
            "reset": was_reset,
            "episode_return": ep_return,
            "episode_length": ep_length,
        }
        return new_state, obs, reward, done, info

    if reset_with_one is None:
        return Env(spec=spec, reset=reset, step=step)

    def _broadcast(overrides: dict) -> dict:
        return {
            k: jnp.broadcast_to(jnp.asarray(v, jnp.float32), (n,)) for k, v in overrides.items()
        }

    def reset_with(key: PRNGKey, overrides: dict) -> tuple[EnvState, Array]:
        inner, obs = jax.vmap(reset_with_one)(jax.random.split(key, n), _broadcast(overrides))
        return _start(inner), obs

    def params_of(state: EnvState) -> dict:
        return {k: v[0] for k, v in state.inner[1].items()}  # every env of a seed: the same

    def with_params(state: EnvState, overrides: dict) -> EnvState:
        return state._replace(inner=(state.inner[0], _broadcast(overrides)))

    return Env(spec, reset, step, reset_with, params_of, with_params)


class Suite(NamedTuple):
    """One env suite: `build(name, num_envs)` makes the `Env` of `prefix + ":" + name` (a
    `continuous` suite's: `build(name, num_envs, discretise=N)`, its actions a grid)."""

    prefix: str  # "craftax": its envs are named "craftax:<name>"
    extra: str  # the pip extra that installs it: pip install 'jaxrl-fast[<extra>]'
    package: str  # the module whose import fails when the extra is missing
    names: tuple[str, ...]  # its env names, without the prefix
    build: Callable[..., Env]
    about: str  # one line for `jaxrl-fast envs`
    continuous: bool = False  # its actions are continuous: trained on `EnvConfig.discretise`
    # what its envs read from `EnvConfig.suite_file` (its build then takes `file=`), "" if none
    file: str = ""
