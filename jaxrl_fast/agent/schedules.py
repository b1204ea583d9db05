"""Schedules as `(step, hparams) -> value` functions of traced hyperparameters.

Every schedule reads its parameters from an `HParams` (`jaxrl_fast.config.hparams`), so the values,
the kinds included, are data: a sweep runs different schedules in one compiled program.
`hparams=None` uses the config's own values (as constants).

The formulas are optax's where it has them: linear decay (`optax.linear_schedule`), cosine
annealing with warm restarts (`optax.sgdr_schedule` with equal periods) and a staircase
exponential decay with a floor (`optax.exponential_decay(staircase=True, end_value=...)`).
They are written out here because optax's builders take the step counts as Python numbers (they
set a `join_schedules` boundary or are checked with an `if`), which a traced period cannot be;
`tests/agent/test_schedules.py` checks each against optax at fixed values.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.config.hparams import HParams, Kinds, hparams_of, kinds_of
from jaxrl_fast.config.registry import DENSE_LAYERS


class Schedules(NamedTuple):
    """The run's schedules; each takes an optional `HParams` (None: the config's).

    Attributes:
      epsilon: `(env_step, hp) -> epsilon` (env steps per seed).
      learning_rate: `(grad_step, hp) -> learning rate`.
      gamma: `(fraction, hp) -> gamma`, `fraction` the share of the run done.
      collect_epsilon: `(collect_index, hp) -> epsilon` of collect step `collect_index` (all
        envs of a seed step once per collect step): shared by the fused loop and the baseline.
      collect_gamma: `(collect_index, hp) -> gamma` at that collect step.
      update_gamma: `(grad_step, hp) -> gamma` at that update.
    """

    epsilon: Callable
    learning_rate: Callable
    gamma: Callable
    collect_epsilon: Callable
    collect_gamma: Callable
    update_gamma: Callable


def linear(start, end, steps, t):
    """`start` to `end` linearly over `steps`, then `end` (as `optax.linear_schedule`)."""
    frac = jnp.clip(t / jnp.maximum(steps, 1.0), 0.0, 1.0)
    return (start - end) * (1.0 - frac) + end


def cosine_restarts(peak, floor_fraction, period, t):
    """Cosine annealing from `peak` to `floor_fraction * peak` over each `period` steps,
    restarting at `peak` (as `optax.sgdr_schedule` with equal periods and `alpha` =
    `floor_fraction`)."""
    period = jnp.maximum(period, 1.0)
    phase = jnp.mod(t, period) / period
    cosine = 0.5 * (1.0 + jnp.cos(jnp.pi * phase))
    return peak * ((1.0 - floor_fraction) * cosine + floor_fraction)


def factor_decay(start, factor, every, floor, t):
    """`start * factor ** floor(t / every)`, never below `floor` (as optax's staircase
    `exponential_decay` with `end_value`)."""
    decays = jnp.floor(t / jnp.maximum(every, 1.0))
    return jnp.maximum(start * jnp.power(factor, decays), floor)


def phase_value(values, until, fraction):
    """The value of the phase that holds at `fraction`: `values[i]` for the first `i` with
    `fraction < until[i]` (the last phase if none)."""
    index = jnp.sum((fraction >= until).astype(jnp.int32))
    return values[jnp.minimum(index, values.shape[-1] - 1)]


def _pick(kind, formulas: dict[int, Callable[[], object]], present: tuple[int, ...]):
    """The formula of `kind` among those `present` (only those are traced)."""
    if len(present) == 1:
        return formulas[present[0]]()
    values = {k: formulas[k]() for k in present}
    first = values[present[0]]
    return jnp.select([kind == k for k in present[1:]], [values[k] for k in present[1:]], first)


def make_schedules(config: TrainConfig, kinds: Kinds | None = None) -> Schedules:
    """Build the run's schedules (`ScheduleConfig`); the numbers come from an `HParams`.

    `kinds`: the schedule kinds the seeds' `HParams` may hold (`hparams.kinds_of`, a sweep's);
    default: the config's own. Only those formulas are traced."""
    defaults = hparams_of(config)
    kinds = kinds or kinds_of(defaults)
    total_env = float(config.total_env_steps)
    total_updates = float(config.total_updates)
    if config.schedule.horizon is not None:  # the fractions are of another budget
        total_env, total_updates = schedule_horizon(config)
    num_envs = config.env.num_envs
    f32 = jnp.float32

    def _hp(hp: HParams | None) -> HParams:
        return defaults if hp is None else hp

    def epsilon(env_step, hp=None):
        hp, t = _hp(hp), jnp.asarray(env_step, f32)
        formulas = {
            0: lambda: linear(hp.epsilon_start, hp.epsilon_end, hp.epsilon_fraction * total_env, t),
            1: lambda: factor_decay(
                hp.epsilon_start, hp.epsilon_factor, hp.epsilon_every, hp.epsilon_end, t
            ),
        }
        return jnp.asarray(_pick(hp.epsilon_kind, formulas, kinds.epsilon), f32)

    def learning_rate(grad_step, hp=None):
        hp, t = _hp(hp), jnp.asarray(grad_step, f32)
        lr = jnp.asarray(hp.learning_rate, f32)
        formulas = {
            0: lambda: lr,
            1: lambda: linear(lr, lr * hp.lr_end_fraction, total_updates, t),
            2: lambda: cosine_restarts(
                lr, hp.lr_end_fraction, hp.lr_period_fraction * total_updates, t
            ),
        }
        return jnp.asarray(_pick(hp.lr_kind, formulas, kinds.lr), f32)

    def gamma(fraction, hp=None):
        hp = _hp(hp)
        values, until = jnp.asarray(hp.gamma_values, f32), jnp.asarray(hp.gamma_until, f32)
        if not kinds.gamma_phases:  # every seed's gamma is constant
            return values[..., 0]
        return phase_value(values, until, jnp.asarray(fraction, f32))

    def collect_epsilon(collect_index, hp=None):
        # env steps as float32: an int32 product would overflow past 2^31 env steps.
        return epsilon(jnp.asarray(collect_index).astype(f32) * num_envs, hp)

    def collect_gamma(collect_index, hp=None):
        env_steps = jnp.asarray(collect_index).astype(f32) * num_envs
        return gamma(env_steps / total_env, hp)

    def update_gamma(grad_step, hp=None):
        return gamma(jnp.asarray(grad_step).astype(f32) / max(total_updates, 1.0), hp)

    return Schedules(
        epsilon=epsilon,
        learning_rate=learning_rate,
        gamma=gamma,
        collect_epsilon=collect_epsilon,
        collect_gamma=collect_gamma,
        update_gamma=update_gamma,
    )


