"""Schedules of epsilon, the learning rate and gamma over training."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from jaxrl_fast.config.fields import Traced, config_class, is_int, is_num, knob, require

LR_SCHEDULES = ("constant", "linear", "cosine_restarts")
EPSILON_SCHEDULES = ("linear", "factor")
MAX_GAMMA_PHASES = 4


def gamma_phases(gamma: float, schedule: str) -> tuple[np.ndarray, np.ndarray]:
    """`(values [G], until [G])` float32 of a gamma schedule, G = `MAX_GAMMA_PHASES` (the last
    phase repeated); "constant" is one phase of `gamma`.

      >>> gamma_phases(0.9, "constant")[0].tolist()
      [0.8999999761581421, 0.8999999761581421, 0.8999999761581421, 0.8999999761581421]
    """
    phases = parse_gamma_schedule(schedule) or [(gamma, math.inf)]
    phases = phases + [phases[-1]] * (MAX_GAMMA_PHASES - len(phases))
    values = np.asarray([g for g, _ in phases], np.float32)
    until = np.asarray([u for _, u in phases], np.float32)
    return values, until


def _kind(names: tuple[str, ...]):
    """A schedule's name, traced as its index in `names` (int32)."""
    return lambda value, sections: (np.int32(names.index(value)),)


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


@config_class
@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduleConfig:
    """Exploration, learning-rate and discount schedules (`jaxrl_fast.agent.schedules`).

    Every value here is a traced hyperparameter (`jaxrl_fast.config.hparams.HParams`): a sweep may
    vary any of them, the schedule kinds included, in one compiled program.

    Attributes:
      epsilon_schedule: "linear": from `epsilon_start` to `epsilon_end` over
        `epsilon_fraction * total_env_steps` env steps; "factor": `epsilon_start` multiplied by
        `epsilon_factor` every `epsilon_every` env steps (per seed), never below `epsilon_end`
        (the seed article's 1.0 x 0.995 every 1,000 steps down to 0.01).
      epsilon_start: epsilon at env step 0.
      epsilon_end: epsilon after the decay ("linear"), its floor ("factor").
      epsilon_fraction: share of `total_env_steps` (or `horizon`) over which epsilon decays
        ("linear").
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
      horizon: the env steps per seed that the schedules' fractions are of (epsilon's decay,
        the learning rate's decay and periods, the gamma phases): None is `total_env_steps`; a
        reference's budget makes a shorter run follow the reference's schedules for as long as
        it trains (purejaxql's `TOTAL_TIMESTEPS_REAL`), e.g. epsilon over 250k of 10M env steps
        while training 1M. Past the horizon every schedule holds its final value.
    """

    epsilon_schedule: str = knob(
        "linear", sweep=Traced(("epsilon_kind",), _kind(EPSILON_SCHEDULES)), resume=True
    )
    epsilon_start: float = knob(1.0, sweep=True, resume=True)
    epsilon_end: float = knob(0.05, sweep=True, resume=True)
    epsilon_fraction: float = knob(0.5, sweep=True, resume=True)
    epsilon_factor: float = knob(0.995, sweep=True, resume=True)
    # counted in float32, as the epsilon formula that reads it
    epsilon_every: int = knob(
        1000, sweep=Traced(("epsilon_every",), lambda v, s: (np.float32(v),)), resume=True
    )
    lr_schedule: str = knob(
        "constant", sweep=Traced(("lr_kind",), _kind(LR_SCHEDULES)), resume=True
    )
    lr_end_fraction: float = knob(0.0, sweep=True, resume=True)
    lr_period_fraction: float = knob(0.1, sweep=True, resume=True)
    gamma_schedule: str = knob(
        "constant",
        sweep=Traced(("gamma_values", "gamma_until"), lambda v, s: gamma_phases(s["dqn"].gamma, v)),
        resume=True,
    )
    horizon: int | None = None

    def __post_init__(self) -> None:
        for name in ("epsilon_start", "epsilon_end"):
            require(
                self,
                name,
                is_num(getattr(self, name)) and 0 <= getattr(self, name) <= 1,
                "a float in [0, 1]",
            )
        require(
            self,
            "epsilon_fraction",
            is_num(self.epsilon_fraction) and 0 < self.epsilon_fraction <= 1,
            "a float in (0, 1]",
        )
        require(self, "lr_schedule", self.lr_schedule in LR_SCHEDULES, f"one of {LR_SCHEDULES}")
        h = self.horizon
        require(
            self,
            "horizon",
            h is None or (is_int(h) and h >= 1),
            "None (the run's total_env_steps) or an int >= 1 (env steps per seed)",
        )
        require(
            self,
            "lr_end_fraction",
            is_num(self.lr_end_fraction) and 0 <= self.lr_end_fraction <= 1,
            "a float in [0, 1]",
        )
        require(
            self,
            "epsilon_schedule",
            self.epsilon_schedule in EPSILON_SCHEDULES,
            f"one of {EPSILON_SCHEDULES}",
        )
        require(
            self,
            "epsilon_factor",
            is_num(self.epsilon_factor) and 0 < self.epsilon_factor <= 1,
            "a float in (0, 1], e.g. 0.995",
        )
        require(
            self,
            "epsilon_every",
            is_int(self.epsilon_every) and self.epsilon_every > 0,
            "a positive int (env steps per seed between decay steps), e.g. 1000",
        )
        require(
            self,
            "lr_period_fraction",
            is_num(self.lr_period_fraction) and 0 < self.lr_period_fraction <= 1,
            "a float in (0, 1], e.g. 0.1 (a tenth of the run)",
        )
        require(
            self,
            "gamma_schedule",
            self.gamma_schedule == "constant" or parse_gamma_schedule(self.gamma_schedule),
            f'"constant" or up to {MAX_GAMMA_PHASES} phases "gamma:until,...,gamma" with each '
            'gamma in [0, 1] and increasing fractions in (0, 1), e.g. "0.99:0.3,0.95:0.7,0.9"',
        )
