"""Frozen, validated configuration for a jaxrl_fast run: one module per section.

    env        EnvConfig (AtariConfig, CurriculumConfig)
    network    NetworkConfig
    replay     ReplayConfig
    agent      DQNConfig
    schedule   ScheduleConfig
    precision  PrecisionConfig
    demo       DemoConfig
    selfplay   SelfPlayConfig
    parallel   ParallelConfig
    train      TrainConfig: the parts and the run's own fields; the checks that span parts
    sections   `TrainConfig.algo`: each algorithm's own section, declared in its module
    fields     `knob(...)`: how a field declares its facts (sweepable, resume-overridable, alias)

Every dataclass is keyword-only and frozen; `__post_init__` checks each field and raises a
`ValueError` that names `Class.field`, the value and what is allowed, before anything compiles.
Derived numbers are properties, never writes. `SWEEPABLE` and `RESUME_OVERRIDABLE` are derived
from the fields' declarations.
"""

from jaxrl_fast.config.agent import DQNConfig
from jaxrl_fast.config.demo import DemoConfig
from jaxrl_fast.config.env import AtariConfig, CurriculumConfig, EnvConfig, parse_variants
from jaxrl_fast.config.fields import aliases, declared, knob
from jaxrl_fast.config.network import NetworkConfig
from jaxrl_fast.config.parallel import ParallelConfig
from jaxrl_fast.config.precision import PrecisionConfig
from jaxrl_fast.config.replay import (
    CAPACITY_PRESETS,
    PRIORITY_FORMULAS,
    SPILL_BLOCKS,
    ReplayConfig,
    capacity_share,
    priority_rule,
    spill_block_bytes,
)
from jaxrl_fast.config.schedule import (
    EPSILON_SCHEDULES,
    LR_SCHEDULES,
    MAX_GAMMA_PHASES,
    ScheduleConfig,
    parse_gamma_schedule,
)
from jaxrl_fast.config.sections import AlgoConfig, Declared, register_section
from jaxrl_fast.config.selfplay import SelfPlayConfig
from jaxrl_fast.config.train import PRNG_IMPLS, TrainConfig

# Fields a sweep may vary: traced values of `HParams`, no shape or code path (`knob(sweep=True)`),
# the registered algorithm sections' included (a live view: `config.sections`).
SWEEPABLE = Declared(declared(TrainConfig, "sweep"), "sweep")
# Fields a resumed run may change (`train(..., force_config=True)`, `--force-config`): they
# change constants of the compiled program or the evaluation, never an array's shape, the
# optimiser state's structure or the chunking of the run (`knob(resume=True)`).
RESUME_OVERRIDABLE = Declared(declared(TrainConfig, "resume"), "resume")

__all__ = [
    "AlgoConfig",
    "AtariConfig",
    "CAPACITY_PRESETS",
    "CurriculumConfig",
    "DQNConfig",
    "DemoConfig",
    "EPSILON_SCHEDULES",
    "EnvConfig",
    "LR_SCHEDULES",
    "MAX_GAMMA_PHASES",
    "NetworkConfig",
    "PRIORITY_FORMULAS",
    "PRNG_IMPLS",
    "ParallelConfig",
    "PrecisionConfig",
    "RESUME_OVERRIDABLE",
    "ReplayConfig",
    "SPILL_BLOCKS",
    "SWEEPABLE",
    "ScheduleConfig",
    "SelfPlayConfig",
    "TrainConfig",
    "aliases",
    "capacity_share",
    "declared",
    "knob",
    "parse_gamma_schedule",
    "parse_variants",
    "priority_rule",
    "register_section",
    "spill_block_bytes",
]
