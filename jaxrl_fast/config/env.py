"""Env settings: the env, Atari options, action discretisation, reward shaping, variants and a
curriculum."""

from __future__ import annotations

import dataclasses

from jaxrl_fast.config.fields import config_class, is_int, is_num, knob, require

_ADVANCE = ("progress", "return")


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


@config_class
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
        require(
            self,
            "param",
            self.param is None or (isinstance(self.param, str) and bool(self.param)),
            "None or a gymnax EnvParams field name, e.g. 'goal_position'",
        )
        require(self, "start", is_num(self.start), "a number")
        require(self, "end", is_num(self.end), "a number")
        require(self, "stages", is_int(self.stages) and self.stages >= 2, "an int >= 2")
        require(self, "advance", self.advance in _ADVANCE, f"one of {_ADVANCE}")
        require(self, "success_return", is_num(self.success_return), "a number")
        if self.param is not None and self.start == self.end:
            raise ValueError(
                f"CurriculumConfig.end={self.end!r} is not allowed; expected a value other "
                f"than start={self.start!r} (a curriculum needs somewhere to go)."
            )

    @property
    def active(self) -> bool:
        return self.param is not None


@config_class
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
        require(self, "frame_skip", is_int(self.frame_skip) and self.frame_skip >= 1, "an int >= 1")
        require(self, "img_size", is_int(self.img_size) and self.img_size >= 36, "an int >= 36")
        require(self, "stack_num", is_int(self.stack_num) and self.stack_num >= 1, "an int >= 1")
        require(self, "noop_max", is_int(self.noop_max) and self.noop_max >= 0, "an int >= 0")
        for name in ("episodic_life", "reward_clip", "sticky_actions"):
            require(self, name, isinstance(getattr(self, name), bool), "True or False")
        require(
            self,
            "max_episode_frames",
            is_int(self.max_episode_frames) and self.max_episode_frames >= self.frame_skip,
            f"an int >= frame_skip={self.frame_skip}",
        )

    @property
    def max_episode_steps(self) -> int:
        """Agent steps after which a game is truncated."""
        return self.max_episode_frames // self.frame_skip


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvConfig:
    """Environment settings.

    Attributes:
      name: a gymnax discrete-action env id (e.g. "CartPole-v1", "Breakout-MinAtar"),
        optionally prefixed "gymnax:" (`jaxrl_fast.envs.list_envs()` lists them), or an Atari
        game through envpool, e.g. "envpool:Pong-v5" (needs the `atari` extra), a JAX suite's
        env "suite:EnvName", e.g. "pgx:minatar-breakout", "navix:Navix-Empty-5x5-v0",
        "xminigrid:MiniGrid-Empty-8x8", "craftax:Craftax-Classic-Symbolic-v1" (each suite an
        extra; `jaxrl-fast envs --suites`, `envs/suites.py`), or one's own
        gymnax env: a name given to `jaxrl_fast.envs.register`, an import path
        "package.module:factory", or "user:<Name>" for an instance given to
        `train(config, env=...)` (`envs/custom.py`).
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
      suite_file: "" or the path of a data file a JAX suite's env reads: XLand-MiniGrid's
        "xminigrid:XLand-MiniGrid-R*" envs draw each episode's rules from a ruleset benchmark,
        a file `xminigrid.load_benchmark_from_path` reads (a bz2 pickle: load only files you
        trust). This library downloads none (docs/env-suites.md).
    """

    name: str = knob("CartPole-v1", alias="--env")
    num_envs: int = knob(10, alias="--num-envs")
    atari: AtariConfig = dataclasses.field(default_factory=AtariConfig)
    discretise: int | None = None
    reward_shaping: str | None = None
    variants: str | None = None
    curriculum: CurriculumConfig = dataclasses.field(default_factory=CurriculumConfig)
    observe: tuple[int, ...] = ()
    suite_file: str = ""

    def __post_init__(self) -> None:
        require(self, "name", isinstance(self.name, str) and bool(self.name), "a non-empty env id")
        require(self, "num_envs", is_int(self.num_envs) and self.num_envs > 0, "a positive int")
        require(self, "atari", isinstance(self.atari, AtariConfig), "an AtariConfig")
        require(
            self,
            "discretise",
            self.discretise is None or (is_int(self.discretise) and self.discretise >= 2),
            "None (a discrete-action env) or an int >= 2 (values per action dimension)",
        )
        require(
            self,
            "reward_shaping",
            self.reward_shaping is None
            or (isinstance(self.reward_shaping, str) and bool(self.reward_shaping)),
            'None or a shaping name, e.g. "potential:mountaincar-energy"',
        )
        require(
            self, "curriculum", isinstance(self.curriculum, CurriculumConfig), "a CurriculumConfig"
        )
        require(
            self,
            "observe",
            isinstance(self.observe, tuple)
            and all(is_int(i) and i >= 0 for i in self.observe)
            and len(set(self.observe)) == len(self.observe),
            "() (the whole observation) or a tuple of distinct observation indices, e.g. (0, 2)",
        )
        require(self, "suite_file", isinstance(self.suite_file, str), '"" or a file path')
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

    @property
    def return_scale(self) -> float:
        """The magnitude the discounted returns stay within, for a categorical head's support
        `[-return_scale, return_scale]` (`presets.dqn_family.apply`, `--algo`): 10 for Atari with
        clipped rewards (Dopamine's `vmax`), else 100 (Revisiting Rainbow's MinAtar configs and
        Dopamine's `c51_cartpole.gin`: rewards of about 1 a step at gamma 0.99). An env with
        larger returns sets `algo.distributional.v_min` / `v_max` itself."""
        return 10.0 if self.is_envpool and self.atari.reward_clip else 100.0
