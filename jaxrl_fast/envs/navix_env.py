"""Navix (`pip install 'jaxrl-fast[navix]'`): MiniGrid tasks in JAX, e.g.
"navix:Navix-Empty-5x5-v0", "navix:Navix-DoorKey-8x8-v0", with navix's default observation
(the symbolic grid: object, colour and state codes per cell, here as float32 so the codes are
not scaled like pixels).

Navix keeps its random key in its state and auto-resets at the step after the episode's end; the
adapter calls its public `step` only on running episodes (the base's auto-reset replaces the
rest), so the suite's auto-reset never runs. Navix marks a step TERMINATION (the goal, lava) or
TRUNCATION (`max_steps`), which become `terminated` and `truncated`. The step key is not used:
navix's transitions are deterministic given its state.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, make_batched_env

# navix 0.7's registry (a test checks the list against `navix.registry()`)
NAMES = tuple(
    [f"Navix-Empty-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"Navix-Empty-Random-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"Navix-DoorKey-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"Navix-DoorKey-Random-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + ["Navix-FourRooms-v0"]
    + [f"Navix-KeyCorridor{s}-v0" for s in ("S3R1", "S3R2", "S3R3", "S4R3", "S5R3", "S6R3")]
    + [f"Navix-LavaGap{s}-v0" for s in ("S5", "S6", "S7")]
    + [f"Navix-SimpleCrossing{s}-v0" for s in ("S9N1", "S9N2", "S9N3", "S11N5")]
    + [f"Navix-Dynamic-Obstacles-{s}-v0"
       for s in ("5x5", "5x5-Random", "6x6", "6x6-Random", "8x8", "16x16")]
    + ["Navix-DistShift1-v0", "Navix-DistShift2-v0"]
    + [f"Navix-GoToDoor-{s}-v0" for s in ("5x5", "6x6", "8x8")]
)  # fmt: skip
_TERMINATION, _TRUNCATION = 2, 1  # navix's StepType


def make_navix_env(name: str, num_envs: int) -> Env:
    """`num_envs` envs of navix's `name` (one of `NAMES`)."""
    import navix

    env = navix.make(name)

    def reset_one(key):
        timestep = env.reset(key)
        return timestep, timestep.observation.astype(jnp.float32)

    def step_one(key, timestep, action):
        del key  # navix's randomness comes from the key in its state
        timestep = env.step(timestep, action)
        return (
            timestep,
            timestep.observation.astype(jnp.float32),
            jnp.asarray(timestep.reward, jnp.float32),
            timestep.step_type == _TERMINATION,
            timestep.step_type == _TRUNCATION,
        )

    spec = EnvSpec(
        name=f"navix:{name}",
        obs_shape=tuple(env.observation_space.shape),
        obs_dtype=jnp.float32,
        num_actions=int(env.action_space.n),
        num_envs=num_envs,
        max_episode_steps=int(env.max_steps),
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="navix",
    extra="navix",
    package="navix",
    names=NAMES,
    build=make_navix_env,
    about="Navix: MiniGrid tasks (symbolic grid observations)",
)
