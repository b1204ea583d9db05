"""Measure (c) of `xla_report`: XLA's flops and bytes (`Compiled.cost_analysis()`, loop bodies
once) with each loop body counted its trip count times, and `Compiled.memory_analysis()`."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Sequence

import jax
from jax.extend import core as jcore

from jaxrl_fast.xla_report.jaxprs import Walker, closed_jaxpr, sub_jaxprs

_COST_KEYS = ("flops", "bytes accessed", "transcendentals")


def xla_cost(compiled: Any) -> dict[str, float]:
    """flops, bytes accessed and transcendentals of `Compiled.cost_analysis()` (loop bodies
    once)."""
    ca = compiled.cost_analysis()
    ca = ca[0] if isinstance(ca, (list, tuple)) else (ca or {})
    return {k: float(ca.get(k, 0.0)) for k in _COST_KEYS}


def _compile_jaxpr(closed: Any) -> Any:
    """A loop body compiled alone, its inputs donated: updated in place, as the loop's carry is
    (without donation a body's bytes count a copy of every carried buffer)."""
    args = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    fn = jax.jit(jcore.jaxpr_as_fun(closed), donate_argnums=tuple(range(len(args))))
    with warnings.catch_warnings():  # inputs no output can reuse (consts) are not aliased
        warnings.filterwarnings("ignore", "Some donated buffers were not usable")
        return fn.lower(*args).compile()


def _loops(jaxpr: Any) -> list[Any]:
    """The loop equations of `jaxpr` not inside another of its loops (through conds and calls)."""
    out = []
    for eqn in closed_jaxpr(jaxpr).eqns:
        if eqn.primitive.name in ("while", "scan"):
            out.append(eqn)
        else:
            for sub in sub_jaxprs(eqn):
                out += _loops(sub)
    return out


def trip_cost(
    closed: Any,
    cost: dict[str, float],
    sources: Sequence[tuple[int, int, str]] = (),
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """`cost` (XLA's, loop bodies once) with each loop body counted `trips` times.

    Each loop's body is compiled alone: its cost `once` counts its own loops once, `per_iteration`
    sizes them the same way, and the program's total is `cost + trips x per_iteration - once`
    over its outermost loops.

    Args:
      closed: the program's jaxpr (`jax.make_jaxpr(f)(*args)`).
      cost: its `xla_cost` (of `jax.jit(f).lower(*args).compile()`).
      sources: `(depth, trips, source)` naming the program's loops (`jaxprs.Walker`); a while
        loop counts once.

    Returns:
      The total per call, and per loop: kind, depth, trips and their source, `once`,
      `per_iteration`, and its inner loops alike.
    """
    return _trip_cost(closed, cost, Walker(sources), 0)


def _trip_cost(closed, cost, walker, depth):
    total, rows = dict(cost), []
    for eqn in _loops(closed.jaxpr):
        body = eqn.params["body_jaxpr" if eqn.primitive.name == "while" else "jaxpr"]
        trips, source = walker.trips(eqn, depth)
        once = xla_cost(_compile_jaxpr(body))
        per_iter, inner = _trip_cost(body, once, walker, depth + 1)
        for k in _COST_KEYS:
            total[k] += trips * per_iter[k] - once[k]
        rows.append(
            {
                "kind": eqn.primitive.name,
                "depth": depth,
                "trips": trips,
                "source": source,
                "once": once,
                "per_iteration": per_iter,
                "inner": inner,
            }
        )
    return total, rows


@dataclasses.dataclass(frozen=True)
class Cost:
    """(c) for one program."""

    xla: dict[str, float]  # cost_analysis(): every loop body counted once
    with_trips: dict[str, float]  # loop bodies times their trip counts, per call
    loops: list[dict[str, Any]]
    memory: dict[str, int]  # memory_analysis() fields, bytes
    peak_bytes: int  # XLA's peak_memory (else arguments + outputs - aliased + temporaries)


def compiled_memory(compiled: Any) -> tuple[dict[str, int], int]:
    """`memory_analysis()`'s sizes (bytes, `*_in_bytes` without the suffix) and the peak: XLA's
    `peak_memory` where it reports one, else arguments + outputs - aliased + temporaries."""
    m = compiled.memory_analysis()
    mem = {
        f.removesuffix("_in_bytes"): int(getattr(m, f)) for f in dir(m) if f.endswith("_in_bytes")
    }
    if mem.get("peak_memory"):
        return mem, mem["peak_memory"]
    peak = mem.get("argument_size", 0) + mem.get("output_size", 0) - mem.get("alias_size", 0)
    return mem, peak + mem.get("temp_size", 0)
