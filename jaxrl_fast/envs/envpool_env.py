"""Atari through envpool's XLA interface, as an `Env` that runs inside `jax.jit`/`lax.scan`.

envpool (the `atari` extra, imported lazily) steps a pool of emulators in C++ threads. Its
`env.xla()` gives a small uint8 *handle* and a `step(handle, action)` that XLA calls as a
side-effecting FFI op, so the handle is threaded through the carry (`EnvState.inner`). Facts this
adapter relies on (envpool 1.2.5, checked by the tests):

- `step` returns `(handle, (obs uint8[N, stack, H, W], reward, terminated, truncated, info))`;
  the adapter hands observations on channel-last (`[N, H, W, stack]`, the networks' layout).
- After a step that ends an episode (or, with episodic life, loses a life) the next step is a
  reset step: it ignores the action and returns a first observation with reward 0. That is this
  library's auto-reset contract (`envs/base.py`), so the row is flagged `info["reset"]` and never
  enters replay as a transition, and it is not counted as an episode step.
- `reset()` is a host call: `Env.reset` makes it through one ordered `io_callback`, whose result
  (the handle) the first `step` depends on.
- `step` cannot be vmapped: seeds share one pool of `num_seeds x num_envs` emulators, stepped once
  per collect step outside the seed vmap (`EnvSpec.seed_vmappable=False`).

Episode returns are game scores (the unclipped reward summed over all lives) and episode lengths
count agent steps, both reported when the game ends (`done`); with episodic life the learner
still sees `terminated` at every lost life.
"""

from __future__ import annotations

import difflib

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from jaxrl_fast.config import AtariConfig
from jaxrl_fast.envs.base import Env, EnvSpec, EnvState
from jaxrl_fast.types import Array, PRNGKey

PREFIX = "envpool:"
STICKY_ACTION_PROBABILITY = 0.25  # Machado et al. (2018)


def _envpool():
    try:
        import envpool
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(
            "envpool envs need the `atari` extra: pip install 'jaxrl-fast[atari]' "
            "(envpool ships the Atari ROMs)."
        ) from err
    return envpool


def atari_games() -> list[str]:
    """The envpool Atari ids (e.g. "Pong-v5"), without the "envpool:" prefix."""
    from envpool.registration import registry

    _envpool()
    return sorted(
        name
        for name, entry in registry.specs.items()
        if name.endswith("-v5") and entry[0] == "envpool.atari"
    )


def _check_game(name: str) -> str:
    """The envpool id of "envpool:<Game>-v5", or a ValueError with suggestions."""
    game = name.removeprefix(PREFIX)
    games = atari_games()
    if game not in games:
        close = difflib.get_close_matches(game, games, n=3)
        hint = f" Did you mean {', '.join(repr(PREFIX + c) for c in close)}?" if close else ""
        raise ValueError(
            f"EnvConfig.name={name!r} is not an envpool Atari game.{hint} Valid names: "
            f"'envpool:<Game>-v5' for {len(games)} games, e.g. 'envpool:Pong-v5', "
            f"'envpool:Breakout-v5'."
        )
    return game


def _make_pool(envpool, game, num_envs, atari, *, seed, evaluation):
    return envpool.make(
        game,
        env_type="gym",
        num_envs=num_envs,
        batch_size=num_envs,
        seed=seed,
        frame_skip=atari.frame_skip,
        img_height=atari.img_size,
        img_width=atari.img_size,
        stack_num=atari.stack_num,
        gray_scale=True,
        noop_max=atari.noop_max,
        episodic_life=atari.episodic_life and not evaluation,
        reward_clip=atari.reward_clip and not evaluation,
        repeat_action_probability=STICKY_ACTION_PROBABILITY if atari.sticky_actions else 0.0,
        max_episode_steps=atari.max_episode_steps,
    )


def _advance(xp, state: EnvState, handle, obs, reward, te, tr, info):
    """One envpool step's results as this library's `Env.step` output, with `xp` numpy or
    jax.numpy (the XLA adapter and `HostPool` share it). `state.inner` is `(handle, game_over)`:
    episode statistics restart after a game over, not after a lost life."""
    game_over_before = state.inner[1]
    real = xp.logical_not(state.needs_reset)
    terminated = xp.logical_and(real, te)
    truncated = xp.logical_and(real, xp.logical_and(tr, xp.logical_not(te)))
    reward = xp.where(real, reward, 0.0).astype(xp.float32)
    game_over = xp.logical_and(real, xp.asarray(info["terminated"]).astype(bool))
    done = xp.logical_or(game_over, truncated)
    raw = xp.where(real, xp.asarray(info["reward"], xp.float32), 0.0).astype(xp.float32)
    ep_return = xp.where(game_over_before, 0.0, state.episode_return).astype(xp.float32) + raw
    ep_length = xp.where(game_over_before, 0, state.episode_length).astype(xp.int32) + real.astype(
        xp.int32
    )
    new_state = EnvState(
        inner=(handle, done),
        needs_reset=xp.logical_or(terminated, truncated),
        episode_return=ep_return,
        episode_length=ep_length,
    )
    out = {
        "terminated": terminated,
        "truncated": truncated,
        "reset": state.needs_reset,
        "episode_return": ep_return,
        "episode_length": ep_length,
    }
    obs = xp.transpose(obs, (0, 2, 3, 1))  # channel-last, as the networks take it
    return new_state, obs, reward, done, out


