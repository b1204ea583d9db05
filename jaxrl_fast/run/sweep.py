"""Hyperparameter sweeps compiled once: `train(config, sweep={...}, seeds_per_point=K)`.

A sweep varies fields that change no shape and no code path (`hparams.SWEEPABLE`). Each point
of the sweep gets `K` seeds, and all points' seeds run as the seed axis of ONE program: their
`HParams` are data in the carry (`AgentState.hparams`), so the loop compiles once whatever the
values. Seed `k` of every point starts from the same key (that of seed `k` of a plain run of
`K` seeds): points differ only by their values, which makes them a paired comparison.

Spec: a dict from dotted field names to lists of values, crossed as a grid; a key that is a
tuple of names takes a list of tuples, zipped (one axis of the grid):

    {"dqn.learning_rate": [1e-4, 3e-4, 1e-3], "dqn.gamma": [0.95, 0.99]}      # 3 x 2 points
    {("dqn.learning_rate", "dqn.gamma"): [(1e-4, 0.9), (3e-4, 0.99)]}          # 2 points

Every point is a validated config (a bad value fails before anything compiles, naming the
field); `SweepResult.points` gives each point's values, per-seed final returns, mean and a 95%
confidence interval (Student's t over its seeds).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
from typing import Any, Mapping, Sequence

import numpy as np

from jaxrl_fast.config import TrainConfig, options
from jaxrl_fast.config.hparams import HParams, check_sweepable, hparams_of, stack
from jaxrl_fast.run.metrics import write_atomic as _atomic_write

# two-sided 95% Student t quantiles by degrees of freedom (1 .. 30); 1.96 beyond
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
MAX_POINTS = 4096


@dataclasses.dataclass(frozen=True)
class SweepPlan:
    """A sweep laid out as seeds: seed `j` is point `j // K`, the point's seed `j % K`.

    Attributes:
      base: the config the sweep varies (its `num_seeds` is ignored).
      axes: the grid's axes, each a swept name or a zipped group of names.
      fields: the swept dotted names, in spec order.
      points: each point's values, `{name: value}`.
      seeds_per_point: `K`.
      config: `base` with `num_seeds = len(points) * K` (what is compiled).
      hparams: `HParams` with leaves `[len(points) * K, ...]`, numpy.
      key_index: `[len(points) * K]` int32, the plain-run seed whose key each seed uses.
    """

    base: TrainConfig
    axes: tuple[tuple[str, ...], ...]
    points: tuple[dict[str, Any], ...]
    seeds_per_point: int
    config: TrainConfig
    hparams: HParams
    key_index: np.ndarray

    @property
    def fields(self) -> tuple[str, ...]:
        """The swept dotted names, in spec order."""
        return tuple(n for names in self.axes for n in names)

    def to_dict(self) -> dict:
        """JSON-ready: fields, points and seeds per point."""
        return {
            "axes": [list(a) for a in self.axes],
            "fields": list(self.fields),
            "points": [dict(p) for p in self.points],
            "seeds_per_point": self.seeds_per_point,
        }


def _axes(spec: Mapping[Any, Sequence[Any]]) -> list[tuple[tuple[str, ...], list[tuple]]]:
    """The spec as grid axes: `(names, [values tuple per step])`, names canonical."""
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError(
            f"sweep={spec!r}: expected a non-empty dict of dotted field names to lists of "
            'values, e.g. {"dqn.learning_rate": [1e-4, 3e-4]}'
        )
    axes, seen = [], set()
    for key, values in spec.items():
        names = (key,) if isinstance(key, str) else tuple(key)
        if not names or not all(isinstance(n, str) for n in names):
            raise ValueError(f"sweep key {key!r}: expected a dotted field name or a tuple of them")
        names = tuple(options.field(n).name for n in names)  # unknown names: did-you-mean
        for name in names:
            check_sweepable(name)
            if name in seen:
                raise ValueError(f"sweep: {name!r} appears twice; give each field once")
            seen.add(name)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(
                f"sweep[{key!r}]={values!r}: expected a non-empty list of values"
                + (" (tuples, one value per name)" if len(names) > 1 else "")
            )
        steps = []
        for v in values:
            step = (v,) if len(names) == 1 else tuple(v) if isinstance(v, (tuple, list)) else None
            if step is None or len(step) != len(names):
                raise ValueError(
                    f"sweep[{key!r}]: value {v!r} is not a tuple of {len(names)} values "
                    f"(one per name: zipped fields)"
                )
            steps.append(step)
        axes.append((names, steps))
    return axes


def plan(
    config: TrainConfig, spec: Mapping[Any, Sequence[Any]], seeds_per_point: int = 1
) -> SweepPlan:
    """Lay a sweep out as seeds, validating every point's config.

    Raises:
      ValueError: an unknown or unsweepable field, a malformed spec, a value the config
        refuses (the message names the point), or `seeds_per_point` not a positive int (and
        a multiple of the env variants, if any).
    """
    if isinstance(seeds_per_point, bool) or not isinstance(seeds_per_point, int):
        raise ValueError(f"seeds_per_point={seeds_per_point!r}: expected a positive int")
    if seeds_per_point < 1:
        raise ValueError(f"seeds_per_point={seeds_per_point}: expected a positive int")
    variants = config.env.num_variants
    if seeds_per_point % variants:
        raise ValueError(
            f"seeds_per_point={seeds_per_point} with {variants} EnvConfig.variants: expected "
            f"a multiple of {variants}, so that each point trains on every variant alike."
        )
    axes = _axes(spec)
    count = math.prod(len(steps) for _, steps in axes)
    if count > MAX_POINTS:
        raise ValueError(f"sweep: {count} points; at most {MAX_POINTS} in one program")
    points, per_point = [], []
    for combo in itertools.product(*(steps for _, steps in axes)):
        point = {
            n: v
            for (names, _), step in zip(axes, combo, strict=True)
            for n, v in zip(names, step, strict=True)
        }
        try:
            cfg = options.apply(config, point)
        except ValueError as err:
            raise ValueError(f"sweep point {point}: {err}") from None
        points.append(point)
        per_point.append(hparams_of(cfg))
    k = seeds_per_point
    total = len(points) * k
    compiled = config.replace(num_seeds=total)
    hparams = stack([hp for hp in per_point for _ in range(k)])
    key_index = np.tile(np.arange(k, dtype=np.int32), len(points))
    names = tuple(names for names, _ in axes)
    return SweepPlan(config, names, tuple(points), k, compiled, hparams, key_index)


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One point's outcome.

    Attributes:
      values: `{dotted field: value}` of the point.
      seed_indices: the run's seeds that trained it.
      final_returns: each seed's final evaluation return.
      mean: their mean (None if no seed was evaluated).
      ci95: `(low, high)`: the mean's 95% confidence interval (Student's t over the seeds;
        None with fewer than 2 finite returns).
    """

    values: dict[str, Any]
    seed_indices: list[int]
    final_returns: list[float | None]
    mean: float | None
    ci95: tuple[float, float] | None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# Below this many seeds per point, the table marks a point's confidence interval.