def schedule_horizon(config: TrainConfig) -> tuple[float, float]:
    """`(env steps, updates)` per seed that the schedules' fractions are of: the run's own, or
    `ScheduleConfig.horizon` env steps and the updates the run's rate makes of them."""
    total = float(config.total_env_steps)
    horizon = float(config.schedule.horizon or config.total_env_steps)
    return horizon, float(config.total_updates) * horizon / total


# The prefill may take at most this share of the budget before `budget_warnings` speaks up.
MAX_PREFILL_SHARE = 0.5


def budget_warnings(config: TrainConfig) -> list[str]:
    """What a budget change (a shrunk preset, say) did to the schedules: the lines to warn
    with, each naming the fields and a fix; [] when nothing is off.

    * Epsilon's decay ends inside the prefill (`learning_starts`), whose actions are uniform
      anyway: training starts at the final epsilon.
    * The prefill takes more than `MAX_PREFILL_SHARE` of `total_env_steps`.
    * Dense layers that explore by their noise (noisy nets) with epsilon-greedy on top.

      >>> from jaxrl_fast import presets
      >>> budget_warnings(presets.get("minatar-breakout").replace(total_env_steps=30_000))[0][:61]
      'ScheduleConfig.epsilon_fraction=0.2 ends the decay of epsilon'
    """
    import math

    s, total, prefill = config.schedule, config.total_env_steps, config.learning_starts
    horizon = s.horizon or total
    out = []
    if s.epsilon_schedule == "linear":
        ends = s.epsilon_fraction * horizon
        what = f"ScheduleConfig.epsilon_fraction={s.epsilon_fraction:g}"
    elif s.epsilon_factor < 1 and s.epsilon_end > 0 and s.epsilon_start > s.epsilon_end:
        decays = math.ceil(math.log(s.epsilon_end / s.epsilon_start) / math.log(s.epsilon_factor))
        ends = decays * s.epsilon_every
        what = f"the factor schedule (epsilon_every={s.epsilon_every:,})"
    else:
        ends = None
    if ends is not None and s.epsilon_start > s.epsilon_end and ends <= prefill:
        need = prefill / s.epsilon_fraction if s.epsilon_schedule == "linear" else None
        fix = (
            f"total_env_steps >= {math.ceil(2 * need):,} (the decay then ends at twice the "
            "prefill), a larger epsilon_fraction"
            if need is not None
            else "a smaller epsilon_every"
        )
        out.append(
            f"{what} ends the decay of epsilon at env step {ends:,.0f}, inside the prefill "
            f"(learning_starts={prefill:,}) of total_env_steps={total:,}: training starts at "
            f"epsilon_end={s.epsilon_end:g}. Fix: {fix}, or a smaller learning_starts."
        )
    layer = DENSE_LAYERS.find(config.network.dense)
    if getattr(layer, "explores", False) and max(s.epsilon_start, s.epsilon_end) > 0:
        out.append(
            f"NetworkConfig.dense={config.network.dense!r} explores by its noise, and epsilon-"
            f"greedy explores on top (epsilon_start={s.epsilon_start:g}, epsilon_end="
            f"{s.epsilon_end:g}). Fix: ScheduleConfig(epsilon_start=0.0, epsilon_end=0.0), as the "
            f"noisy presets set."
        )
    if prefill > MAX_PREFILL_SHARE * total:
        out.append(
            f"learning_starts={prefill:,} is {prefill / total:.0%} of total_env_steps={total:,}: "
            f"most of the budget fills the replay with random actions. Fix: total_env_steps >= "
            f"{math.ceil(prefill / MAX_PREFILL_SHARE):,}, or a smaller learning_starts."
        )
    return out
