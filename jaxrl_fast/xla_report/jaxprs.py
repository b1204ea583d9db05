"""Measure (a) of `xla_report`: jaxpr equations through every sub-jaxpr, as traced, after JAX's
dead-code elimination, and reaching no output by a while-aware liveness pass; loop bodies weighted
by their trip counts (`Walker`, shared with `xla_report.cost`)."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Sequence

from jax.extend import core as jcore

_CALLS = ("jaxpr", "call_jaxpr")  # params of call-like equations (jit, custom_jvp/vjp, remat)


def closed_jaxpr(j: Any) -> jcore.Jaxpr:
    return j.jaxpr if isinstance(j, jcore.ClosedJaxpr) else j


def sub_jaxprs(eqn: Any) -> list:
    return [closed_jaxpr(j) for j in jcore.jaxprs_in_params(eqn.params)]


def _call_body(eqn: Any) -> Any:
    """The one sub-jaxpr of a call-like equation whose inputs and outputs are the equation's."""
    for name in _CALLS:
        j = eqn.params.get(name)
        if isinstance(j, (jcore.ClosedJaxpr, jcore.Jaxpr)):
            j = closed_jaxpr(j)
            if len(j.invars) == len(eqn.invars) and len(j.outvars) == len(eqn.outvars):
                return j
    return None


def count_eqns(jaxpr: Any) -> collections.Counter:
    """Equations of `jaxpr` and of all its sub-jaxprs, by primitive name (each counted once)."""
    out: collections.Counter = collections.Counter()
    for eqn in closed_jaxpr(jaxpr).eqns:
        out[eqn.primitive.name] += 1
        for sub in sub_jaxprs(eqn):
            out += count_eqns(sub)
    return out


@dataclasses.dataclass(frozen=True)
class Loop:
    """One loop of a program: its kind, nesting, trip count and where that count comes from."""

    kind: str  # "while" or "scan"
    depth: int  # loops around it
    trips: int
    source: str
    body_eqns: int  # equations in its body (through sub-jaxprs), once


class Walker:
    """Walks a jaxpr with loop multiplicities. A scan carries its own length; `sources` name
    them: `(depth, trips, source)` for the loops of the program (the fused loop: the prefill and
    the blocks at depth 0, a block's collect and learn loops at depth 1), matched in order to
    the scans of that depth and length. A while loop (no trip count in the jaxpr) counts once,
    and says so."""

    def __init__(self, sources: Sequence[tuple[int, int, str]] = ()):
        self.sources = list(sources)
        self.loops: list[Loop] = []

    def trips(self, eqn: Any, depth: int, top: bool = True) -> tuple[int, str]:
        """A loop's trip count and its source."""
        if eqn.primitive.name == "scan":
            n = int(eqn.params["length"])
            for i, (d, trips, source) in enumerate(self.sources):
                if (d, trips) == (depth, n):
                    del self.sources[i]
                    return n, f"scan length in the jaxpr = {source}"
            return n, "scan length in the jaxpr"
        return 1, "unknown (a while loop the report cannot size): counted once"

    def weighted(self, jaxpr: Any, depth: int = 0) -> float:
        """Equations run per call; a cond counts its largest branch (as XLA's cost does).
        Records each loop in `self.loops`."""
        total, eqns = 0.0, closed_jaxpr(jaxpr).eqns
        for eqn in eqns:
            total += 1
            name = eqn.primitive.name
            if name in ("while", "scan"):
                trips, source = self.trips(eqn, depth)
                body = eqn.params["body_jaxpr" if name == "while" else "jaxpr"]
                self.loops.append(Loop(name, depth, trips, source, sum(count_eqns(body).values())))
                inner = self.weighted(body, depth + 1)
                if name == "while":
                    inner += sum(count_eqns(eqn.params["cond_jaxpr"]).values())
                total += trips * inner
            elif name == "cond":
                total += max(self.weighted(b, depth) for b in eqn.params["branches"])
            else:
                total += sum(self.weighted(s, depth) for s in sub_jaxprs(eqn))
        return total


