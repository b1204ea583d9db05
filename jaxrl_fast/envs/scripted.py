"""Scripted controllers for gymnax envs: yardsticks for learned policies and demonstrators
(`DemoConfig(source="scripted")`). Each maps one observation to an action, as a pure JAX
function: a continuous action (`CONTROLLERS`) or a discrete one (`DISCRETE_CONTROLLERS`);
`scripted_policy` gives the action index the agent would take, on the grid of a discretised env.

* `Pendulum-v1` (obs `[cos th, sin th, th_dot]`, th = 0 upright, torque in [-2, 2]; the
  dynamics are `th_ddot = 15 sin th + 3 u`): pump energy `E = th_dot^2 / 2 + 15 cos th`
  towards the upright's 15 with full torque along the motion, then, within 0.4 rad of upright
  (where 2 units of torque can still beat gravity), a PD law `u = -(10 th + 2 th_dot)`.
* `Reacher-misc` (obs `[cos a1, cos a2, sin a1, sin a2, v1, v2, goal_x, goal_y]`, absolute
  link angles, unit links, torques in [-1, 1]): inverse kinematics puts the two unit links
  symmetric about the goal's direction (`a = phi +- arccos(min(|g|, 2) / 2)`; the nearer
  solution), then a PD law per joint.
* `CartPole-v1` (obs `[x, x_dot, theta, theta_dot]`, action 1 pushes right): push towards
  where the pole is falling, `theta + 0.5 theta_dot + 0.05 x + 0.2 x_dot > 0`, the cart's terms
  keeping it near the centre (500 of 500 on 64 episodes).
"""

from __future__ import annotations

from typing import Callable

import jax.numpy as jnp

from jaxrl_fast.types import Array


def _wrap(angle: Array) -> Array:
    """`angle` in [-pi, pi)."""
    return (angle + jnp.pi) % (2 * jnp.pi) - jnp.pi


def pendulum_swing_up(obs: Array) -> Array:
    """Energy pumping, then PD near the upright: `[3]` obs -> `[1]` torque."""
    cos, sin, vel = obs[0], obs[1], obs[2]
    theta = jnp.arctan2(sin, cos)
    energy = 0.5 * vel**2 + 15.0 * cos
    pump = 2.0 * jnp.sign(vel) * jnp.sign(15.0 - energy)
    pump = jnp.where(vel == 0, 2.0, pump)  # at rest at the bottom: start a swing
    balance = -(10.0 * theta + 2.0 * vel)
    u = jnp.where(jnp.abs(theta) < 0.4, balance, pump)
    return jnp.clip(u, -2.0, 2.0)[None]


def reacher_inverse_kinematics(obs: Array) -> Array:
    """Inverse kinematics to the goal, then PD per joint: `[8]` obs -> `[2]` torques."""
    angles = jnp.arctan2(obs[2:4], obs[0:2])
    vels, goal = obs[4:6], obs[6:8]
    phi = jnp.arctan2(goal[1], goal[0])
    spread = jnp.arccos(jnp.minimum(jnp.linalg.norm(goal), 2.0) / 2.0)
    targets = jnp.stack(
        [jnp.stack([phi + spread, phi - spread]), jnp.stack([phi - spread, phi + spread])]
    )  # the two solutions, [2, 2]
    errors = _wrap(targets - angles)
    nearest = errors[jnp.argmin(jnp.sum(jnp.abs(errors), axis=-1))]
    return jnp.clip(4.0 * nearest - 2.0 * vels, -1.0, 1.0)


def cartpole_balance(obs: Array) -> Array:
    """Push towards the pole's fall, keeping the cart centred: `[4]` obs -> int32 action."""
    x, x_dot, theta, theta_dot = obs[0], obs[1], obs[2], obs[3]
    return (theta + 0.5 * theta_dot + 0.05 * x + 0.2 * x_dot > 0).astype(jnp.int32)


DISCRETE_CONTROLLERS: dict[str, Callable[[Array], Array]] = {"CartPole-v1": cartpole_balance}

CONTROLLERS: dict[str, Callable[[Array], Array]] = {
    "Pendulum-v1": pendulum_swing_up,
    "Reacher-misc": reacher_inverse_kinematics,
}


def scripted_controller(name: str) -> Callable[[Array], Array]:
    """The scripted controller of gymnax env `name`: one observation -> one continuous action.

    Raises:
      ValueError: no controller for `name` (the message lists the envs that have one).
    """
    if name not in CONTROLLERS:
        raise ValueError(
            f"no scripted controller for {name!r}; there are for: {', '.join(CONTROLLERS)}."
        )
    return CONTROLLERS[name]


def scripted_policy(name: str, discretise: int | None = None) -> Callable[[Array], Array]:
    """The scripted controller of gymnax env `name` as the agent's policy: one observation ->
    an int32 action index (for a continuous-action env trained with `discretise` values per
    dimension, the grid point nearest the controller's action: `ActionGrid.nearest`).

    Raises:
      ValueError: no controller for `name` (or a continuous one without `discretise`); the
        message lists the envs that have one.
    """
    name = name.removeprefix("gymnax:")
    if name in DISCRETE_CONTROLLERS:
        return DISCRETE_CONTROLLERS[name]
    if name in CONTROLLERS and discretise:
        import gymnax

        from jaxrl_fast.envs.wrappers import make_action_grid

        env, params = gymnax.make(name)
        space = env.action_space(params)
        grid = make_action_grid(space.low, space.high, discretise, name=name)
        controller = CONTROLLERS[name]
        return lambda obs: grid.nearest(controller(obs)).astype(jnp.int32)
    have = [*DISCRETE_CONTROLLERS, *(f"{n} (with EnvConfig.discretise)" for n in CONTROLLERS)]
    raise ValueError(
        f"no scripted policy for {name!r}"
        + (" without EnvConfig.discretise" if name in CONTROLLERS else "")
        + f"; there are for: {', '.join(have)}."
    )
