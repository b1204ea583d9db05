"""Scripted controllers for continuous-action gymnax envs: yardsticks for learned policies (and
demonstrators). Each maps one observation to a continuous action, as a pure JAX function.

* `Pendulum-v1` (obs `[cos th, sin th, th_dot]`, th = 0 upright, torque in [-2, 2]; the
  dynamics are `th_ddot = 15 sin th + 3 u`): pump energy `E = th_dot^2 / 2 + 15 cos th`
  towards the upright's 15 with full torque along the motion, then, within 0.4 rad of upright
  (where 2 units of torque can still beat gravity), a PD law `u = -(10 th + 2 th_dot)`.
* `Reacher-misc` (obs `[cos a1, cos a2, sin a1, sin a2, v1, v2, goal_x, goal_y]`, absolute
  link angles, unit links, torques in [-1, 1]): inverse kinematics puts the two unit links
  symmetric about the goal's direction (`a = phi +- arccos(min(|g|, 2) / 2)`; the nearer
  solution), then a PD law per joint.
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
