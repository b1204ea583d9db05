"""Env parameters that vary over seeds (variants) and over training (a curriculum).

The values live in the env state (`Env.reset_with` / `params_of` / `with_params`), one set per
seed, so they vary inside the compiled loop with no recompile:

- **variants** (`EnvConfig.variants`): seed i trains on variant `i mod V` from its first reset;
  the evaluation uses the seed's own variant. The article's "50 hero policies at once" is this
  with V = 50: one program, one policy per variant.
- **curriculum** (`EnvConfig.curriculum`): every seed starts at `start`; after each training
  block the stage advances by training progress (shared by the seeds) or, per seed, when the
  block's finished episodes reach `success_return` on average. The stage is read back from the
  parameter's value (no extra state). A new value takes effect from the next step (episodes
  that are running continue with it). The evaluation uses `end`, the setting the run is for.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxrl_fast.config import CurriculumConfig, TrainConfig, parse_variants
from jaxrl_fast.types import Array


class Variation(NamedTuple):
    """A run's varying env parameters.

    Attributes:
      fields: the varying `EnvParams` fields (sorted).
      table: variant field -> `[V]` float32 values (empty without variants).
      num_variants: V (1 without variants).
      curriculum: the curriculum (inactive without one).
      num_blocks: the run's training blocks (the progress curriculum's clock).
    """

    fields: tuple[str, ...]
    table: dict[str, np.ndarray]
    num_variants: int
    curriculum: CurriculumConfig
    num_blocks: int

    def initial(self, seed_ids: Array) -> dict[str, Array]:
        """Each seed's starting values: field -> `[S]` float32, for `seed_ids [S]` (global
        seed indices)."""
        out = {f: jnp.asarray(v)[seed_ids % self.num_variants] for f, v in self.table.items()}
        if self.curriculum.active:
            out[self.curriculum.param] = jnp.full(seed_ids.shape, self.curriculum.start)
        return {f: out[f].astype(jnp.float32) for f in self.fields}

    def for_evaluation(self, values: dict[str, Array]) -> dict[str, Array]:
        """The values an evaluation uses: the seeds' own, with the curriculum's at `end`."""
        if not self.curriculum.active:
            return values
        p = self.curriculum.param
        return {**values, p: jnp.full_like(values[p], self.curriculum.end)}

    def stage_value(self, stage: Array) -> Array:
        """The curriculum parameter's value at `stage` (0 .. stages - 1)."""
        c = self.curriculum
        return (c.start + (c.end - c.start) * stage / (c.stages - 1)).astype(jnp.float32)

    def stage_of(self, value: Array) -> Array:
        """The stage (int32) of a curriculum parameter value."""
        c = self.curriculum
        return jnp.round((value - c.start) / (c.end - c.start) * (c.stages - 1)).astype(jnp.int32)

    def advance(
        self, values: dict[str, Array], episode_return: Array, episodes: Array, block: Array
    ) -> dict[str, Array]:
        """The values after training block `block` (shared), given each seed's finished
        episodes in it (`episode_return` summed and `episodes` counted, `[S]`)."""
        if not self.curriculum.active:
            return values
        c = self.curriculum
        if c.advance == "progress":
            stage = jnp.minimum((block + 1) * c.stages // self.num_blocks, c.stages - 1)
            stage = jnp.broadcast_to(stage, episodes.shape)
        else:
            mean = episode_return / jnp.maximum(episodes, 1.0)
            passed = (episodes > 0) & (mean >= c.success_return)
            stage = jnp.minimum(self.stage_of(values[c.param]) + passed, c.stages - 1)
        return {**values, c.param: self.stage_value(stage)}

    def variant_of(self, seed_index: int) -> int:
        """The variant seed `seed_index` trains on."""
        return seed_index % self.num_variants

    def describe_variant(self, v: int) -> dict[str, float]:
        """Variant `v`'s values, field -> float."""
        return {f: float(vals[v]) for f, vals in self.table.items()}


def make_variation(config: TrainConfig) -> Variation | None:
    """The run's `Variation`, or None where no env parameter varies."""
    env = config.env
    fields = env.varying_params
    if not fields:
        return None
    table = {}
    if env.variants is not None:
        variants = parse_variants(env.variants)
        table = {f: np.array([v[f] for v in variants], np.float32) for f in sorted(variants[0])}
    return Variation(fields, table, env.num_variants, env.curriculum, config.num_blocks)