def make_envpool_env(
    name: str,
    num_envs: int,
    atari: AtariConfig | None = None,
    *,
    seed: int = 0,
    evaluation: bool = False,
) -> Env:
    """Build a pool of `num_envs` Atari emulators as an `Env`.

    Args:
      name: "envpool:<Game>-v5", e.g. "envpool:Pong-v5".
      num_envs: emulators in the pool (all seeds' envs together when training several seeds).
      atari: frame and reward settings; default `AtariConfig()`.
      seed: envpool's seed (emulator i uses `seed + i`).
      evaluation: play whole games with unclipped rewards (no episodic life, no clipping).

    Raises:
      ValueError: unknown game (with suggestions) or bad `num_envs`.
      ImportError: envpool is not installed.
    """
    atari = atari or AtariConfig()
    envpool = _envpool()
    game = _check_game(name)
    pool = _make_pool(envpool, game, num_envs, atari, seed=seed, evaluation=evaluation)
    handle0, _recv, _send, xla_step = pool.xla()
    handle0 = np.asarray(handle0)
    size, stack = atari.img_size, atari.stack_num
    spec = EnvSpec(
        name=PREFIX + game,
        obs_shape=(size, size, stack),
        obs_dtype=jnp.uint8,
        num_actions=int(pool.action_space.n),
        num_envs=num_envs,
        max_episode_steps=atari.max_episode_steps,
        seed_vmappable=False,
        frame_stack=stack,
    )
    n = num_envs

    def _host_reset():
        obs, _ = pool.reset()
        return handle0, np.ascontiguousarray(np.transpose(obs, (0, 2, 3, 1)))

    def reset(key: PRNGKey) -> tuple[EnvState, Array]:
        del key  # envpool draws no-ops from its own seeded generators
        handle, obs = io_callback(
            _host_reset,
            (
                jax.ShapeDtypeStruct(handle0.shape, handle0.dtype),
                jax.ShapeDtypeStruct((n, size, size, stack), jnp.uint8),
            ),
            ordered=True,
        )
        state = EnvState(
            inner=(handle, jnp.zeros((n,), bool)),
            needs_reset=jnp.zeros((n,), bool),
            episode_return=jnp.zeros((n,), jnp.float32),
            episode_length=jnp.zeros((n,), jnp.int32),
        )
        return state, obs

    def step(key: PRNGKey, state: EnvState, action: Array):
        del key
        handle, (obs, reward, te, tr, info) = xla_step(state.inner[0], action.astype(jnp.int32))
        return _advance(jnp, state, handle, obs, reward, te, tr, info)

    return Env(spec=spec, reset=reset, step=step)


class HostPool:
    """envpool's ordinary Python API with this adapter's flags, for the conventional loop.

    `reset() -> obs` and `step(action) -> (None, obs, reward, done, info)` on numpy arrays,
    with the same observations (channel-last), rewards, flags and episode statistics as the
    XLA `Env` of `make_envpool_env` (the state is kept here, so the first result is None).
    """

    def __init__(self, name: str, num_envs: int, atari: AtariConfig | None = None, *, seed=0):
        atari = atari or AtariConfig()
        envpool = _envpool()
        game = _check_game(name)
        self._pool = _make_pool(envpool, game, num_envs, atari, seed=seed, evaluation=False)
        self.spec = EnvSpec(
            name=PREFIX + game,
            obs_shape=(atari.img_size, atari.img_size, atari.stack_num),
            obs_dtype=jnp.uint8,
            num_actions=int(self._pool.action_space.n),
            num_envs=num_envs,
            max_episode_steps=atari.max_episode_steps,
            seed_vmappable=False,
            frame_stack=atari.stack_num,
        )
        self._state = self._initial_state(num_envs)

    @staticmethod
    def _initial_state(n: int) -> EnvState:
        return EnvState(
            inner=(None, np.zeros(n, bool)),
            needs_reset=np.zeros(n, bool),
            episode_return=np.zeros(n, np.float32),
            episode_length=np.zeros(n, np.int32),
        )

    def reset(self) -> np.ndarray:
        obs, _ = self._pool.reset()
        self._state = self._initial_state(self.spec.num_envs)
        return np.ascontiguousarray(np.transpose(obs, (0, 2, 3, 1)))

    def step(self, action: np.ndarray):
        obs, reward, te, tr, info = self._pool.step(np.asarray(action, np.int32))
        self._state, obs, reward, done, out = _advance(
            np, self._state, None, obs, reward, te, tr, info
        )
        return None, np.ascontiguousarray(obs), reward, done, out
