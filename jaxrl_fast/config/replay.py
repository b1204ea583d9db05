"""Replay settings: L2 capacity, batch, n-step, prioritised replay, L3, sequences
(docs/replay-tiers.md)."""

from __future__ import annotations

import dataclasses

from jaxrl_fast.config.fields import config_class, is_int, is_num, knob, require


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """Replay settings (docs/replay-tiers.md). Sizes count transitions (rows) across all envs of
    one seed.

    Attributes:
      capacity: rows of the device ring buffer (L2), a multiple of `EnvConfig.num_envs`; or a
        share of free device memory (all seeds together): "auto:0.3", or a preset "small"
        (30%), "medium" (50%), "large" (70%). `jaxrl-fast plan` shows what a share resolves to.
      batch_size: transitions per gradient step.
      n_step: steps summed into each target (1 = plain DQN). The L1 staging window holds the
        last `n_step` steps per env and commits a row to L2 once its n-step return is known.
      prioritised: proportional prioritised replay (Schaul et al. 2016) instead of uniform.
      sampler: PER sampler: "sum_tree" (O(B log N)), "cumsum" (O(N), cumsum + searchsorted)
        or "auto" (picks by capacity; see `replay.prioritised.AUTO_SUM_TREE_FROM`).
      priority: "power": `(|td| + priority_eps) ** alpha`; "sqrt": `sqrt(|td|) + 0.1` (the
        seed article's formula; `alpha` is not used). The article's spellings are accepted
        too: "(|td| + eps)^alpha" is "power", "sqrt(td_error) + 0.1" is "sqrt" (spaces, `**`
        for `^` and `td_error` / `|td_error|` for `|td|` as you like; `PRIORITY_FORMULAS`);
        `priority_rule` gives the rule's name.
      alpha: priority exponent for "power".
      beta: the importance-sampling exponent: its start, annealed linearly to 1 over the run
        (`beta_anneal`, as Schaul et al. 2016), or its fixed value.
      beta_anneal: anneal beta to 1 over the run (True, the PER paper's schedule), or keep it
        fixed (False: Dopamine's Rainbow, whose weights `1 / sqrt(P)` are beta = 0.5 fixed).
      priority_eps: added to `|td|` by "power" so no sampled row drops to zero priority.
      l3: third tier: "off", "host" (host RAM) or "disk" (memory-mapped files in `spill_dir`).
      l3_capacity: rows per seed held by L3 (its FIFO horizon).
      l3_share: share of each batch drawn from L3 (rows already evicted from L2); with
        `l3_hit_rate`, the largest share (rows prefetched per batch).
      l3_hit_rate: None (a fixed `l3_share`), or "dynamic allocation" (the seed article): the
        L3 share of each batch follows the share of the stored rows that only L3 holds (as if
        sampling uniformly over both tiers: 0 until L2 overflows, then growing as L3 fills),
        capped so that the L2 hit rate (sampled rows served by L2) stays at least this, e.g.
        0.85. Computed inside the compiled loop; the chunk log reports the hit rate.
      spill_dir: directory for "disk" L3 files; must exist and be writable.
      spill_block: bytes per spill call (all seeds): "4MB", "8MB", "16MB" (MiB: 2**20 bytes)
        or an int. The block is also bounded by L2: at most about half of it.
      keep_spill: keep the L3 files after training (default: removed).
      dedup_frames: for envs whose observations stack frames (Atari), store one frame per row
        and rebuild the stacks of `obs` and `next_obs` at sample time (4x less memory for 4
        frames), in L2 and in L3; False stores whole observations.
      sequence_length: 0 (transitions), or, for a recurrent Q-network (`NetworkConfig.lstm`),
        the positions of each sampled sequence that are trained on; each sequence also holds
        `burn_in` positions before them and `n_step` after them (for the last targets), and
        starts from the recurrent state stored when its first step was acted on (R2D2).
        `batch_size` then counts sequences.
      burn_in: positions at the start of each sequence that only refresh the stored recurrent
        state (no loss, no gradient); 0 starts training at the stored state.
    """

    capacity: int | str = knob(10_000, alias="--capacity")
    batch_size: int = knob(128, alias="--batch-size")
    n_step: int = knob(1, alias="--n-step")
    prioritised: bool = knob(False, alias="--prioritised")
    sampler: str = knob("auto", alias="--sampler")
    priority: str = "power"
    alpha: float = knob(0.6, sweep=True, resume=True)
    beta: float = knob(0.4, sweep=True, resume=True)
    beta_anneal: bool = True
    priority_eps: float = knob(1e-6, sweep=True, resume=True)
    l3: str = knob("off", alias="--l3")
    l3_capacity: int = knob(0, alias="--l3-capacity")
    l3_share: float = knob(0.0, alias="--l3-share")
    l3_hit_rate: float | None = None
    spill_dir: str | None = knob(None, alias="--spill-dir")
    spill_block: str | int = knob("4MB", alias="--spill-block")
    keep_spill: bool = False
    dedup_frames: bool = True
    sequence_length: int = 0
    burn_in: int = 0

    def __post_init__(self) -> None:
        require(self, "dedup_frames", isinstance(self.dedup_frames, bool), "True or False")
        require(
            self,
            "sequence_length",
            is_int(self.sequence_length) and 0 <= self.sequence_length <= 1024,
            "0 (transitions) or positions per sequence in [1, 1024], e.g. 8",
        )
        require(
            self,
            "burn_in",
            is_int(self.burn_in) and 0 <= self.burn_in <= 1024,
            "an int in [0, 1024] (positions that only refresh the recurrent state)",
        )
        if self.burn_in and not self.sequence_length:
            raise ValueError(
                f"ReplayConfig.burn_in={self.burn_in} needs sequences: set sequence_length "
                "(and NetworkConfig.lstm), or burn_in=0."
            )
        if self.sequence_length and (self.prioritised or self.l3 != "off"):
            raise ValueError(
                f"ReplayConfig.sequence_length={self.sequence_length} is not allowed with "
                f"prioritised={self.prioritised}, l3={self.l3!r}: sequences are sampled "
                "uniformly from the device ring (L2) only. Use prioritised=False, l3='off'."
            )
        if isinstance(self.capacity, str):
            require(
                self,
                "capacity",
                capacity_share(self.capacity) is not None,
                f'an int >= 2, "auto:<share in (0, 1)>" or one of {tuple(CAPACITY_PRESETS)}',
            )
        else:
            require(
                self,
                "capacity",
                is_int(self.capacity) and self.capacity > 1,
                f'an int >= 2, "auto:<share in (0, 1)>" or one of {tuple(CAPACITY_PRESETS)}',
            )
            require(
                self,
                "batch_size",
                is_int(self.batch_size) and 0 < self.batch_size <= self.capacity,
                f"an int in [1, capacity={self.capacity}]",
            )
        require(self, "batch_size", is_int(self.batch_size) and self.batch_size > 0, "int > 0")
        require(self, "n_step", is_int(self.n_step) and 1 <= self.n_step <= 64, "an int in [1, 64]")
        require(self, "prioritised", isinstance(self.prioritised, bool), "True or False")
        require(self, "sampler", self.sampler in _SAMPLERS, f"one of {_SAMPLERS}")
        require(
            self,
            "priority",
            priority_rule(self.priority) is not None,
            f"one of {_PRIORITIES} or a formula {PRIORITY_FORMULAS}",
        )
        require(self, "alpha", is_num(self.alpha) and 0.0 <= self.alpha <= 1.0, "a float in [0, 1]")
        require(self, "beta", is_num(self.beta) and 0.0 <= self.beta <= 1.0, "a float in [0, 1]")
        require(self, "beta_anneal", isinstance(self.beta_anneal, bool), "True or False")
        require(
            self,
            "priority_eps",
            is_num(self.priority_eps) and self.priority_eps > 0,
            "a float > 0",
        )
        require(self, "l3", self.l3 in _L3_KINDS, f"one of {_L3_KINDS}")
        require(self, "keep_spill", isinstance(self.keep_spill, bool), "True or False")
        require(
            self,
            "spill_block",
            spill_block_bytes(self.spill_block) is not None,
            f"one of {tuple(SPILL_BLOCKS)} or a positive int of bytes",
        )
        if self.l3 == "off":
            if self.l3_hit_rate is not None:
                raise ValueError(
                    f"ReplayConfig.l3_hit_rate={self.l3_hit_rate} needs an L3 tier; set "
                    "l3='host' or 'disk', or l3_hit_rate=None."
                )
            return
        require(
            self,
            "l3_capacity",
            is_int(self.l3_capacity) and self.l3_capacity > 0,
            'a positive int (rows per seed) when l3 is "host" or "disk"',
        )
        require(
            self,
            "l3_share",
            is_num(self.l3_share) and 0.0 <= self.l3_share < 1.0,
            'a float in [0, 1) when l3 is "host" or "disk"',
        )
        require(
            self,
            "l3_hit_rate",
            self.l3_hit_rate is None
            or (is_num(self.l3_hit_rate) and 0.0 < self.l3_hit_rate < 1.0 and self.l3_share > 0),
            "None or a float in (0, 1), e.g. 0.85, with l3_share > 0 (the largest share)",
        )
        if self.l3 == "disk":
            require(
                self,
                "spill_dir",
                isinstance(self.spill_dir, str) and bool(self.spill_dir),
                'an existing, writable directory when l3="disk"',
            )

    @property
    def priority_rule(self) -> str:
        """The priority rule `priority` names: "power" or "sqrt"."""
        return priority_rule(self.priority)

    @property
    def on_host(self) -> bool:
        """Rows are kept on the host (an L3 tier): its callbacks keep a run's seeds on one
        device."""
        return self.l3 != "off"

    @property
    def l3_rows_per_batch(self) -> int:
        """Rows of each batch drawn from L3 (0 when L3 is off)."""
        if self.l3 == "off":
            return 0
        return int(round(self.l3_share * self.batch_size))


