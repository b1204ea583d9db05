"""Traced hyperparameters: the values that change no shape, as data (STYLE 3.3).

`HParams` holds every hyperparameter the compiled loop reads as a value rather than as a
shape or a code path: the learning rate and its schedule, gamma and its phases, the epsilon
schedule, the target update rate, PER's alpha, beta and eps, the Huber delta, the clip norm
and the dynamic loss scale's settings.
The loop keeps one `HParams` per seed in its carry (`AgentState.hparams`, leaves `[S]`), so a
sweep over them is one program that compiles once (`jaxrl_fast.sweep`). Schedule kinds are
numbers here (`LR_KINDS`, `EPSILON_KINDS`): every kind's formula is a few scalar operations,
all computed, one selected.

`SWEEPABLE` maps the dotted config fields a sweep may vary to what they set; any other field
changes shapes or code paths and is refused (`check_sweepable`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from jaxrl_fast.config import (
    EPSILON_SCHEDULES as EPSILON_KINDS,
)
from jaxrl_fast.config import (
    LR_SCHEDULES as LR_KINDS,
)
from jaxrl_fast.config import (
    MAX_GAMMA_PHASES,
    DQNConfig,
    PrecisionConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
    parse_gamma_schedule,
)
from jaxrl_fast.config import SWEEPABLE as _SWEEPABLE
from jaxrl_fast.types import Array


class HParams(NamedTuple):
    """One seed's traced hyperparameters (float32 scalars unless said; `[S]` in the carry).

    Attributes mirror the config fields of `SWEEPABLE`; `max_grad_norm` is `inf` for no clip,
    `lr_kind` / `epsilon_kind` index `LR_KINDS` / `EPSILON_KINDS` (int32), and the gamma
    schedule is `gamma_values [G]` with `gamma_until [G]` (phase i holds while the training
    fraction is below `gamma_until[i]`; `inf` pads), G = `MAX_GAMMA_PHASES`.
    """

    learning_rate: Array
    lr_kind: Array
    lr_end_fraction: Array
    lr_period_fraction: Array
    gamma_values: Array
    gamma_until: Array
    epsilon_kind: Array
    epsilon_start: Array
    epsilon_end: Array
    epsilon_fraction: Array
    epsilon_factor: Array
    epsilon_every: Array
    tau: Array
    huber_delta: Array
    max_grad_norm: Array
    alpha: Array
    beta: Array
    priority_eps: Array
    initial_scale: Array
    growth_interval: Array
    min_scale: Array
    fallback_overflows: Array
    fallback_window: Array


# dotted config field -> what it sets (the gamma phases come from two fields)
# The fields a sweep may vary: those declared `knob(sweep=True)` (`config.fields`).
SWEEPABLE = _SWEEPABLE


def gamma_phases(dqn: DQNConfig, schedule: ScheduleConfig) -> tuple[np.ndarray, np.ndarray]:
    """`(values [G], until [G])` float32 of a gamma schedule (constant: one phase)."""
    phases = parse_gamma_schedule(schedule.gamma_schedule) or [(dqn.gamma, math.inf)]
    phases = phases + [phases[-1]] * (MAX_GAMMA_PHASES - len(phases))
    values = np.asarray([g for g, _ in phases], np.float32)
    until = np.asarray([u for _, u in phases], np.float32)
    return values, until


def hparams_of(config: TrainConfig) -> HParams:
    """The `HParams` a config sets (numpy scalars, one seed)."""
    return hparams_from_parts(config.dqn, config.schedule, config.replay, config.precision)


def hparams_from_parts(
    d: DQNConfig, s: ScheduleConfig, r: ReplayConfig, p: PrecisionConfig | None = None
) -> HParams:
    """The `HParams` of the part configs that hold them."""
    f, i = np.float32, np.int32
    p = p or PrecisionConfig()
    values, until = gamma_phases(d, s)
    return HParams(
        learning_rate=f(d.learning_rate),
        lr_kind=np.int32(LR_KINDS.index(s.lr_schedule)),
        lr_end_fraction=f(s.lr_end_fraction),
        lr_period_fraction=f(s.lr_period_fraction),
        gamma_values=values,
        gamma_until=until,
        epsilon_kind=np.int32(EPSILON_KINDS.index(s.epsilon_schedule)),
        epsilon_start=f(s.epsilon_start),
        epsilon_end=f(s.epsilon_end),
        epsilon_fraction=f(s.epsilon_fraction),
        epsilon_factor=f(s.epsilon_factor),
        epsilon_every=f(s.epsilon_every),
        tau=f(d.tau),
        huber_delta=f(d.huber_delta),
        max_grad_norm=f(math.inf if d.max_grad_norm is None else d.max_grad_norm),
        alpha=f(r.alpha),
        beta=f(r.beta),
        priority_eps=f(r.priority_eps),
        initial_scale=f(p.initial_scale),
        growth_interval=i(p.growth_interval),
        min_scale=f(p.min_scale),
        fallback_overflows=i(p.fallback_overflows),
        fallback_window=i(p.fallback_window),
    )


class Kinds(NamedTuple):
    """What the seeds' `HParams` need compiled (static): the learning-rate and epsilon schedule
    kinds present (indices of `LR_KINDS` / `EPSILON_KINDS`), whether any gamma schedule has
    phases, whether any seed clips its gradients. Only these are traced into the program; the
    values stay data. A plain run compiles its own kinds only."""

    lr: tuple[int, ...]
    epsilon: tuple[int, ...]
    gamma_phases: bool
    clip: bool


def kinds_of(hparams: HParams) -> Kinds:
    """The `Kinds` of one `HParams` or of a stack of them (leading seed axis)."""
    lr = np.unique(np.asarray(hparams.lr_kind)).tolist()
    eps = np.unique(np.asarray(hparams.epsilon_kind)).tolist()
    until = np.asarray(hparams.gamma_until)
    return Kinds(
        lr=tuple(int(k) for k in lr),
        epsilon=tuple(int(k) for k in eps),
        gamma_phases=bool(np.isfinite(until[..., 0]).any()),
        clip=bool(np.isfinite(np.asarray(hparams.max_grad_norm)).any()),
    )


def stack(hparams: list[HParams]) -> HParams:
    """Stack per-seed `HParams` into one with leaves `[S, ...]`."""
    return HParams(*(np.stack(leaves) for leaves in zip(*hparams, strict=True)))


def check_sweepable(name: str) -> None:
    """Raise a `ValueError` unless the dotted field `name` may vary within one program."""
    if name in SWEEPABLE:
        return
    why = (
        "it changes array shapes or a code path, so each value needs its own compiled program "
        "(run one `train` per value)"
    )
    raise ValueError(
        f"sweep: {name!r} cannot be swept: {why}. Sweepable fields: {', '.join(SWEEPABLE)}."
    )
