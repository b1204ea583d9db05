"""Frozen, validated configuration for a jaxrl_fast run.

Every dataclass is keyword-only and frozen; `__post_init__` checks each field and raises a
`ValueError` that names `Class.field`, the value and what is allowed, before anything compiles.
Derived numbers are properties, never writes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from jaxrl_fast.registry import HEADS, LOSSES

_NETWORKS = ("auto", "mlp", "cnn", "nature")
_COMPUTE = ("auto", "fp32", "bf16", "fp16")
_SEED_LOOPS = ("auto", "vmap", "map")
PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
_CONV_IMPLS = ("auto", "conv", "patches", "conv_patches_grad", "conv_canonical_grads")
_MATMUL = ("default", "high", "highest")
LR_SCHEDULES = ("constant", "linear", "cosine_restarts")
EPSILON_SCHEDULES = ("linear", "factor")
MAX_GAMMA_PHASES = 4
# Fields a resumed run may change (`train(..., force_config=True)`, `--force-config`): they
# change constants of the compiled program or the evaluation, never an array's shape, the
# optimiser state's structure or the chunking of the run.
RESUME_OVERRIDABLE = (
    "dqn.gamma",
    "dqn.learning_rate",
    "dqn.adam_eps",
    "dqn.double_q",
    "dqn.loss",
    "dqn.huber_delta",
    "dqn.tau",
    "schedule.epsilon_start",
    "schedule.epsilon_end",
    "schedule.epsilon_fraction",
    "schedule.lr_schedule",
    "schedule.lr_end_fraction",
    "schedule.epsilon_schedule",
    "schedule.epsilon_factor",
    "schedule.epsilon_every",
    "schedule.lr_period_fraction",
    "schedule.gamma_schedule",
    "replay.alpha",
    "replay.beta",
    "replay.priority_eps",
    "eval_episodes",
    "eval_every",
    "eval_epsilon",
)


def _require(cfg: object, name: str, ok: bool, allowed: str) -> None:
    """Raise a uniform `ValueError` for field `name` of `cfg` unless `ok`."""
    if not ok:
        raise ValueError(
            f"{type(cfg).__name__}.{name}={getattr(cfg, name)!r} is not allowed; "
            f"expected {allowed}."
        )


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


_ADVANCE = ("progress", "return")


def parse_gamma_schedule(text: object) -> list[tuple[float, float]] | None:
    """The phases of a gamma schedule string as `[(gamma, until_fraction), ...]`, the last
    phase's fraction `inf`; None if `text` is not a valid schedule ("constant" gives None too).

      >>> parse_gamma_schedule("0.99:0.3,0.95:0.7,0.9")
      [(0.99, 0.3), (0.95, 0.7), (0.9, inf)]
      >>> parse_gamma_schedule("0.99:0.7,0.9:0.3") is None
      True
    """
    if not isinstance(text, str) or text == "constant":
        return None
    parts = [p.strip() for p in text.split(",")]
    if not 1 <= len(parts) <= MAX_GAMMA_PHASES:
        return None
    phases = []
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            fields = part.split(":")
            if len(fields) != (1 if last else 2):
                return None
            gamma = float(fields[0])
            until = math.inf if last else float(fields[1])
            phases.append((gamma, until))
    except ValueError:
        return None
    untils = [u for _, u in phases[:-1]]
    if not all(0.0 <= g <= 1.0 for g, _ in phases):
        return None
    if not all(0.0 < u < 1.0 for u in untils) or untils != sorted(set(untils)):
        return None
    return phases


def parse_variants(spec: str) -> list[dict[str, float]]:
    """The env-parameter variants of `EnvConfig.variants`: "f=v,g=w;f=v2,g=w2" -> one dict a
    variant, the same fields in each.

    Raises:
      ValueError: the text is not of that form (the message names the field and the form).

      >>> parse_variants("length=0.25,polemass_length=0.025;length=1,polemass_length=0.1")
      [{'length': 0.25, 'polemass_length': 0.025}, {'length': 1.0, 'polemass_length': 0.1}]
    """
    form = (
        'expected "field=value,field=value;field=value,..." (variants separated by ";", each '
        'setting the same gymnax EnvParams fields), e.g. "length=0.25,polemass_length=0.025;'
        'length=1.0,polemass_length=0.1"'
    )
    variants, repeated = [], False
    try:
        for part in spec.split(";"):
            pairs = [item.split("=") for item in part.split(",")]
            if any(len(p) != 2 or not p[0].strip() for p in pairs):
                raise ValueError
            variants.append({k.strip(): float(v) for k, v in pairs})
            repeated = repeated or len(variants[-1]) != len(pairs)
    except (ValueError, AttributeError):
        raise ValueError(f"EnvConfig.variants={spec!r} is not allowed; {form}.") from None
    if repeated or any(set(v) != set(variants[0]) for v in variants):
        raise ValueError(
            f"EnvConfig.variants={spec!r} is not allowed; every variant must set the same "
            f"fields, once each ({form})."
        )
    return variants


@dataclasses.dataclass(frozen=True, kw_only=True)
class CurriculumConfig:
    """A curriculum over one gymnax env parameter, advanced inside the compiled loop.

    The parameter takes `stages` values evenly spaced from `start` (easy) to `end` (the setting
    the run is for); every seed starts at `start`. With advance="progress" the stage follows
    the share of training blocks done (stage k over the k-th `1/stages` of the run); with
    advance="return" a seed moves to the next stage after a block whose finished episodes have
    a mean return >= `success_return`. Evaluations use `end`.

    Attributes:
      param: the gymnax `EnvParams` field (e.g. "goal_position" of MountainCar-v0), or None
        (no curriculum).
      start: its first value.
      end: its last value (the target setting).
      stages: values it takes, >= 2.
      advance: "progress" or "return".
      success_return: with advance="return", the mean episode return over a block that
        moves a seed on.
    """

    param: str | None = None
    start: float = 0.0
    end: float = 0.0
    stages: int = 5
    advance: str = "progress"
    success_return: float = 0.0

    def __post_init__(self) -> None:
        _require(
            self,
            "param",
            self.param is None or (isinstance(self.param, str) and bool(self.param)),
            "None or a gymnax EnvParams field name, e.g. 'goal_position'",
        )
        _require(self, "start", _is_num(self.start), "a number")
        _require(self, "end", _is_num(self.end), "a number")
        _require(self, "stages", _is_int(self.stages) and self.stages >= 2, "an int >= 2")
        _require(self, "advance", self.advance in _ADVANCE, f"one of {_ADVANCE}")
        _require(self, "success_return", _is_num(self.success_return), "a number")
        if self.param is not None and self.start == self.end:
            raise ValueError(
                f"CurriculumConfig.end={self.end!r} is not allowed; expected a value other "
                f"than start={self.start!r} (a curriculum needs somewhere to go)."
            )

    @property
    def active(self) -> bool:
        return self.param is not None


@dataclasses.dataclass(frozen=True, kw_only=True)
class AtariConfig:
    """The standard DQN Atari settings, applied to "envpool:" envs (Machado et al. 2018 names).

    Attributes:
      frame_skip: emulator frames per agent step (max-pooled over the last two), >= 1.
      img_size: side of the square grayscale frame (84 in DQN), >= 36.
      stack_num: frames stacked into one observation, >= 1.
      noop_max: up to this many no-op actions at the start of a game (0 disables).
      episodic_life: a lost life ends the *training* episode (the game goes on); evaluation
        always plays whole games.
      reward_clip: clip training rewards to their sign; episode returns are the game score.
      sticky_actions: repeat the previous action with probability 0.25 (Machado et al.).
      max_episode_frames: emulator frames after which a game is truncated (108,000 = 30 min).
    """

    frame_skip: int = 4
    img_size: int = 84
    stack_num: int = 4
    noop_max: int = 30
    episodic_life: bool = True
    reward_clip: bool = True
    sticky_actions: bool = False
    max_episode_frames: int = 108_000

    def __post_init__(self) -> None:
        _require(
            self, "frame_skip", _is_int(self.frame_skip) and self.frame_skip >= 1, "an int >= 1"
        )
        _require(self, "img_size", _is_int(self.img_size) and self.img_size >= 36, "an int >= 36")
        _require(self, "stack_num", _is_int(self.stack_num) and self.stack_num >= 1, "an int >= 1")
        _require(self, "noop_max", _is_int(self.noop_max) and self.noop_max >= 0, "an int >= 0")
        for name in ("episodic_life", "reward_clip", "sticky_actions"):
            _require(self, name, isinstance(getattr(self, name), bool), "True or False")
        _require(
            self,
            "max_episode_frames",
            _is_int(self.max_episode_frames) and self.max_episode_frames >= self.frame_skip,
            f"an int >= frame_skip={self.frame_skip}",
        )

    @property
    def max_episode_steps(self) -> int:
        """Agent steps after which a game is truncated."""
        return self.max_episode_frames // self.frame_skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvConfig:
    """Environment settings.

    Attributes:
      name: a gymnax discrete-action env id (e.g. "CartPole-v1", "Breakout-MinAtar"),
        optionally prefixed "gymnax:" (`jaxrl_fast.envs.list_envs()` lists them), or an Atari
        game through envpool, e.g. "envpool:Pong-v5" (needs the `atari` extra).
      num_envs: environments stepped in parallel per seed (one env step each per collect step).
      atari: the Atari settings of "envpool:" envs.
      discretise: for a continuous-action gymnax env (Pendulum-v1, Reacher-misc, ...), the
        values per action dimension, evenly spaced over the action box; the discrete actions
        are their joint grid (9 on a 2-joint arm: 81 actions). None for discrete-action envs.
      reward_shaping: None, or the name of a reward shaping applied to each step's reward
        before it is stored (reported returns stay the env's own): "potential:<name>" for a
        built-in potential-based shaping with gamma = `DQNConfig.gamma`
        ("potential:cartpole-upright", "potential:mountaincar-energy",
        "potential:pendulum-upright", "potential:reacher-distance"), or a name given to
        `jaxrl_fast.envs.shaping.register` (`envs/shaping.py`).
      variants: None, or gymnax env-parameter variants the seeds train on, one policy per
        seed: "field=value,...;field=value,..." (`parse_variants`); seed i gets variant
        i mod V, and results are also given per variant. `num_seeds` must be a multiple of V.
      curriculum: a curriculum over one env parameter (`CurriculumConfig`; off by default).
      observe: () for the whole observation, or the indices of the (flat, vector) gymnax
        observation entries the agent sees, e.g. (0, 2) for CartPole's cart position and pole
        angle without their velocities (a partially observed task for a recurrent agent).
    """

    name: str = "CartPole-v1"
    num_envs: int = 10
    atari: AtariConfig = dataclasses.field(default_factory=AtariConfig)
    discretise: int | None = None
    reward_shaping: str | None = None
    variants: str | None = None
    curriculum: CurriculumConfig = dataclasses.field(default_factory=CurriculumConfig)
    observe: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _require(self, "name", isinstance(self.name, str) and bool(self.name), "a non-empty env id")
        _require(self, "num_envs", _is_int(self.num_envs) and self.num_envs > 0, "a positive int")
        _require(self, "atari", isinstance(self.atari, AtariConfig), "an AtariConfig")
        _require(
            self,
            "discretise",
            self.discretise is None or (_is_int(self.discretise) and self.discretise >= 2),
            "None (a discrete-action env) or an int >= 2 (values per action dimension)",
        )
        _require(
            self,
            "reward_shaping",
            self.reward_shaping is None
            or (isinstance(self.reward_shaping, str) and bool(self.reward_shaping)),
            'None or a shaping name, e.g. "potential:mountaincar-energy"',
        )
        _require(
            self, "curriculum", isinstance(self.curriculum, CurriculumConfig), "a CurriculumConfig"
        )
        _require(
            self,
            "observe",
            isinstance(self.observe, tuple)
            and all(_is_int(i) and i >= 0 for i in self.observe)
            and len(set(self.observe)) == len(self.observe),
            "() (the whole observation) or a tuple of distinct observation indices, e.g. (0, 2)",
        )
        if self.observe and (self.reward_shaping or "").startswith("potential:"):
            raise ValueError(
                f"EnvConfig.reward_shaping={self.reward_shaping!r} reads the env's whole "
                f"observation, but observe={self.observe} keeps only some of it; use observe=() "
                "or a shaping of your own (envs.shaping.register)."
            )
        if self.observe and self.is_envpool:
            raise ValueError(
                f"EnvConfig.observe={self.observe} is for gymnax vector observations; "
                f"{self.name!r} is an envpool env. Use observe=()."
            )
        if self.variants is not None:
            parse_variants(self.variants)  # raises with the form
        varying = self.variants is not None or self.curriculum.active
        if varying and self.is_envpool:
            raise ValueError(
                f"EnvConfig.variants / curriculum are not allowed with an envpool env "
                f"({self.name!r}): its parameters are fixed when the pool is made. Use a gymnax "
                "env."
            )
        if (
            self.variants is not None
            and self.curriculum.active
            and self.curriculum.param in parse_variants(self.variants)[0]
        ):
            raise ValueError(
                f"EnvConfig.curriculum.param={self.curriculum.param!r} is also set by "
                "EnvConfig.variants; a parameter can vary over seeds or over training, not both."
            )

    @property
    def varying_params(self) -> tuple[str, ...]:
        """The env parameters that vary over seeds or training (sorted)."""
        fields = set(parse_variants(self.variants)[0]) if self.variants is not None else set()
        if self.curriculum.active:
            fields.add(self.curriculum.param)
        return tuple(sorted(fields))

    @property
    def num_variants(self) -> int:
        """Variants of `variants` (1 without)."""
        return 1 if self.variants is None else len(parse_variants(self.variants))

    @property
    def is_envpool(self) -> bool:
        """Whether this is an envpool env (one pool for all seeds, stepped outside the vmap)."""
        return isinstance(self.name, str) and self.name.startswith("envpool:")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NetworkConfig:
    """Q-network settings.

    Attributes:
      kind: "mlp", "cnn" (MinAtar-sized conv torso), "nature" (the Nature-DQN torso for
        84x84 frames: convs 8x8/4 32, 4x4/2 64, 3x3/1 64, then `hidden_sizes`, e.g. (512,)) or
        "auto" (cnn for image observations).
      hidden_sizes: widths of the MLP hidden layers (or of the dense layers after the conv).
      conv_channels: channels of the CNN's 3x3 conv layers (stride 1).
      dueling: use a dueling value/advantage head (the same as `head="dueling"`).
      head: None (the scalar head, or the dueling head with `dueling`), or the name of a value
        head: "scalar", "dueling", or one added with `jaxrl_fast.agent.heads.register`.
      conv_impl: how the Nature torso's strided convolutions compute: "conv", "patches"
        (patches x matmul), "conv_patches_grad" (convolutions, but the kernel gradient as
        patches x matmul), "conv_canonical_grads" (convolutions whose gradients are written
        as NHWC x HWIO convolutions too: XLA:CPU rewrites convolutions into that fast form only
        outside loops, and ran autodiff's gradient convolutions ~8x slower inside the fused
        loop) or "auto" (on CPU conv_canonical_grads, or patches when several seeds are
        vmapped, whose batched (grouped) convolutions XLA:CPU runs slowly; conv elsewhere; the
        conventional baseline, which calls each update on its own, uses conv). Same function,
        same parameters (`networks.Conv`).
      lstm: 0 (a feed-forward Q-network), or the width of an LSTM between the torso and the
        head: a recurrent Q-network whose state is carried through acting and reset at episode
        starts, trained on stored sequences (`ReplayConfig.sequence_length`, `burn_in`).
    """

    kind: str = "auto"
    hidden_sizes: tuple[int, ...] = (120, 84)
    conv_channels: tuple[int, ...] = (16,)
    dueling: bool = False
    head: str | None = None
    conv_impl: str = "auto"
    lstm: int = 0

    def __post_init__(self) -> None:
        _require(self, "kind", self.kind in _NETWORKS, f"one of {_NETWORKS}")
        _require(self, "conv_impl", self.conv_impl in _CONV_IMPLS, f"one of {_CONV_IMPLS}")
        _require(
            self,
            "hidden_sizes",
            isinstance(self.hidden_sizes, tuple)
            and all(_is_int(h) and h > 0 for h in self.hidden_sizes),
            "a tuple of positive ints, e.g. (120, 84)",
        )
        _require(
            self,
            "conv_channels",
            isinstance(self.conv_channels, tuple)
            and len(self.conv_channels) > 0
            and all(_is_int(c) and c > 0 for c in self.conv_channels),
            "a non-empty tuple of positive ints, e.g. (16,)",
        )
        _require(self, "dueling", isinstance(self.dueling, bool), "True or False")
        _require(
            self, "head", self.head is None or self.head in HEADS, f"None or {HEADS.allowed()}"
        )
        if self.dueling and self.head not in (None, "dueling"):
            raise ValueError(
                f"NetworkConfig.dueling=True and head={self.head!r} name two heads; set one "
                f"(dueling=True is head='dueling')."
            )
        _require(
            self,
            "lstm",
            _is_int(self.lstm) and 0 <= self.lstm <= 4096,
            "0 (no LSTM) or an LSTM width in [1, 4096], e.g. 64",
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplayConfig:
    """Replay settings (DESIGN §4). Sizes count transitions (rows) across all envs of one seed.

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
      beta: initial importance-sampling exponent, annealed linearly to 1 over the run.
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

    capacity: int | str = 10_000
    batch_size: int = 128
    n_step: int = 1
    prioritised: bool = False
    sampler: str = "auto"
    priority: str = "power"
    alpha: float = 0.6
    beta: float = 0.4
    priority_eps: float = 1e-6
    l3: str = "off"
    l3_capacity: int = 0
    l3_share: float = 0.0
    l3_hit_rate: float | None = None
    spill_dir: str | None = None
    spill_block: str | int = "4MB"
    keep_spill: bool = False
    dedup_frames: bool = True
    sequence_length: int = 0
    burn_in: int = 0

    def __post_init__(self) -> None:
        _require(self, "dedup_frames", isinstance(self.dedup_frames, bool), "True or False")
        _require(
            self,
            "sequence_length",
            _is_int(self.sequence_length) and 0 <= self.sequence_length <= 1024,
            "0 (transitions) or positions per sequence in [1, 1024], e.g. 8",
        )
        _require(
            self,
            "burn_in",
            _is_int(self.burn_in) and 0 <= self.burn_in <= 1024,
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
            _require(
                self,
                "capacity",
                capacity_share(self.capacity) is not None,
                f'an int >= 2, "auto:<share in (0, 1)>" or one of {tuple(CAPACITY_PRESETS)}',
            )
        else:
            _require(
                self,
                "capacity",
                _is_int(self.capacity) and self.capacity > 1,
                f'an int >= 2, "auto:<share in (0, 1)>" or one of {tuple(CAPACITY_PRESETS)}',
            )
            _require(
                self,
                "batch_size",
                _is_int(self.batch_size) and 0 < self.batch_size <= self.capacity,
                f"an int in [1, capacity={self.capacity}]",
            )
        _require(self, "batch_size", _is_int(self.batch_size) and self.batch_size > 0, "int > 0")
        _require(
            self, "n_step", _is_int(self.n_step) and 1 <= self.n_step <= 64, "an int in [1, 64]"
        )
        _require(self, "prioritised", isinstance(self.prioritised, bool), "True or False")
        _require(self, "sampler", self.sampler in _SAMPLERS, f"one of {_SAMPLERS}")
        _require(
            self,
            "priority",
            priority_rule(self.priority) is not None,
            f"one of {_PRIORITIES} or a formula {PRIORITY_FORMULAS}",
        )
        _require(
            self, "alpha", _is_num(self.alpha) and 0.0 <= self.alpha <= 1.0, "a float in [0, 1]"
        )
        _require(self, "beta", _is_num(self.beta) and 0.0 <= self.beta <= 1.0, "a float in [0, 1]")
        _require(
            self,
            "priority_eps",
            _is_num(self.priority_eps) and self.priority_eps > 0,
            "a float > 0",
        )
        _require(self, "l3", self.l3 in _L3_KINDS, f"one of {_L3_KINDS}")
        _require(self, "keep_spill", isinstance(self.keep_spill, bool), "True or False")
        _require(
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
        _require(
            self,
            "l3_capacity",
            _is_int(self.l3_capacity) and self.l3_capacity > 0,
            'a positive int (rows per seed) when l3 is "host" or "disk"',
        )
        _require(
            self,
            "l3_share",
            _is_num(self.l3_share) and 0.0 <= self.l3_share < 1.0,
            'a float in [0, 1) when l3 is "host" or "disk"',
        )
        _require(
            self,
            "l3_hit_rate",
            self.l3_hit_rate is None
            or (_is_num(self.l3_hit_rate) and 0.0 < self.l3_hit_rate < 1.0 and self.l3_share > 0),
            "None or a float in (0, 1), e.g. 0.85, with l3_share > 0 (the largest share)",
        )
        if self.l3 == "disk":
            _require(
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
    if _is_int(block) and block > 0:
        return block
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrecisionConfig:
    """Mixed precision: the compute dtype, loss scaling and the fallback to fp32.

    Parameters, optimiser state and the update are always fp32 (master weights); only the
    network's forward and backward passes run in `compute`. Q-values and the loss are fp32.

    Attributes:
      compute: "fp32", "bf16", "fp16", or "auto": fp32 on CPU (XLA:CPU computes bf16/f16 dots
        in f32, so low precision is only slower there), fp16 on GPUs without bf16 (compute
        capability < 8.0, e.g. T4), bf16 on Ampere and newer GPUs and on TPU.
      loss_scale: "dynamic", "static:<value>" (e.g. "static:1024"), "none", or "auto" (dynamic
        for fp16, none otherwise). With a scale, or any compute below fp32, an update whose
        gradients are not all finite is skipped: parameters and optimiser state stay as they were.
      matmul_precision: "default", "high" or "highest": precision of matmuls and convolutions
        (on GPUs with TF32, "default"/"high" may use TF32 for fp32 inputs; "highest" never does).
      fallback: switch the run's compute to fp32 after `fallback_overflows` skipped updates
        within `fallback_window` gradient steps, or when the dynamic scale would fall below
        `min_scale`. Both branches are compiled up front; the switch needs no recompilation.
      initial_scale: the dynamic loss scale's starting value.
      growth_interval: finite steps in a row after which the dynamic scale doubles.
      min_scale: the dynamic scale's floor (it is halved on overflow, never below this).
      fallback_overflows: skipped updates within a window that trigger the fallback.
      fallback_window: gradient steps per overflow-counting window.
    """

    compute: str = "auto"
    loss_scale: str = "auto"
    matmul_precision: str = "default"
    fallback: bool = True
    initial_scale: float = 2.0**15
    growth_interval: int = 2000
    min_scale: float = 1.0
    fallback_overflows: int = 32
    fallback_window: int = 1000

    def __post_init__(self) -> None:
        _require(self, "compute", self.compute in _COMPUTE, f"one of {_COMPUTE}")
        _require(
            self,
            "loss_scale",
            self.static_scale is not None or self.loss_scale in ("auto", "dynamic", "none"),
            "'auto', 'dynamic', 'none' or 'static:<value>' with a value > 0, e.g. 'static:1024'",
        )
        _require(self, "matmul_precision", self.matmul_precision in _MATMUL, f"one of {_MATMUL}")
        _require(self, "fallback", isinstance(self.fallback, bool), "True or False")
        _require(
            self,
            "initial_scale",
            _is_num(self.initial_scale) and self.initial_scale >= 1,
            "a float >= 1, e.g. 32768.0",
        )
        _require(
            self,
            "min_scale",
            _is_num(self.min_scale) and 0 < self.min_scale <= self.initial_scale,
            f"a float in (0, initial_scale={self.initial_scale}]",
        )
        for name in ("growth_interval", "fallback_overflows", "fallback_window"):
            value = getattr(self, name)
            _require(self, name, _is_int(value) and value > 0, "a positive int")

    @property
    def static_scale(self) -> float | None:
        """The value of a "static:<value>" loss scale, else None."""
        text = self.loss_scale
        if not isinstance(text, str) or not text.startswith("static:"):
            return None
        try:
            value = float(text[len("static:") :])
        except ValueError:
            return None
        return value if math.isfinite(value) and value > 0 else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DQNConfig:
    """Q-learning settings.

    Attributes:
      gamma: discount factor in [0, 1].
      learning_rate: Adam step size (initial value when `ScheduleConfig.lr_schedule="linear"`).
      adam_eps: Adam epsilon.
      double_q: select the bootstrap action with the online net, evaluate with the target net.
      loss: "mse" (default, as CleanRL/PureJaxRL) or "huber" on the TD error, or a loss added
        with `jaxrl_fast.agent.losses.register` (a registered name). Huber with Adam
        over-estimated and diverged on CartPole in our runs (Q grew to 1e6); it suits Atari rewards.
      huber_delta: Huber transition point.
      target_period: env steps between target-network updates (a multiple of the block).
      tau: 1.0 copies the online net (hard update); < 1 is a Polyak step every `target_period`.
      max_grad_norm: global-norm gradient clip; None disables clipping.
    """

    gamma: float = 0.99
    learning_rate: float = 2.5e-4
    adam_eps: float = 1e-8
    double_q: bool = True
    loss: str = "mse"
    huber_delta: float = 1.0
    target_period: int = 500
    tau: float = 1.0
    max_grad_norm: float | None = 10.0

    def __post_init__(self) -> None:
        _require(
            self, "gamma", _is_num(self.gamma) and 0.0 <= self.gamma <= 1.0, "a float in [0, 1]"
        )
        _require(
            self,
            "learning_rate",
            _is_num(self.learning_rate) and self.learning_rate > 0,
            "a float > 0",
        )
        _require(self, "adam_eps", _is_num(self.adam_eps) and self.adam_eps > 0, "a float > 0")
        _require(self, "double_q", isinstance(self.double_q, bool), "True or False")
        _require(self, "loss", self.loss in LOSSES, LOSSES.allowed())
        _require(
            self, "huber_delta", _is_num(self.huber_delta) and self.huber_delta > 0, "a float > 0"
        )
        _require(
            self,
            "target_period",
            _is_int(self.target_period) and self.target_period > 0,
            "a positive int",
        )
        _require(self, "tau", _is_num(self.tau) and 0.0 < self.tau <= 1.0, "a float in (0, 1]")
        _require(
            self,
            "max_grad_norm",
            self.max_grad_norm is None or (_is_num(self.max_grad_norm) and self.max_grad_norm > 0),
            "None or a float > 0",
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduleConfig:
    """Exploration, learning-rate and discount schedules (`jaxrl_fast.schedules`).

    Every value here is a traced hyperparameter (`jaxrl_fast.hparams.HParams`): a sweep may
    vary any of them, the schedule kinds included, in one compiled program.

    Attributes:
      epsilon_schedule: "linear": from `epsilon_start` to `epsilon_end` over
        `epsilon_fraction * total_env_steps` env steps; "factor": `epsilon_start` multiplied by
        `epsilon_factor` every `epsilon_every` env steps (per seed), never below `epsilon_end`
        (the seed article's 1.0 x 0.995 every 1,000 steps down to 0.01).
      epsilon_start: epsilon at env step 0.
      epsilon_end: epsilon after the decay ("linear"), its floor ("factor").
      epsilon_fraction: share of `total_env_steps` over which epsilon decays ("linear").
      epsilon_factor: the factor of each decay step ("factor").
      epsilon_every: env steps per seed between two decay steps ("factor").
      lr_schedule: "constant"; "linear" (decays to `lr_end_fraction` x the initial rate over
        the run); "cosine_restarts": cosine annealing from the initial rate to
        `lr_end_fraction` x it over each period of `lr_period_fraction` x the run's updates,
        restarting at the initial rate (SGDR, Loshchilov & Hutter 2017, as `optax.sgdr_schedule`
        with equal periods).
      lr_end_fraction: final learning rate as a fraction of the initial one (linear, and each
        cosine period's floor).
      lr_period_fraction: a cosine period as a share of the run's updates ("cosine_restarts").
      gamma_schedule: "constant" (`DQNConfig.gamma` throughout) or discount phases by training
        fraction (env steps / `total_env_steps`): "0.99:0.3,0.95:0.7,0.9" is 0.99 until 30% of
        the run, 0.95 until 70%, then 0.9 (the seed article's recipe); at most
        `MAX_GAMMA_PHASES` phases, increasing fractions in (0, 1), the last phase open. A
        transition's n-step return and bootstrap discount take the gamma of the env step at
        which L1 staging commits it (README, "Hyperparameters as data").
    """

    epsilon_schedule: str = "linear"
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_fraction: float = 0.5
    epsilon_factor: float = 0.995
    epsilon_every: int = 1000
    lr_schedule: str = "constant"
    lr_end_fraction: float = 0.0
    lr_period_fraction: float = 0.1
    gamma_schedule: str = "constant"

    def __post_init__(self) -> None:
        for name in ("epsilon_start", "epsilon_end"):
            _require(
                self,
                name,
                _is_num(getattr(self, name)) and 0 <= getattr(self, name) <= 1,
                "a float in [0, 1]",
            )
        _require(
            self,
            "epsilon_fraction",
            _is_num(self.epsilon_fraction) and 0 < self.epsilon_fraction <= 1,
            "a float in (0, 1]",
        )
        _require(self, "lr_schedule", self.lr_schedule in LR_SCHEDULES, f"one of {LR_SCHEDULES}")
        _require(
            self,
            "lr_end_fraction",
            _is_num(self.lr_end_fraction) and 0 <= self.lr_end_fraction <= 1,
            "a float in [0, 1]",
        )
        _require(
            self,
            "epsilon_schedule",
            self.epsilon_schedule in EPSILON_SCHEDULES,
            f"one of {EPSILON_SCHEDULES}",
        )
        _require(
            self,
            "epsilon_factor",
            _is_num(self.epsilon_factor) and 0 < self.epsilon_factor <= 1,
            "a float in (0, 1], e.g. 0.995",
        )
        _require(
            self,
            "epsilon_every",
            _is_int(self.epsilon_every) and self.epsilon_every > 0,
            "a positive int (env steps per seed between decay steps), e.g. 1000",
        )
        _require(
            self,
            "lr_period_fraction",
            _is_num(self.lr_period_fraction) and 0 < self.lr_period_fraction <= 1,
            "a float in (0, 1], e.g. 0.1 (a tenth of the run)",
        )
        _require(
            self,
            "gamma_schedule",
            self.gamma_schedule == "constant" or parse_gamma_schedule(self.gamma_schedule),
            f'"constant" or up to {MAX_GAMMA_PHASES} phases "gamma:until,...,gamma" with each '
            'gamma in [0, 1] and increasing fractions in (0, 1), e.g. "0.99:0.3,0.95:0.7,0.9"',
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """Learning from demonstrations (DQfD, Hester et al. 2018): a fixed set of demonstration
    steps, a share of every batch drawn from it, and a large-margin loss on those rows.

    Attributes:
      source: "" (off), "scripted" (the env's scripted controller, `envs.scripted`, plays
        `steps` env steps before training) or the path of an `.npz` of recorded steps
        (`jaxrl_fast.demos.record` writes one from a trained agent's episodes).
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
        _require(
            self,
            "source",
            isinstance(self.source, str),
            '"" (off), "scripted" or the path of an .npz of recorded steps',
        )
        _require(self, "steps", _is_int(self.steps) and self.steps > 0, "a positive int")
        _require(self, "share", _is_num(self.share) and 0 < self.share < 1, "a float in (0, 1)")
        _require(self, "margin", _is_num(self.margin) and self.margin >= 0, "a float >= 0")
        _require(self, "weight", _is_num(self.weight) and self.weight >= 0, "a float >= 0")
        _require(
            self,
            "decay_fraction",
            _is_num(self.decay_fraction) and 0 < self.decay_fraction <= 1,
            "a float in (0, 1]",
        )

    @property
    def active(self) -> bool:
        return bool(self.source)


_SYNCS = ("every_step", "every:K")
_COMPRESSIONS = ("none", "onebit")


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
        _require(self, "data", _is_int(self.data) and self.data > 0, "a positive int")
        _require(
            self,
            "sync",
            self.sync == "every_step" or _sync_period(self.sync) is not None,
            '"every_step" or "every:K" with K a positive int',
        )
        _require(self, "compression", self.compression in _COMPRESSIONS, f"one of {_COMPRESSIONS}")
        _require(
            self,
            "warmup_fraction",
            _is_num(self.warmup_fraction) and 0 < self.warmup_fraction < 1,
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A whole training run.

    The loop has its schedule in its shape: `learning_starts // num_envs` prefill collect steps,
    then blocks of `train_frequency // num_envs` collect steps each followed by
    `updates_per_block` gradient steps; the run is split into `num_chunks` host calls.

    Attributes:
      env, network, replay, dqn, schedule, precision, parallel: the part configs.
      total_env_steps: env steps per seed, prefill included.
      learning_starts: env steps collected before the first update.
      train_frequency: env steps per block (one block = collect, then update).
      updates_per_block: gradient steps after each block.
      num_seeds: independent runs vmapped in one program.
      seed: base seed; seed i of the run uses `split(key(seed), num_seeds)[i]`.
      num_chunks: host calls the training is split into (progress, NaN checks); None picks a
        divisor of the number of blocks near 20. Results do not depend on it.
      eval_episodes: evaluation episodes per seed at the end of training (and at each
        `eval_every`); 0 skips evaluation (nothing is compiled for it, final returns are None).
      eval_every: evaluate every this many env steps per seed during training, at the end of
        the first chunk that reaches each multiple (and at the end), with the same evaluation
        keys every time; None: only at the end. Host-side only: the training numbers do not
        depend on it.
      seed_loop: how the seeds of one program run: "vmap" (batched: one program step steps
        every seed at once), "map" (`lax.map`: one seed after another inside the program) or
        "auto" (map on CPU for the Nature torso, where a batch of seeds runs no faster per
        FLOP and its batched convolutions are slow; vmap otherwise). Results agree to float
        rounding.
      eval_epsilon: exploration rate of the evaluation policy (0 = greedy). Atari evaluations
        use a little (Nature DQN: 0.05): a deterministic greedy policy can loop forever in a
        game such as Pong and is then scored on a cut game.
      prng_impl: the random-number generator behind every key of the run, one of JAX's
        "threefry2x32" (the default: counter-based, the same streams on every backend and under
        vmap or map), "rbg" or "unsafe_rbg" (XLA's RngBitGenerator: much less code to compile,
        since threefry's rounds are unrolled into every random call site, but other random
        streams, which may differ across backends and JAX versions; "unsafe_rbg" also derives
        split / fold_in keys by a cheap hash, fine for RL's exploration and sampling, not for
        cryptography; and under "unsafe_rbg" the vmapped and the mapped seed loop draw different
        numbers, so they agree to float rounding only under "threefry2x32"). See README,
        "Compile time".
    """

    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    replay: ReplayConfig = dataclasses.field(default_factory=ReplayConfig)
    dqn: DQNConfig = dataclasses.field(default_factory=DQNConfig)
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    precision: PrecisionConfig = dataclasses.field(default_factory=PrecisionConfig)
    parallel: ParallelConfig = dataclasses.field(default_factory=ParallelConfig)
    demo: DemoConfig = dataclasses.field(default_factory=DemoConfig)
    total_env_steps: int = 500_000
    learning_starts: int = 10_000
    train_frequency: int = 10
    updates_per_block: int = 1
    num_seeds: int = 1
    seed: int = 0
    num_chunks: int | None = None
    eval_episodes: int = 10
    eval_every: int | None = None
    eval_epsilon: float = 0.0
    seed_loop: str = "auto"
    prng_impl: str = "threefry2x32"

    def __post_init__(self) -> None:
        for name, cls in (
            ("env", EnvConfig),
            ("network", NetworkConfig),
            ("replay", ReplayConfig),
            ("dqn", DQNConfig),
            ("schedule", ScheduleConfig),
            ("precision", PrecisionConfig),
            ("parallel", ParallelConfig),
            ("demo", DemoConfig),
        ):
            _require(self, name, isinstance(getattr(self, name), cls), f"a {cls.__name__}")
        e = self.env.num_envs
        _require(self, "seed", _is_int(self.seed) and self.seed >= 0, "an int >= 0")
        _require(
            self, "num_seeds", _is_int(self.num_seeds) and self.num_seeds > 0, "a positive int"
        )
        _require(
            self,
            "eval_episodes",
            _is_int(self.eval_episodes) and self.eval_episodes >= 0,
            "an int >= 0",
        )
        _require(
            self,
            "eval_every",
            self.eval_every is None or (_is_int(self.eval_every) and self.eval_every > 0),
            "None or a positive int (env steps per seed)",
        )
        if self.eval_every is not None and self.eval_episodes == 0:
            raise ValueError(
                f"TrainConfig.eval_every={self.eval_every} needs eval_episodes >= 1 (it is 0: "
                "no evaluation); set eval_episodes, or eval_every=None."
            )
        _require(self, "seed_loop", self.seed_loop in _SEED_LOOPS, f"one of {_SEED_LOOPS}")
        _require(self, "prng_impl", self.prng_impl in PRNG_IMPLS, f"one of {PRNG_IMPLS}")
        _require(
            self,
            "eval_epsilon",
            _is_num(self.eval_epsilon) and 0 <= self.eval_epsilon <= 1,
            "a float in [0, 1]",
        )
        _require(
            self,
            "updates_per_block",
            _is_int(self.updates_per_block) and self.updates_per_block > 0,
            "a positive int",
        )
        _require(
            self,
            "train_frequency",
            _is_int(self.train_frequency)
            and self.train_frequency > 0
            and self.train_frequency % e == 0,
            f"a positive multiple of env.num_envs={e} (env steps per block)",
        )
        _require(
            self,
            "learning_starts",
            _is_int(self.learning_starts)
            and self.learning_starts >= 2 * e
            and self.learning_starts % e == 0,
            f"a multiple of env.num_envs={e} that is >= {2 * e}",
        )
        _require(
            self,
            "total_env_steps",
            _is_int(self.total_env_steps)
            and self.total_env_steps > self.learning_starts
            and (self.total_env_steps - self.learning_starts) % self.train_frequency == 0,
            f"an int > learning_starts={self.learning_starts} with (total_env_steps - "
            f"learning_starts) a multiple of train_frequency={self.train_frequency}; "
            f"nearest valid: {self._nearest_total()}",
        )
        if isinstance(self.replay.capacity, int) and self.replay.capacity % e:
            raise ValueError(
                f"ReplayConfig.capacity={self.replay.capacity} is not allowed; expected a "
                f"multiple of env.num_envs={e}; nearest valid: "
                f"{max(self.replay.capacity // e, 2) * e}."
            )
        if isinstance(self.replay.capacity, int) and self.replay.capacity < 2 * e:
            raise ValueError(
                f"ReplayConfig.capacity={self.replay.capacity} is not allowed; expected at least "
                f"2 x env.num_envs={2 * e} (one row per env and its successor)."
            )
        if self.dqn.target_period % self.train_frequency:
            raise ValueError(
                f"DQNConfig.target_period={self.dqn.target_period} is not allowed; expected a "
                f"multiple of TrainConfig.train_frequency={self.train_frequency} (target updates "
                f"happen on block boundaries)."
            )
        self._check_parallel()
        self._check_recurrent()
        self._check_demos()
        if self.num_seeds % self.env.num_variants:
            raise ValueError(
                f"TrainConfig.num_seeds={self.num_seeds} is not allowed with "
                f"{self.env.num_variants} EnvConfig.variants; expected a multiple of "
                f"{self.env.num_variants} (seed i trains on variant i mod "
                f"{self.env.num_variants}), e.g. {self.env.num_variants}."
            )
        if self.num_chunks is not None:
            ok = (
                _is_int(self.num_chunks)
                and self.num_chunks > 0
                and self.num_blocks % self.num_chunks == 0
            )
            _require(
                self,
                "num_chunks",
                ok,
                f"None or a positive divisor of the number of blocks ({self.num_blocks}), e.g. "
                f"{_divisor_near(self.num_blocks, 20)}",
            )

    def _check_parallel(self) -> None:
        """Data replicas need per-device state: no pool env, no host tier; `every:K` syncs on
        update boundaries."""
        data = self.parallel.data
        if data == 1:
            return
        if self.env.is_envpool:
            raise ValueError(
                f"ParallelConfig.data={data} is not allowed with an envpool env "
                f"({self.env.name!r}): its pool is one host object that keeps every seed on one "
                "device. Use data=1 (seeds still spread over devices), or a gymnax env."
            )
        if self.replay.l3 != "off":
            raise ValueError(
                f"ParallelConfig.data={data} is not allowed with ReplayConfig.l3="
                f"{self.replay.l3!r}: the host tier's callbacks keep the seeds on one device. "
                "Use l3='off'."
            )

    def _check_recurrent(self) -> None:
        """A recurrent network and sequence replay go together; the ring holds a sequence."""
        lstm, length = self.network.lstm, self.replay.sequence_length
        if bool(lstm) != bool(length):
            raise ValueError(
                f"NetworkConfig.lstm={lstm} with ReplayConfig.sequence_length={length} is not "
                "allowed: a recurrent network (lstm > 0) trains on stored sequences "
                "(sequence_length > 0, e.g. 8) and sequences need one; set both or neither."
            )
        window = self.replay.burn_in + length + self.replay.n_step
        cap = self.replay.capacity
        if length and not isinstance(cap, int):
            raise ValueError(
                f"ReplayConfig.capacity={cap!r} is not allowed with sequence_length={length}: "
                "memory shares do not count the stored recurrent state yet; give a number of "
                "rows, e.g. 100000."
            )
        if length and isinstance(cap, int) and cap < window * self.env.num_envs:
            raise ValueError(
                f"ReplayConfig.capacity={cap} is not allowed with sequences of burn_in + "
                f"sequence_length + n_step = {window} steps; expected at least "
                f"{window * self.env.num_envs} ({window} steps of env.num_envs="
                f"{self.env.num_envs})."
            )

    def _check_demos(self) -> None:
        """Demonstrations mix into transition batches from L2 only."""
        demo = self.demo
        if not demo.active:
            return
        if self.network.lstm or self.replay.l3 != "off":
            raise ValueError(
                f"DemoConfig.source={demo.source!r} is not allowed with NetworkConfig.lstm="
                f"{self.network.lstm}, ReplayConfig.l3={self.replay.l3!r}: demonstration rows "
                "join batches of transitions drawn from the device ring; use lstm=0, l3='off'."
            )
        if self.schedule.gamma_schedule != "constant":
            raise ValueError(
                f"DemoConfig.source={demo.source!r} is not allowed with "
                f"ScheduleConfig.gamma_schedule={self.schedule.gamma_schedule!r}: demonstration "
                "rows are staged once, with DQNConfig.gamma; use gamma_schedule='constant'."
            )
        rows = self.demo_rows_per_batch
        if not 0 < rows < self.replay.batch_size:
            raise ValueError(
                f"DemoConfig.share={demo.share} of ReplayConfig.batch_size="
                f"{self.replay.batch_size} gives {rows} demonstration rows per batch; expected "
                f"between 1 and {self.replay.batch_size - 1}."
            )

    @property
    def demo_rows_per_batch(self) -> int:
        """Rows of every batch drawn from the demonstrations (0 without them)."""
        if not self.demo.active:
            return 0
        return int(round(self.demo.share * self.replay.batch_size))

    @property
    def num_lanes(self) -> int:
        """Learners' copies in the program: `num_seeds` x `parallel.data` (replicas)."""
        return self.num_seeds * self.parallel.data

    def _nearest_total(self) -> int:
        if not (_is_int(self.total_env_steps) and _is_int(self.learning_starts)):
            return 0
        f = (
            self.train_frequency
            if _is_int(self.train_frequency) and self.train_frequency > 0
            else 1
        )
        blocks = max(1, round((self.total_env_steps - self.learning_starts) / f))
        return self.learning_starts + blocks * f

    @property
    def collect_steps_per_block(self) -> int:
        """Collect steps (each steps every env once) per block."""
        return self.train_frequency // self.env.num_envs

    @property
    def prefill_steps(self) -> int:
        """Collect steps before the first update."""
        return self.learning_starts // self.env.num_envs

    @property
    def num_blocks(self) -> int:
        """Training blocks after the prefill."""
        return (self.total_env_steps - self.learning_starts) // self.train_frequency

    @property
    def chunks(self) -> int:
        """Host calls the training blocks are split into."""
        return (
            self.num_chunks if self.num_chunks is not None else _divisor_near(self.num_blocks, 20)
        )

    @property
    def blocks_per_chunk(self) -> int:
        """Blocks per host call."""
        return self.num_blocks // self.chunks

    @property
    def target_period_blocks(self) -> int:
        """Blocks between target updates."""
        return self.dqn.target_period // self.train_frequency

    @property
    def total_updates(self) -> int:
        """Gradient steps per seed."""
        return self.num_blocks * self.updates_per_block

    def replace(self, **changes: Any) -> TrainConfig:
        """Return a copy with `changes`; part configs may be given as dicts of field changes.

        Examples:
          >>> cfg = TrainConfig().replace(replay={"batch_size": 32}, num_seeds=2)
          >>> cfg.replay.batch_size, cfg.num_seeds
          (32, 2)
        """
        return _replace(self, changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as plain JSON-ready data."""
        return dataclasses.asdict(self)


def _replace(obj: Any, changes: dict[str, Any]) -> Any:
    """`dataclasses.replace`, where a dict given for a dataclass field changes its fields."""
    parts = {}
    for name, value in changes.items():
        current = getattr(obj, name, None)  # unknown names: dataclasses.replace raises
        if isinstance(value, dict) and dataclasses.is_dataclass(current):
            value = _replace(current, value)
        parts[name] = value
    return dataclasses.replace(obj, **parts)


def _divisor_near(n: int, target: int) -> int:
    """Return the divisor of `n` closest to `target` (ties go to the larger one)."""
    best = 1
    for d in range(1, min(n, 10 * target) + 1):
        if n % d == 0 and abs(d - target) <= abs(best - target):
            best = d
    return best
