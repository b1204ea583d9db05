"""Data replicas of each seed: how many, how often they exchange, 1-bit compression."""

from __future__ import annotations

import dataclasses

from jaxrl_fast.config.fields import config_class, is_int, is_num, require

_SYNCS = ("every_step", "every:K")
_COMPRESSIONS = ("none", "onebit")


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class ParallelConfig:
    """Data-parallel replicas of each seed (`jaxrl_fast.parallel`).

    A replica steps its own envs into its own replay shard and runs the config's whole schedule;
    the replicas of a seed share one learner, so the seed sees `data` x the env steps and an
    effective batch of `data` x `replay.batch_size` per update. Replicas sit on the mesh's
    `data` axis: one device (local or in another process) each.

    Attributes:
      data: replicas per seed (1: none, every seed alone on its device).
      sync: "every_step" (gradients averaged over the replicas at every update) or "every:K"
        (local updates, parameters averaged every K updates: local SGD).
      compression: "none" (fp32 exchange) or "onebit" (1-bit Adam: sign bits plus a scale per
        tensor, with error feedback; needs sync="every_step").
      warmup_fraction: with "onebit", the share of the updates run as full Adam with an
        uncompressed exchange before the second moment freezes and the momentum is
        exchanged compressed.
    """

    data: int = 1
    sync: str = "every_step"
    compression: str = "none"
    warmup_fraction: float = 0.15

    def __post_init__(self) -> None:
        require(self, "data", is_int(self.data) and self.data > 0, "a positive int")
        require(
            self,
            "sync",
            self.sync == "every_step" or _sync_period(self.sync) is not None,
            '"every_step" or "every:K" with K a positive int',
        )
        require(self, "compression", self.compression in _COMPRESSIONS, f"one of {_COMPRESSIONS}")
        require(
            self,
            "warmup_fraction",
            is_num(self.warmup_fraction) and 0 < self.warmup_fraction < 1,
            "a float in (0, 1)",
        )
        if self.data == 1 and (self.sync != "every_step" or self.compression != "none"):
            raise ValueError(
                f"ParallelConfig.sync={self.sync!r}, compression={self.compression!r} need "
                f"replicas to exchange with; ParallelConfig.data is 1. Set data >= 2."
            )
        if self.compression == "onebit" and self.sync != "every_step":
            raise ValueError(
                f"ParallelConfig.compression='onebit' needs sync='every_step' (it compresses "
                f"the per-update momentum exchange); sync is {self.sync!r}."
            )

    @property
    def sync_period(self) -> int | None:
        """K of sync="every:K" (updates between parameter averages); None for "every_step"."""
        return _sync_period(self.sync)


def _sync_period(sync: object) -> int | None:
    if not isinstance(sync, str) or not sync.startswith("every:"):
        return None
    k = sync.split(":", 1)[1]
    return int(k) if k.isdigit() and int(k) > 0 else None
