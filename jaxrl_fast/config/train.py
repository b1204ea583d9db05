"""A whole training run (`TrainConfig`): the part configs, the run's own fields, and the checks
that span parts."""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl_fast.config import cross
from jaxrl_fast.config.agent import DQNConfig
from jaxrl_fast.config.demo import DemoConfig
from jaxrl_fast.config.env import EnvConfig
from jaxrl_fast.config.fields import config_class, is_int, is_num, knob, replace_fields, require
from jaxrl_fast.config.network import NetworkConfig
from jaxrl_fast.config.parallel import ParallelConfig
from jaxrl_fast.config.precision import PrecisionConfig
from jaxrl_fast.config.registry import LEARNERS
from jaxrl_fast.config.replay import ReplayConfig
from jaxrl_fast.config.schedule import (
    ScheduleConfig,
)
from jaxrl_fast.config.sections import AlgoConfig
from jaxrl_fast.config.selfplay import SelfPlayConfig

_SEED_LOOPS = ("auto", "vmap", "map")
PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A whole training run.

    The loop has its schedule in its shape: `learning_starts // num_envs` prefill collect steps,
    then blocks of `train_frequency // num_envs` collect steps each followed by
    `updates_per_block` gradient steps; the run is split into `num_chunks` host calls.

    Attributes:
      env, network, replay, dqn, schedule, precision, parallel, demo, selfplay: the part
        configs.
      algo: each algorithm's own section, declared in its module (`config.sections`): e.g.
        `algo.munchausen` (the "m-dqn" loss's knobs).
      total_env_steps: env steps per seed, prefill included.
      learning_starts: env steps collected before the first update.
      train_frequency: env steps per block (one block = collect, then update).
      updates_per_block: gradient steps after each block (the rollout learner: epochs x
        `algo.rollout.num_minibatches`).
      learner: how a block's steps become updates, a registered learner
        (`jaxrl_fast.loop.learners`): "replay" (every step into the replay buffer,
        `updates_per_block` sampled batches a block), "rollout" (PQN: `loop/rollout.py`, its
        knobs `algo.rollout`), or one added with `jaxrl_fast.loop.learners.register`.
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
    selfplay: SelfPlayConfig = dataclasses.field(default_factory=SelfPlayConfig)
    algo: AlgoConfig = dataclasses.field(default_factory=AlgoConfig)
    total_env_steps: int = 500_000
    learning_starts: int = 10_000
    train_frequency: int = 10
    updates_per_block: int = 1
    learner: str = "replay"
    num_seeds: int = knob(1, alias="--seeds")
    seed: int = 0
    num_chunks: int | None = None
    eval_episodes: int = knob(10, resume=True)
    eval_every: int | None = knob(None, resume=True)
    eval_epsilon: float = knob(0.0, resume=True)
    seed_loop: str = "auto"
    prng_impl: str = "threefry2x32"

    def __post_init__(self) -> None:
        self._check_sections()
        self._check_run_fields()
        self._check_blocks()
        self._check_replay_rows()
        self._check_across_sections()
        self._check_chunks()

    def _check_sections(self) -> None:
        """Each section is its config class (a dict or a wrong class is refused)."""
        for name, cls in (
            ("env", EnvConfig),
            ("network", NetworkConfig),
            ("replay", ReplayConfig),
            ("dqn", DQNConfig),
            ("schedule", ScheduleConfig),
            ("precision", PrecisionConfig),
            ("parallel", ParallelConfig),
            ("demo", DemoConfig),
            ("selfplay", SelfPlayConfig),
            ("algo", AlgoConfig),
        ):
            require(self, name, isinstance(getattr(self, name), cls), f"a {cls.__name__}")

    def _check_run_fields(self) -> None:
        """Seeds, evaluation, the seed loop and the PRNG."""
        require(self, "seed", is_int(self.seed) and self.seed >= 0, "an int >= 0")
        require(self, "num_seeds", is_int(self.num_seeds) and self.num_seeds > 0, "a positive int")
        require(
            self,
            "eval_episodes",
            is_int(self.eval_episodes) and self.eval_episodes >= 0,
            "an int >= 0",
        )
        require(
            self,
            "eval_every",
            self.eval_every is None or (is_int(self.eval_every) and self.eval_every > 0),
            "None or a positive int (env steps per seed)",
        )
        if self.eval_every is not None and self.eval_episodes == 0:
            raise ValueError(
                f"TrainConfig.eval_every={self.eval_every} needs eval_episodes >= 1 (it is 0: "
                "no evaluation); set eval_episodes, or eval_every=None."
            )
        require(self, "seed_loop", self.seed_loop in _SEED_LOOPS, f"one of {_SEED_LOOPS}")
        require(self, "prng_impl", self.prng_impl in PRNG_IMPLS, f"one of {PRNG_IMPLS}")
        require(
            self,
            "eval_epsilon",
            is_num(self.eval_epsilon) and 0 <= self.eval_epsilon <= 1,
            "a float in [0, 1]",
        )

    def _check_blocks(self) -> None:
        """The loop's shape: blocks of `train_frequency` env steps after a prefill of
        `learning_starts`, to `total_env_steps` (all multiples of `env.num_envs`)."""
        e = self.env.num_envs
        require(
            self,
            "updates_per_block",
            is_int(self.updates_per_block) and self.updates_per_block > 0,
            "a positive int",
        )
        require(
            self,
            "train_frequency",
            is_int(self.train_frequency)
            and self.train_frequency > 0
            and self.train_frequency % e == 0,
            f"a positive multiple of env.num_envs={e} (env steps per block); nearest valid: "
            f"{_nearest_multiple(self.train_frequency, e, e)}. To change num_envs, "
            f"config.with_num_envs({e}) moves every field that depends on it to its nearest "
            "valid value",
        )
        require(self, "learner", self.learner in LEARNERS, LEARNERS.allowed())
        least = 2 * e if self.replays else 0  # the replay needs a row and its successor
        require(
            self,
            "learning_starts",
            is_int(self.learning_starts)
            and self.learning_starts >= least
            and self.learning_starts % e == 0,
            f"a multiple of env.num_envs={e} that is >= {least}; nearest valid: "
            f"{_nearest_multiple(self.learning_starts, e, least)}",
        )
        require(
            self,
            "total_env_steps",
            is_int(self.total_env_steps)
            and self.total_env_steps > self.learning_starts
            and (self.total_env_steps - self.learning_starts) % self.train_frequency == 0,
            f"an int > learning_starts={self.learning_starts} with (total_env_steps - "
            f"learning_starts) a multiple of train_frequency={self.train_frequency}; "
            f"nearest valid: {self._nearest_total()}",
        )

    def _check_replay_rows(self) -> None:
        """The replay's capacity in whole rows of `env.num_envs`; target updates on blocks."""
        e = self.env.num_envs
        replay_rows = isinstance(self.replay.capacity, int) and self.replays
        if replay_rows and self.replay.capacity % e:
            raise ValueError(
                f"ReplayConfig.capacity={self.replay.capacity} is not allowed; expected a "
                f"multiple of env.num_envs={e}; nearest valid: "
                f"{max(self.replay.capacity // e, 2) * e}."
            )
        if replay_rows and self.replay.capacity < 2 * e:
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

    def _check_across_sections(self) -> None:
        """Checks that read several sections (`config.cross`), and seeds per env variant."""
        for check in (cross.check_parallel, cross.check_recurrent, cross.check_demos):
            check(self)
        if self.learner_part.check is not None:  # the learner's own checks
            self.learner_part.check(self)
        if self.num_seeds % self.env.num_variants:
            raise ValueError(
                f"TrainConfig.num_seeds={self.num_seeds} is not allowed with "
                f"{self.env.num_variants} EnvConfig.variants; expected a multiple of "
                f"{self.env.num_variants} (seed i trains on variant i mod "
                f"{self.env.num_variants}), e.g. {self.env.num_variants}."
            )

    def _check_chunks(self) -> None:
        """`num_chunks` divides the blocks."""
        if self.num_chunks is not None:
            ok = (
                is_int(self.num_chunks)
                and self.num_chunks > 0
                and self.num_blocks % self.num_chunks == 0
            )
            require(
                self,
                "num_chunks",
                ok,
                f"None or a positive divisor of the number of blocks ({self.num_blocks}), e.g. "
                f"{_divisor_near(self.num_blocks, 20)}",
            )

    @property
    def learner_part(self) -> Any:
        """The registered learner `learner` names (`loop.learners.Learner`: its facts)."""
        return LEARNERS.get(self.learner)

    @property
    def replays(self) -> bool:
        """The learner learns from a replay buffer (else from its own blocks: no prefill)."""
        return self.learner_part.replay

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
        if not (is_int(self.total_env_steps) and is_int(self.learning_starts)):
            return 0
        f = self.train_frequency if is_int(self.train_frequency) and self.train_frequency > 0 else 1
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
        """Return a copy with `changes`; part configs may be given as dicts of field changes
        (as the constructor takes them). An unknown name is a `TypeError` naming the nearest
        field.

        Examples:
          >>> cfg = TrainConfig().replace(replay={"batch_size": 32}, num_seeds=2)
          >>> cfg.replay.batch_size, cfg.num_seeds
          (32, 2)
        """
        return replace_fields(self, changes)

    def with_num_envs(self, num_envs: int) -> TrainConfig:
        """A copy with `env.num_envs=num_envs` and each field that must be a multiple of it
        moved to its nearest valid value: `train_frequency`, `learning_starts`,
        `total_env_steps` (whole blocks after the prefill), `replay.capacity` and
        `dqn.target_period` (whole blocks); and the learner's own changes
        (`Learner.with_num_envs`: a rollout keeps its steps per env).

        Examples:
          >>> cfg = TrainConfig().with_num_envs(7)
          >>> cfg.train_frequency, cfg.learning_starts, cfg.total_env_steps
          (7, 10003, 500003)
        """
        e = num_envs
        tf = _nearest_multiple(self.train_frequency, e, e)
        starts = _nearest_multiple(self.learning_starts, e, 2 * e)
        changes: dict[str, Any] = {}
        own = self.learner_part.with_num_envs
        if own is not None:  # the learner's own changes
            changes.update(own(self, e))
            tf, starts = changes["train_frequency"], changes["learning_starts"]
        total = starts + max(1, round((self.total_env_steps - starts) / tf)) * tf
        changes.update(train_frequency=tf, learning_starts=starts)
        changes["total_env_steps"] = total
        changes["dqn"] = {"target_period": _nearest_multiple(self.dqn.target_period, tf, tf)}
        if isinstance(self.replay.capacity, int):
            changes["replay"] = {"capacity": _nearest_multiple(self.replay.capacity, e, 2 * e)}
        if self.num_chunks is not None and ((total - starts) // tf) % self.num_chunks:
            changes["num_chunks"] = None  # the automatic chunking
        return self.replace(env={"num_envs": e}, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as plain JSON-ready data."""
        return {**dataclasses.asdict(self), "algo": self.algo.to_dict()}


def _nearest_multiple(value: Any, of: int, least: int) -> int:
    """The multiple of `of` nearest `value` (a number; else `least`), and at least `least`."""
    if not is_num(value):
        return least
    return max(least, round(value / of) * of)


def _divisor_near(n: int, target: int) -> int:
    """Return the divisor of `n` closest to `target` (ties go to the larger one)."""
    best = 1
    for d in range(1, min(n, 10 * target) + 1):
        if n % d == 0 and abs(d - target) <= abs(best - target):
            best = d
    return best
