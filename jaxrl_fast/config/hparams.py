"""Traced hyperparameters: the values that change no shape, as data (STYLE 3.3).

`HParams` holds every hyperparameter the compiled loop reads as a value rather than as a
shape or a code path: the learning rate and its schedule, gamma and its phases, the epsilon
schedule, the target update rate, PER's alpha, beta and eps, the Huber delta, the clip norm
and the dynamic loss scale's settings.
The loop keeps one `HParams` per seed in its carry (`AgentState.hparams`, leaves `[S]`), so a
sweep over them is one program that compiles once (`jaxrl_fast.run.sweep`). Schedule kinds are
numbers here (`LR_KINDS`, `EPSILON_KINDS`): every kind's formula is a few scalar operations,
all computed, one selected.

`SWEEPABLE` maps the dotted config fields a sweep may vary to what they set; any other field
changes shapes or code paths and is refused (`check_sweepable`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from jaxrl_fast.config import SWEEPABLE as _SWEEPABLE
from jaxrl_fast.config import (
    DQNConfig,
    PrecisionConfig,
    ReplayConfig,
    ScheduleConfig,
    TrainConfig,
)
from jaxrl_fast.config.fields import traced
from jaxrl_fast.config.schedule import gamma_phases as config_gamma_phases
from jaxrl_fast.config.sections import AlgoConfig, traced_knobs
from jaxrl_fast.types import Array

# Each sweepable field's leaves and encoder, from its declaration (`knob(sweep=...)`).
_TRACED = traced(TrainConfig)
_LEAVES = tuple(leaf for spec, _ in _TRACED.values() for leaf in spec.leaves)

HParams = NamedTuple("HParams", [*((leaf, Array) for leaf in _LEAVES), ("algo", Any)])
HParams.__doc__ = """One seed's traced hyperparameters (float32 unless said; `[S]` in the carry).

Derived from the config's declarations: one leaf per field declared `knob(sweep=True)`, named as
the field (an `int` field is int32), and the leaves a `Traced` declaration names: `lr_kind` /
`epsilon_kind` index `LR_KINDS` / `EPSILON_KINDS` (int32), `max_grad_norm` is `inf` for no clip,
and the gamma schedule is `gamma_values [G]` with `gamma_until [G]` (phase i holds while the
training fraction is below `gamma_until[i]`; `inf` pads), G = `MAX_GAMMA_PHASES`. `algo` holds the
algorithm sections' sweepable knobs (`config.sections`): `{section: {field: value}}`.
"""

# The fields a sweep may vary: those declared `knob(sweep=...)` (`config.fields`).
SWEEPABLE = _SWEEPABLE


def gamma_phases(dqn: DQNConfig, schedule: ScheduleConfig) -> tuple[np.ndarray, np.ndarray]:
    """`(values [G], until [G])` float32 of a gamma schedule (constant: one phase)."""
    return config_gamma_phases(dqn.gamma, schedule.gamma_schedule)


def hparams_of(config: TrainConfig) -> HParams:
    """The `HParams` a config sets (numpy scalars, one seed)."""
    return hparams_from_parts(
        config.dqn, config.schedule, config.replay, config.precision, config.algo
    )


def hparams_from_parts(
    d: DQNConfig,
    s: ScheduleConfig,
    r: ReplayConfig,
    p: PrecisionConfig | None = None,
    algo: AlgoConfig | None = None,
) -> HParams:
    """The `HParams` of the section configs that hold them, each field encoded as declared
    (`algo` None: every algorithm section's defaults)."""
    algo = AlgoConfig() if algo is None else algo
    knobs = {
        name: {
            f: (np.int32 if is_int else np.float32)(getattr(algo[name], f))
            for f, is_int in fs.items()
        }
        for name, fs in traced_knobs().items()
    }
    sections = {"dqn": d, "schedule": s, "replay": r, "precision": p or PrecisionConfig()}
    values = []
    for dotted, (spec, is_int) in _TRACED.items():
        section, name = dotted.split(".")
        value = getattr(sections[section], name)
        if spec.encode is not None:
            values += spec.encode(value, sections)
        elif spec.leaves:
            values.append(np.int32(value) if is_int else np.float32(value))
    return HParams(*values, algo=knobs)


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
    algo = {
        name: {f: np.stack([h.algo[name][f] for h in hparams]) for f in knobs}
        for name, knobs in hparams[0].algo.items()
    }
    leaves = zip(*(h[:-1] for h in hparams), strict=True)
    return HParams(*(np.stack(x) for x in leaves), algo=algo)


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
