"""Learning from demonstrations (DQfD): the source, share of each batch, the margin term."""

from __future__ import annotations

import dataclasses

from jaxrl_fast.config.fields import config_class, is_int, is_num, require


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """Learning from demonstrations (DQfD, Hester et al. 2018): a fixed set of demonstration
    steps, a share of every batch drawn from it, and a large-margin loss on those rows.

    Attributes:
      source: "" (off), "scripted" (the env's scripted controller, `envs.scripted`, plays
        `steps` env steps before training) or the path of an `.npz` of recorded steps
        (`jaxrl_fast.trained.demos.record` writes one from a trained agent's episodes).
      steps: env steps the scripted controller plays (over `EnvConfig.num_envs` envs).
      share: the share of every batch drawn from the demonstrations (uniformly).
      margin: the large margin `l`: the loss `max_a [Q(s, a) + l 1(a != a_E)] - Q(s, a_E)` on
        demonstration rows pushes the demonstrated action's value `l` above the others'.
      weight: the margin loss's weight at the first update.
      decay_fraction: share of the run's updates over which the weight decays linearly to 0
        (1.0: over the whole run).
    """

    source: str = ""
    steps: int = 10_000
    share: float = 0.25
    margin: float = 0.8
    weight: float = 1.0
    decay_fraction: float = 0.5

    def __post_init__(self) -> None:
        require(
            self,
            "source",
            isinstance(self.source, str),
            '"" (off), "scripted" or the path of an .npz of recorded steps',
        )
        require(self, "steps", is_int(self.steps) and self.steps > 0, "a positive int")
        require(self, "share", is_num(self.share) and 0 < self.share < 1, "a float in (0, 1)")
        require(self, "margin", is_num(self.margin) and self.margin >= 0, "a float >= 0")
        require(self, "weight", is_num(self.weight) and self.weight >= 0, "a float >= 0")
        require(
            self,
            "decay_fraction",
            is_num(self.decay_fraction) and 0 < self.decay_fraction <= 1,
            "a float in (0, 1]",
        )

    @property
    def active(self) -> bool:
        return bool(self.source)
