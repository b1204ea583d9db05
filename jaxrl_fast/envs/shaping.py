"""Reward shaping: a pure function `(obs, action, reward, next_obs, info) -> reward` that the
loop applies to each step's reward before it is stored (`EnvConfig.reward_shaping` names it).

The agent learns from the shaped rewards; the episode returns the library reports (training
and evaluation) stay the env's own, as they are summed inside the env.

Arguments carry leading batch axes (`[S, E]` in the loop): `obs`/`next_obs` `[..., *obs_shape]`,
`action`, `reward` `[...]`, and `info` the env's `[...]` arrays (`terminated`, `truncated`,
`reset`, ...). A shaping function must work elementwise over them (index features with
`obs[..., k]`). `next_obs` of a step that ends an episode is the episode's real final
observation (the envs auto-reset on the next step).

Built in, potential-based shaping (Ng, Harada and Russell, 1999), which leaves the optimal
policy unchanged: `F = gamma * phi(next_obs) - phi(obs)`, with `phi = 0` after a terminal
step, added to the reward (nothing on the rows of the reset steps, which are never sampled).
With n-step returns the sum of `gamma^k F_k` telescopes to `gamma^n phi(s_n) - phi(s_0)`.
`gamma` is the step's own: the fused loop passes it as `info["gamma"]` (`[S, 1]`, each seed's
gamma schedule at that step, `jaxrl_fast.config.hparams`), else `DQNConfig.gamma`. Names:
"potential:<name>" with <name> one of `POTENTIALS`.

Also built in, "scale:<factor>" (e.g. "scale:0.1", PQN's CartPole reward scale): each reward
times the factor, which changes the returns' scale and not the optimal policy.

Your own: `register("name", fn)` before building the run, then `EnvConfig(reward_shaping="name")`
(the config keeps the name, so it stays JSON and resumable).
"""

from __future__ import annotations

from typing import Callable

import jax.numpy as jnp

from jaxrl_fast.types import Array

ShapingFn = Callable[[Array, Array, Array, Array, dict], Array]
PREFIX = "potential:"
SCALE = "scale:"


def _cartpole_upright(obs: Array) -> Array:
    # pole angle (obs[..., 2], radians; the episode ends past 0.21) and cart position (obs[..., 0],
    # ends past 2.4): 0 upright at the centre, -1 at either limit
    return -0.5 * (jnp.abs(obs[..., 2]) / 0.21 + jnp.abs(obs[..., 0]) / 2.4)


def _mountaincar_energy(obs: Array) -> Array:
    # mechanical energy per unit mass, in units of the gravity term 0.0025 (gymnax MountainCar:
    # height ~ sin(3 x), velocity change -0.0025 cos(3 x) per step), times 100: at 10x the
    # shaping did not lead 3 of 4 seeds out of the valley in 301k env steps, at 100x all 4
    # (benchmarks/results/applications/applications.md has the measured run)
    position, velocity = obs[..., 0], obs[..., 1]
    return 100.0 * (jnp.sin(3.0 * position) + 0.5 * velocity**2 / 0.0025)


def _pendulum_upright(obs: Array) -> Array:
    return obs[..., 0]  # cos(theta): 1 upright, -1 hanging


def _reacher_distance(obs: Array) -> Array:
    # minus the distance from the end of the arm (the sum of the unit links) to the goal
    tip_x = obs[..., 0] + obs[..., 1]
    tip_y = obs[..., 2] + obs[..., 3]
    return -jnp.sqrt((tip_x - obs[..., 6]) ** 2 + (tip_y - obs[..., 7]) ** 2)


POTENTIALS: dict[str, Callable[[Array], Array]] = {
    "cartpole-upright": _cartpole_upright,
    "mountaincar-energy": _mountaincar_energy,
    "pendulum-upright": _pendulum_upright,
    "reacher-distance": _reacher_distance,
}

_REGISTERED: dict[str, ShapingFn] = {}


def potential_based(potential: Callable[[Array], Array], gamma: float) -> ShapingFn:
    """Potential-based shaping with `potential(obs [..., *obs_shape]) -> [...]` and `gamma`."""

    def shape(obs, action, reward, next_obs, info):
        phi_next = jnp.where(info["terminated"], 0.0, potential(next_obs))
        bonus = info.get("gamma", gamma) * phi_next - potential(obs)
        return jnp.where(info["reset"], reward, reward + bonus).astype(reward.dtype)

    return shape


def register(name: str, fn: ShapingFn) -> None:
    """Make `fn` available as `EnvConfig(reward_shaping=name)` in this process.

    Raises:
      ValueError: `name` is empty, starts with "potential:", or is taken by another function.
    """
    if not isinstance(name, str) or not name or name.startswith((PREFIX, SCALE)):
        raise ValueError(
            f"reward shaping name {name!r}: expected a non-empty name not starting with "
            f"{PREFIX!r} or {SCALE!r} (those are the built-in shapings)."
        )
    if _REGISTERED.get(name, fn) is not fn:
        raise ValueError(f"reward shaping {name!r} is already registered to another function.")
    _REGISTERED[name] = fn


def names() -> list[str]:
    """Every name `EnvConfig.reward_shaping` takes in this process."""
    return [PREFIX + p for p in POTENTIALS] + [SCALE + "<factor>"] + sorted(_REGISTERED)


def make_shaping(name: str | None, gamma: float) -> ShapingFn | None:
    """The shaping function `EnvConfig.reward_shaping=name` names (None: no shaping).

    Raises:
      ValueError: an unknown name (the message lists the known ones).

      >>> import jax.numpy as jnp
      >>> shape = make_shaping("potential:pendulum-upright", gamma=0.5)
      >>> info = {"terminated": jnp.array([False]), "reset": jnp.array([False])}
      >>> obs, next_obs = jnp.array([[0.0, 1.0, 0.0]]), jnp.array([[1.0, 0.0, 0.0]])
      >>> float(shape(obs, jnp.array([0]), jnp.array([-1.0]), next_obs, info)[0])
      -0.5
    """
    if name is None:
        return None
    if name.startswith(PREFIX) and name[len(PREFIX) :] in POTENTIALS:
        return potential_based(POTENTIALS[name[len(PREFIX) :]], gamma)
    if name.startswith(SCALE):
        return _scaled(name)
    if name in _REGISTERED:
        return _REGISTERED[name]
    raise ValueError(
        f"EnvConfig.reward_shaping={name!r} is not a known shaping; expected one of "
        f"{', '.join(names())}, or a name given to jaxrl_fast.envs.shaping.register first."
    )


def _scaled(name: str) -> ShapingFn:
    """ "scale:<factor>": each reward times a finite factor."""
    try:
        factor = float(name[len(SCALE) :])
    except ValueError:
        factor = float("nan")
    if not jnp.isfinite(factor):
        raise ValueError(
            f"EnvConfig.reward_shaping={name!r}: expected 'scale:' and a finite number, e.g. "
            "'scale:0.1'."
        )

    def scale(obs, action, reward, next_obs, info):
        del obs, action, next_obs, info
        return (reward * factor).astype(reward.dtype)

    return scale
