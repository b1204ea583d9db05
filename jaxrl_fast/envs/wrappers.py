"""Env-side recipes as pure functions: action discretisation (`ActionGrid`).

A continuous `Box` action space of `d` dimensions becomes `bins ** d` discrete actions: the
joint grid of `bins` evenly spaced values per dimension, from `low` to `high` inclusive (an odd
`bins` on a symmetric box includes 0, e.g. 9 bins on [-1, 1]: -1, -0.75, ..., 0, ..., 1). The
article's robot arm is this recipe with 9 bins on each of 2 joints: 81 actions.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxrl_fast.types import Array

MAX_GRID_ACTIONS = 4096  # a Q-head this wide is still cheap; a grid past it is refused


class ActionGrid(NamedTuple):
    """The joint grid of a continuous action box.

    Attributes:
      low, high: `[d]` float32 bounds of the box.
      bins: values per dimension.
    """

    low: np.ndarray
    high: np.ndarray
    bins: int

    @property
    def num_actions(self) -> int:
        """`bins ** d`: one discrete action per grid point."""
        return self.bins ** len(self.low)

    def values(self) -> np.ndarray:
        """`[bins, d]` float32: the grid's values per dimension (column k for dimension k)."""
        steps = np.linspace(0.0, 1.0, self.bins, dtype=np.float64)[:, None]
        return (self.low + (self.high - self.low) * steps).astype(np.float32)

    def to_continuous(self, action: Array) -> Array:
        """The continuous action `[..., d]` float32 of discrete actions `[...]` int.

        Action `a` is read as `d` digits in base `bins`, dimension 0 the most significant:
        `a = sum_k i_k * bins ** (d - 1 - k)`, and dimension k takes the i_k-th value.
        """
        d = len(self.low)
        powers = jnp.asarray(self.bins ** np.arange(d - 1, -1, -1), jnp.int32)  # [d]
        digits = (jnp.asarray(action, jnp.int32)[..., None] // powers) % self.bins  # [..., d]
        table = jnp.asarray(self.values())  # [bins, d]
        return table[digits, jnp.arange(d)]

    def nearest(self, action: Array) -> Array:
        """The discrete action `[...]` int32 whose grid point is nearest to continuous actions
        `[..., d]` (per dimension, the closest value; out-of-box values go to the edge)."""
        d = len(self.low)
        span = jnp.asarray(self.high - self.low)
        frac = (jnp.asarray(action, jnp.float32) - jnp.asarray(self.low)) / span
        digits = jnp.clip(jnp.round(frac * (self.bins - 1)), 0, self.bins - 1).astype(jnp.int32)
        powers = jnp.asarray(self.bins ** np.arange(d - 1, -1, -1), jnp.int32)
        return jnp.sum(digits * powers, axis=-1)


def make_action_grid(low, high, bins: int, *, name: str = "env") -> ActionGrid:
    """The joint grid of the box `[low, high]` with `bins` values per dimension.

    Raises:
      ValueError: `bins` < 2, an unbounded box, or more than `MAX_GRID_ACTIONS` grid points.

      >>> grid = make_action_grid([-1.0, -1.0], [1.0, 1.0], 9)
      >>> grid.num_actions
      81
      >>> [float(v) for v in grid.to_continuous(jnp.array(80))]
      [1.0, 1.0]
    """
    low = np.atleast_1d(np.asarray(low, np.float32)).reshape(-1)
    high = np.atleast_1d(np.asarray(high, np.float32)).reshape(-1)
    if not (isinstance(bins, int) and not isinstance(bins, bool) and bins >= 2):
        raise ValueError(f"EnvConfig.discretise={bins!r} is not allowed; expected an int >= 2.")
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        raise ValueError(
            f"EnvConfig.discretise: {name}'s action box [{low}, {high}] is not bounded; only "
            "a bounded box can be discretised."
        )
    grid = ActionGrid(low, high, bins)
    if grid.num_actions > MAX_GRID_ACTIONS:
        most = int(MAX_GRID_ACTIONS ** (1 / len(low)))
        raise ValueError(
            f"EnvConfig.discretise={bins} gives {bins}^{len(low)} = {grid.num_actions:,} joint "
            f"actions for {name}'s {len(low)} action dimensions; at most "
            f"{MAX_GRID_ACTIONS:,} are allowed. Use discretise <= {most}."
        )
    return grid