_SAMPLERS = ("auto", "sum_tree", "cumsum")
_PRIORITIES = ("power", "sqrt")
PRIORITY_FORMULAS = ("(|td| + eps)^alpha", "sqrt(td_error) + 0.1")


def priority_rule(text: object) -> str | None:
    """The priority rule a `ReplayConfig.priority` names or writes out, else None.

    >>> priority_rule("sqrt(td_error) + 0.1"), priority_rule("(|td|+eps)**alpha")
    ('sqrt', 'power')
    >>> priority_rule("td^2") is None
    True
    """
    if not isinstance(text, str):
        return None
    if text in _PRIORITIES:
        return text
    norm = text.replace(" ", "").lower().replace("**", "^").replace("td_error", "td")
    norm = norm.replace("|td|", "td")
    return {"(td+eps)^alpha": "power", "sqrt(td)+0.1": "sqrt"}.get(norm)


_L3_KINDS = ("off", "host", "disk")
CAPACITY_PRESETS = {"small": 0.3, "medium": 0.5, "large": 0.7}
SPILL_BLOCKS = {"4MB": 4 << 20, "8MB": 8 << 20, "16MB": 16 << 20}


def capacity_share(capacity: object) -> float | None:
    """The memory share a string capacity asks for ("auto:0.3", "small", ...), else None."""
    if not isinstance(capacity, str):
        return None
    if capacity in CAPACITY_PRESETS:
        return CAPACITY_PRESETS[capacity]
    if capacity.startswith("auto:"):
        try:
            share = float(capacity[5:])
        except ValueError:
            return None
        return share if 0.0 < share < 1.0 else None
    return None


def spill_block_bytes(block: object) -> int | None:
    """Bytes of a `spill_block` setting, or None if it is not valid."""
    if isinstance(block, str):
        return SPILL_BLOCKS.get(block)
    if is_int(block) and block > 0:
        return block
    return None