def _live(jaxpr: Any, used_outputs: Sequence[bool], dead: collections.Counter) -> list[bool]:
    """Liveness through every sub-jaxpr, while loops included (JAX's DCE stops at them).

    Adds the equations whose results reach no used output (and have no effects) to `dead`, by
    primitive; returns which inputs are used.
    """
    from jax._src.interpreters import partial_eval as pe

    jaxpr = closed_jaxpr(jaxpr)
    live = {v for v, u in zip(jaxpr.outvars, used_outputs, strict=True) if u and _is_var(v)}
    for eqn in reversed(jaxpr.eqns):
        used = [_is_var(v) and v in live for v in eqn.outvars]
        if not any(used) and not pe.has_effects(eqn):
            dead[eqn.primitive.name] += 1
            for sub in sub_jaxprs(eqn):
                dead.update(count_eqns(sub))
            continue
        for v, u in zip(eqn.invars, _eqn_inputs(eqn, used, dead), strict=True):
            if u and _is_var(v):
                live.add(v)
    return [_is_var(v) and v in live for v in jaxpr.invars]


def _is_var(v: Any) -> bool:
    return isinstance(v, jcore.Var) and not isinstance(v, jcore.DropVar)


def _eqn_inputs(eqn: Any, used: list[bool], dead: collections.Counter) -> list[bool]:
    name, p, n_in = eqn.primitive.name, eqn.params, len(eqn.invars)
    if name == "while":
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cond_in = _live(p["cond_jaxpr"], [True], dead)
        carry = [u or c for u, c in zip(used, cond_in[cn:], strict=True)]
        body_in = _fixpoint(p["body_jaxpr"], carry, bn, dead)
        carry = [u or b for u, b in zip(carry, body_in[bn:], strict=True)]
        return cond_in[:cn] + body_in[:bn] + carry
    if name == "scan":
        nc, ncar = p["num_consts"], p["num_carry"]
        body_in = _fixpoint(p["jaxpr"], used[:ncar], nc, dead, used[ncar:])
        carry = [u or b for u, b in zip(used[:ncar], body_in[nc : nc + ncar], strict=True)]
        return body_in[:nc] + carry + body_in[nc + ncar :]
    if name == "cond":
        ins = [False] * (n_in - 1)
        for branch in p["branches"]:
            ins = [a or b for a, b in zip(ins, _live(branch, used, dead), strict=True)]
        return [True, *ins]
    body = _call_body(eqn)
    if body is not None:
        return _live(body, used, dead)
    return [True] * n_in  # a primitive, or a higher-order one this pass does not enter


def _fixpoint(body, carry, n_consts, dead, ys_used=()) -> list[bool]:
    """A loop body's used inputs once the used carry stops growing (dead recorded once)."""
    while True:
        ins = _live(body, list(carry) + list(ys_used), collections.Counter())
        grown = [c or i for c, i in zip(carry, ins[n_consts : n_consts + len(carry)], strict=True)]
        if grown == list(carry):
            return _live(body, list(carry) + list(ys_used), dead)
        carry = grown


@dataclasses.dataclass(frozen=True)
class JaxprCounts:
    """(a) for one program: equations through every sub-jaxpr."""

    traced: int
    after_jax_dce: int
    reaching_no_output: int  # the while-aware liveness pass: dead even where JAX's DCE stops
    no_output_share: float  # reaching_no_output / traced
    per_call: float  # equations run per call, loop bodies times their trip counts
    top_level: int
    removed_by_jax_dce: dict[str, int]  # by primitive, top 10
    no_output_by_primitive: dict[str, int]  # by primitive, top 10
    loops: list[Loop]


def jaxpr_counts(closed: Any, sources: Sequence[tuple[int, int, str]] = ()):
    """Measure (a) on a traced program (`jax.make_jaxpr(f)(*args)`); `sources` name its loops
    (`Walker`)."""
    from jax._src.interpreters import partial_eval as pe

    jaxpr = closed.jaxpr
    before = count_eqns(jaxpr)
    dced, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    after = count_eqns(dced)
    dead: collections.Counter = collections.Counter()
    _live(jaxpr, [True] * len(jaxpr.outvars), dead)
    walker = Walker(sources)
    per_call = walker.weighted(jaxpr)
    return JaxprCounts(
        traced=sum(before.values()),
        after_jax_dce=sum(after.values()),
        reaching_no_output=sum(dead.values()),
        no_output_share=sum(dead.values()) / max(1, sum(before.values())),
        per_call=per_call,
        top_level=len(jaxpr.eqns),
        removed_by_jax_dce=dict((before - after).most_common(10)),
        no_output_by_primitive=dict(dead.most_common(10)),
        loops=walker.loops,
    )