MIN_CI_SEEDS = 3


def confidence_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% confidence interval of the mean of `values` (Student's t); None for < 2.

    >>> confidence_interval([1.0, 3.0])
    (-10.706, 14.706)
    """
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], np.float64)
    if x.size < 2:
        return None
    t = _T95[x.size - 2] if x.size - 1 <= len(_T95) else 1.96
    half = t * x.std(ddof=1) / math.sqrt(x.size)
    return (round(float(x.mean() - half), 6), round(float(x.mean() + half), 6))


def _num(x: Any) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


@dataclasses.dataclass
class SweepResult:
    """What `train(config, sweep=...)` returns.

    Attributes:
      plan: the `SweepPlan` (fields, points, seeds per point, the compiled config).
      points: one `SweepPoint` per point, in grid order.
      result: the underlying `TrainResult` of all `len(points) x K` seeds (timings, history,
        the final runner with every seed's parameters).
    """

    plan: SweepPlan
    points: list[SweepPoint]
    result: Any

    @classmethod
    def from_result(cls, plan: SweepPlan, result: Any) -> SweepResult:
        k, finals = plan.seeds_per_point, np.asarray(result.final_return, np.float64)
        points = []
        for p, values in enumerate(plan.points):
            seeds = list(range(p * k, (p + 1) * k))
            returns = [_num(finals[s]) for s in seeds]
            finite = [r for r in returns if r is not None]
            mean = float(np.mean(finite)) if finite else None
            points.append(
                SweepPoint(dict(values), seeds, returns, mean, confidence_interval(finite))
            )
        return cls(plan, points, result)

    def best(self) -> SweepPoint:
        """The point with the highest mean final return."""
        scored = [p for p in self.points if p.mean is not None]
        if not scored:
            raise ValueError("SweepResult.best: no point has a final return (eval_episodes=0?)")
        return max(scored, key=lambda p: p.mean)

    def summary(self) -> dict:
        """JSON-ready: the plan, every point, and the run's timings."""
        r = self.result
        return {
            "env": self.plan.base.env.name,
            **self.plan.to_dict(),
            "results": [p.to_dict() for p in self.points],
            "compile_time_s": r.compile_time_s,
            "run_time_s": r.run_time_s,
            "wall_time_s": r.wall_time_s,
            "env_steps_per_seed": r.env_steps,
            "config": self.plan.base.to_dict(),
        }

    def table(self) -> str:
        """A Markdown table: one row per point (values, mean, 95% CI, per-seed returns)."""
        head = [*self.plan.fields, "mean final return", "95% CI", "per seed"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        few = False
        for p in self.points:
            ci = "-" if p.ci95 is None else f"{p.ci95[0]:.1f} .. {p.ci95[1]:.1f}"
            n = sum(r is not None for r in p.final_returns)
            if p.ci95 is not None and n < MIN_CI_SEEDS:
                ci, few = f"{ci} (n={n})*", True
            mean = "-" if p.mean is None else f"{p.mean:.1f}"
            seeds = ", ".join("-" if r is None else f"{r:.1f}" for r in p.final_returns)
            vals = [_fmt(p.values[f]) for f in self.plan.fields]
            lines.append("| " + " | ".join([*vals, mean, ci, seeds]) + " |")
        if few:
            lines += [
                "",
                f"\\* fewer than {MIN_CI_SEEDS} seeds: a t-interval over so few returns is very "
                f"wide and says little; use seeds_per_point >= {MIN_CI_SEEDS} to compare points.",
            ]
        return "\n".join(lines)

    def write(self, directory: str | os.PathLike) -> list[str]:
        """Write sweep.json, sweep.md and (with matplotlib) sweep.png into `directory`;
        return the paths written."""
        os.makedirs(directory, exist_ok=True)
        paths = [os.path.join(directory, n) for n in ("sweep.json", "sweep.md")]
        _atomic_write(paths[0], json.dumps(self.summary(), indent=2, default=_json_default))
        _atomic_write(paths[1], self.table() + "\n")
        try:
            from jaxrl_fast.run.plot import plot_sweep
        except ImportError:  # pragma: no cover - plot is part of the package
            return paths
        png = os.path.join(directory, "sweep.png")
        if plot_sweep(self.summary(), png) is not None:
            paths.append(png)
        return paths


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON: {type(x).__name__}")
