"""Self-play in two-player games: a pool of the learner's past parameters as its opponents."""

from __future__ import annotations

import dataclasses

from jaxrl_fast.config.fields import config_class, is_int, require

SAMPLING = ("uniform", "latest", "dynamic")


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class SelfPlayConfig:
    """Self-play against an opponent pool, for two-player games (Pgx's "pgx:connect_four" and
    the others, `loop.extensions.selfplay`, docs/selfplay.md). The pool is kept on device, per
    seed: member 0 is a fixed random legal player; the others are snapshots of the learner's
    parameters, playing greedily over their legal moves.

    Attributes:
      pool_size: members of the pool, the random player included: 0 (off: the env's own
        opponent, a random legal player), or >= 2. Once full, a new snapshot replaces the
        oldest.
      add_every: a snapshot of the learner's parameters joins the pool every this many
        gradient updates (at the end of the training block that reaches each multiple).
      sampling: how each env draws its opponent for a new episode among the members so far:
        "uniform"; "latest" (the newest snapshot half of the time, else uniform); "dynamic"
        (weighted by how well each member does against the learner lately: 1.1 minus the
        learner's recent score against it, an average over its last ~20 games with a win 1, a
        draw 0.5, a loss 0).
    """

    pool_size: int = 0
    add_every: int = 1_000
    sampling: str = "uniform"

    def __post_init__(self) -> None:
        require(
            self,
            "pool_size",
            is_int(self.pool_size) and (self.pool_size == 0 or self.pool_size >= 2),
            "0 (off) or an int >= 2 (the random player and at least one snapshot)",
        )
        require(self, "add_every", is_int(self.add_every) and self.add_every > 0, "a positive int")
        require(self, "sampling", self.sampling in SAMPLING, f"one of {SAMPLING}")

    @property
    def active(self) -> bool:
        return self.pool_size > 0
