"""XLand-MiniGrid (`pip install 'jaxrl-fast[xminigrid]'`): its MiniGrid tasks with their fixed
rules, e.g. "xminigrid:MiniGrid-Empty-8x8", "xminigrid:MiniGrid-DoorKey-5x5", with the agent's
field of view as observation (tile and colour codes, here as float32 so the codes are not scaled
like pixels).

XLand-MiniGrid does not auto-reset and takes no key in its step. Its last step of an episode has
discount 0 when the goal was reached (`terminated`) and 1 when `max_steps` ran out
(`truncated`). The XLand-MiniGrid-R* meta-RL envs draw a ruleset from a benchmark, which
xminigrid downloads on first use; this library downloads nothing, so they are not listed.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrl_fast.envs.base import Env, EnvSpec, Suite, make_batched_env

# xminigrid 0.9's MiniGrid tasks (a test checks them against `registered_environments()`)
NAMES = tuple(
    ["MiniGrid-BlockedUnlockPickUp"]
    + [f"MiniGrid-DoorKey-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"MiniGrid-Empty-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"MiniGrid-EmptyRandom-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + ["MiniGrid-FourRooms", "MiniGrid-LockedRoom"]
    + [f"MiniGrid-MemoryS{s}" for s in (8, 16, 32, 64, 128)]
    + ["MiniGrid-Playground", "MiniGrid-Unlock", "MiniGrid-UnlockPickUp"]
)
_LAST = 2  # xminigrid's StepType.LAST


def make_xminigrid_env(name: str, num_envs: int) -> Env:
    """`num_envs` envs of XLand-MiniGrid's `name` (one of `NAMES`)."""
    import xminigrid

    env, params = xminigrid.make(name)

    def reset_one(key):
        timestep = env.reset(params, key)
        return timestep, timestep.observation.astype(jnp.float32)

    def step_one(key, timestep, action):
        del key  # xminigrid's steps are deterministic
        timestep = env.step(params, timestep, action)
        last = timestep.step_type == _LAST
        return (
            timestep,
            timestep.observation.astype(jnp.float32),
            jnp.asarray(timestep.reward, jnp.float32),
            last & (timestep.discount == 0),
            last & (timestep.discount != 0),
        )

    spec = EnvSpec(
        name=f"xminigrid:{name}",
        obs_shape=tuple(env.observation_shape(params)),
        obs_dtype=jnp.float32,
        num_actions=int(env.num_actions(params)),
        num_envs=num_envs,
        max_episode_steps=int(params.max_steps),
    )
    return make_batched_env(spec, reset_one, step_one)


SUITE = Suite(
    prefix="xminigrid",
    extra="xminigrid",
    package="xminigrid",
    names=NAMES,
    build=make_xminigrid_env,
    about="XLand-MiniGrid: MiniGrid tasks with fixed rules (agent's view)",
)
