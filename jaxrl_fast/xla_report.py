"""What JAX and XLA did to the fused loop: `report(config) -> XlaReport`, `jaxrl-fast xla-report`.

Four measures of the compiled `init` and `run_chunk` programs (`loop.make_train`), kept apart and
never folded into one number, plus the conventional loop's extra work:

(a) jaxpr equations, counted through every sub-jaxpr (scan / while / cond bodies, jit and
    custom_jvp / custom_vjp calls), as traced and after JAX's own dead-code elimination
    (`partial_eval.dce_jaxpr`, the pass `jit` runs before lowering). JAX has no DCE rule for
    `while` (the loop's `fori_loop`s with traced bounds), so it leaves everything inside the
    loops; a while-aware liveness pass here counts the equations that reach no output (by
    primitive). Loop bodies are also counted with their multiplicity per chunk.
(b) HLO instructions of the lowered (pre-optimisation) and the optimised module, its fusions (each
    one kernel), the instructions that run as their own thunk on CPU (an estimate from the text),
    while loops and conditionals; at the default and at the lowest optimisation settings.
(c) flops and bytes from `Compiled.cost_analysis()`, which counts a while body once whatever its
    trip count (and a conditional as its costliest branch), multiplied here by the loops' trip
    counts; and `Compiled.memory_analysis()`.
(d) time per iteration (one training block): op by op (`jax.disable_jit`), jitted at the lowest
    settings, jitted at the default; compile times apart.
(e) per env step, the dispatches, host syncs and host<->device bytes of `baseline.train_unfused`
    against the fused loop's, from the config (the counterpart of "37% of nodes unused").

Optimisation levels. `xla_backend_optimization_level` (0-3, default 2 on CPU) is LLVM's
optimisation level for the code XLA emits; `xla_llvm_disable_expensive_passes` skips LLVM's costly
passes (both are what `jax_disable_most_optimizations` sets). Neither touches the HLO pipeline:
simplification, CSE, DCE, while-loop simplification and invariant code motion, fusion, layout and
buffer assignment all still run, so the optimised HLO (its fusions, the dead code it removed) is
unchanged; the report checks this by comparing the two builds' fusion counts. The effort levels
(`optimization_level`, `exec_time_optimization_effort`) are build options that XLA:GPU reads
(collective pipelining, loop double buffering, the latency-hiding scheduler); they are set too.
Only `xla_disable_hlo_passes` could turn fusion or DCE off; the report does not.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import re
import time
import warnings
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.extend import core as jcore

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.resolve import ResolvedRun, resolve

# The lowest settings `.compile(compiler_options=...)` accepts (jax 0.10): LLVM at -O0 without
# its expensive passes, and the lowest effort levels (EffortLevel.O0 is 9 in XLA's enum).
LOWEST_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "optimization_level": 9,
    "exec_time_optimization_effort": -1.0,
}
APIS = {
    "jaxpr": "jax.make_jaxpr; sub-jaxprs via jax.extend.core.jaxprs_in_params",
    "dce": "jax._src.interpreters.partial_eval.dce_jaxpr (private: JAX has no public DCE; "
    "pxla._dce_jaxpr runs it at lowering with every output used)",
    "hlo": "Lowered.as_text(dialect='hlo'), Compiled.as_text()",
    "cost": "Compiled.cost_analysis(), Compiled.memory_analysis(); loop bodies compiled alone "
    "through jax.extend.core.jaxpr_as_fun for their per-iteration cost",
    "levels": "Lowered.compile(compiler_options=LOWEST_OPTIONS)",
    "op_by_op": "jax.disable_jit()",
}
_COST_KEYS = ("flops", "bytes accessed", "transcendentals")
_CALLS = ("jaxpr", "call_jaxpr")  # params of call-like equations (jit, custom_jvp/vjp, remat)


# -- (a) jaxpr equations ------------------------------------------------------------------------


def _closed(j: Any) -> jcore.Jaxpr:
    return j.jaxpr if isinstance(j, jcore.ClosedJaxpr) else j


def _subs(eqn: Any) -> list:
    return [_closed(j) for j in jcore.jaxprs_in_params(eqn.params)]


def _call_body(eqn: Any) -> Any:
    """The one sub-jaxpr of a call-like equation whose inputs and outputs are the equation's."""
    for name in _CALLS:
        j = eqn.params.get(name)
        if isinstance(j, (jcore.ClosedJaxpr, jcore.Jaxpr)):
            j = _closed(j)
            if len(j.invars) == len(eqn.invars) and len(j.outvars) == len(eqn.outvars):
                return j
    return None


def count_eqns(jaxpr: Any) -> collections.Counter:
    """Equations of `jaxpr` and of all its sub-jaxprs, by primitive name (each counted once)."""
    out: collections.Counter = collections.Counter()
    for eqn in _closed(jaxpr).eqns:
        out[eqn.primitive.name] += 1
        for sub in _subs(eqn):
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


class _Walker:
    """Walks a jaxpr with loop multiplicities: `while_trips[d]` is the trip count of a while loop
    nested in d others (the fused loop: blocks per chunk, collect steps per block); scans carry
    their own length. Whiles deeper than `while_trips` count once (and say so)."""

    def __init__(self, while_trips: Sequence[tuple[int, str]], upb: int = 0):
        self.while_trips, self.upb = tuple(while_trips), upb
        self.loops: list[Loop] = []

    def trips(self, eqn: Any, depth: int, top: bool) -> tuple[int, str]:
        """A loop's trip count and its source; `top`: the only while at the top level of the
        program or of the enclosing loop's body (not inside a cond or a call)."""
        if eqn.primitive.name == "scan":
            n = int(eqn.params["length"])
            note = " = TrainConfig.updates_per_block" if n == self.upb else ""
            return n, f"scan length in the jaxpr{note}"
        if top and depth < len(self.while_trips):
            return self.while_trips[depth]
        return 1, "unknown (a while loop the report cannot size): counted once"

    def weighted(self, jaxpr: Any, depth: int = 0, top: bool = True) -> float:
        """Equations run per call; a cond counts its largest branch (as XLA's cost does).
        Records each loop in `self.loops`."""
        total, eqns = 0.0, _closed(jaxpr).eqns
        sole = sum(e.primitive.name == "while" for e in eqns) == 1
        for eqn in eqns:
            total += 1
            name = eqn.primitive.name
            if name in ("while", "scan"):
                trips, source = self.trips(eqn, depth, top and sole)
                body = eqn.params["body_jaxpr" if name == "while" else "jaxpr"]
                self.loops.append(Loop(name, depth, trips, source, sum(count_eqns(body).values())))
                inner = self.weighted(body, depth + 1)
                if name == "while":
                    inner += sum(count_eqns(eqn.params["cond_jaxpr"]).values())
                total += trips * inner
            elif name == "cond":
                total += max(self.weighted(b, depth, False) for b in eqn.params["branches"])
            else:
                total += sum(self.weighted(s, depth, False) for s in _subs(eqn))
        return total


def _live(jaxpr: Any, used_outputs: Sequence[bool], dead: collections.Counter) -> list[bool]:
    """Liveness through every sub-jaxpr, while loops included (JAX's DCE stops at them).

    Adds the equations whose results reach no used output (and have no effects) to `dead`, by
    primitive; returns which inputs are used.
    """
    from jax._src.interpreters import partial_eval as pe

    jaxpr = _closed(jaxpr)
    live = {v for v, u in zip(jaxpr.outvars, used_outputs, strict=True) if u and _is_var(v)}
    for eqn in reversed(jaxpr.eqns):
        used = [_is_var(v) and v in live for v in eqn.outvars]
        if not any(used) and not pe.has_effects(eqn):
            dead[eqn.primitive.name] += 1
            for sub in _subs(eqn):
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


def jaxpr_counts(closed: Any, while_trips: Sequence[tuple[int, str]] = (), upb: int = 0):
    """Measure (a) on a traced program (`jax.make_jaxpr(f)(*args)`)."""
    from jax._src.interpreters import partial_eval as pe

    jaxpr = closed.jaxpr
    before = count_eqns(jaxpr)
    dced, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    after = count_eqns(dced)
    dead: collections.Counter = collections.Counter()
    _live(jaxpr, [True] * len(jaxpr.outvars), dead)
    walker = _Walker(while_trips, upb)
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


# -- (b) HLO instructions -----------------------------------------------------------------------

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTR = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-]+\s+=\s+(.*)$")
_NOT_THUNKS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
_SCHEDULED_REFS = re.compile(
    r"(?:body|condition|true_computation|false_computation)=%?([\w.\-]+)"
    r"|branch_computations=\{([^}]*)\}"
)


def _opcode(rhs: str) -> str:
    """The opcode of an instruction's right-hand side `shape opcode(operands), attributes`."""
    if rhs.startswith("("):  # a tuple shape, maybe nested
        depth = 0
        for i, ch in enumerate(rhs):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                rhs = rhs[i + 1 :]
                break
    else:
        rhs = rhs.partition(" ")[2]
    m = re.match(r"\s*([a-z][\w\-]*)\(", rhs)
    return m.group(1) if m else "?"


@dataclasses.dataclass(frozen=True)
class HloCounts:
    """(b) for one HLO module's text."""

    instructions: int  # in every computation (fused ones included)
    scheduled: int  # in the computations that run (entry, loop bodies, branches), not fused
    fusions: int  # fusion instructions that run: each is one kernel
    fusion_kinds: dict[str, int]
    fused_computations: int
    thunks: int  # scheduled instructions other than parameter/constant/tuple/gte/bitcast
    thunks_by_opcode: dict[str, int]  # top 8
    while_loops: int
    known_trip_counts: list[int]  # loops XLA sized itself (on CPU: threefry's rounds)
    conditionals: int


def hlo_counts(text: str) -> HloCounts:
    """Count (b) in HLO text (`Lowered.as_text(dialect="hlo")` or `Compiled.as_text()`).

    >>> text = '''ENTRY %main (x: f32[2]) -> f32[2] {
    ...   %x = f32[2]{0} parameter(0)
    ...   ROOT %f = f32[2]{0} fusion(%x), kind=kLoop, calls=%fused
    ... }
    ... %fused (p: f32[2]) -> f32[2] {
    ...   %p = f32[2]{0} parameter(0)
    ...   ROOT %n = f32[2]{0} negate(%p)
    ... }'''
    >>> c = hlo_counts(text)
    >>> c.instructions, c.fusions, c.fused_computations, c.thunks
    (4, 1, 1, 1)
    """
    comps: dict[str, list[tuple[str, str]]] = {}
    entry, current = None, None
    for line in text.splitlines():
        if current is None:
            m = _HEADER.match(line)
            if m and not line.startswith(("HloModule", " ")):
                current = m.group(2)
                comps[current] = []
                entry = current if m.group(1) else entry
        elif line.startswith("}"):
            current = None
        elif m := _INSTR.match(line):
            comps[current].append((_opcode(m.group(1)), line))
    fused = {
        ref
        for ins in comps.values()
        for op, line in ins
        if op == "fusion"
        for ref in re.findall(r"calls=%?([\w.\-]+)", line)
    }
    scheduled, todo = set(), [entry] if entry else []
    while todo:
        name = todo.pop()
        if name in scheduled or name not in comps:
            continue
        scheduled.add(name)
        for op, line in comps[name]:
            for one, many in _SCHEDULED_REFS.findall(line):
                todo += [one] if one else [r.strip().lstrip("%") for r in many.split(",")]
            if op in ("call", "async-start"):
                todo += re.findall(r"(?:calls|to_apply)=%?([\w.\-]+)", line)
    run = [(op, line) for name in scheduled for op, line in comps[name]]
    thunks = collections.Counter(op for op, _ in run if op not in _NOT_THUNKS)
    return HloCounts(
        instructions=sum(len(v) for v in comps.values()),
        scheduled=len(run),
        fusions=sum(op == "fusion" for op, _ in run),
        fusion_kinds=dict(
            collections.Counter(
                m.group(1)
                for op, line in run
                if op == "fusion"
                if (m := re.search(r"kind=(\w+)", line))
            )
        ),
        fused_computations=len(fused & set(comps)),
        thunks=sum(thunks.values()),
        thunks_by_opcode=dict(thunks.most_common(8)),
        while_loops=sum(op == "while" for op, _ in run),
        known_trip_counts=sorted(
            int(n) for _, line in run for n in re.findall(r'known_trip_count":\{"n":"(\d+)"', line)
        ),
        conditionals=sum(op == "conditional" for op, _ in run),
    )


# -- (c) cost with trip counts ------------------------------------------------------------------


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


def _loops(jaxpr: Any, top: bool = True) -> list[tuple[Any, bool]]:
    """The loop equations of `jaxpr` not inside another of its loops (through conds and calls),
    each with `top`: it is the only while at the top level of `jaxpr`."""
    eqns, out = _closed(jaxpr).eqns, []
    sole = sum(e.primitive.name == "while" for e in eqns) == 1
    for eqn in eqns:
        if eqn.primitive.name in ("while", "scan"):
            out.append((eqn, top and sole))
        else:
            for sub in _subs(eqn):
                out += _loops(sub, top=False)
    return out


def trip_cost(
    closed: Any,
    cost: dict[str, float],
    while_trips: Sequence[tuple[int, str]] = (),
    upb: int = 0,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """`cost` (XLA's, loop bodies once) with each loop body counted `trips` times.

    Each loop's body is compiled alone: its cost `once` counts its own loops once, `per_iteration`
    sizes them the same way, and the program's total is `cost + trips x per_iteration - once`
    over its outermost loops.

    Args:
      closed: the program's jaxpr (`jax.make_jaxpr(f)(*args)`).
      cost: its `xla_cost` (of `jax.jit(f).lower(*args).compile()`).
      while_trips: `(trips, source)` of the while loops by depth: the outermost first; each the
        only while at the top level of the program or the enclosing body. Other whiles count once.
      upb: updates per block, to name the learn scan in the sources.

    Returns:
      The total per call, and per loop: kind, depth, trips and their source, `once`,
      `per_iteration`, and its inner loops alike.
    """
    return _trip_cost(closed, cost, _Walker(while_trips, upb), 0)


def _trip_cost(closed, cost, walker, depth):
    total, rows = dict(cost), []
    for eqn, top in _loops(closed.jaxpr):
        body = eqn.params["body_jaxpr" if eqn.primitive.name == "while" else "jaxpr"]
        trips, source = walker.trips(eqn, depth, top)
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


def _memory(compiled: Any) -> tuple[dict[str, int], int]:
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


# -- (e) the conventional loop's extra work -----------------------------------------------------


def unfused_totals(config: TrainConfig, spec: Any, blocks: int) -> dict[str, int]:
    """The host work `baseline.train_unfused` does in its loop (prefill + `blocks` blocks),
    counted from its code: compiled calls, blocking device->host reads, bytes each way.

    A gymnax env: each collect step calls the compiled `act` and `env.step` (2 dispatches, the
    collect index an int32 sent to the device) and makes one `jax.device_get` of action,
    next_obs, reward, done, terminated, reset and episode_return (a host sync); each update
    sends a host-sampled `Batch` (obs, next_obs, and five 4-byte fields per row) with one
    compiled call; a target update is one more call. An envpool env steps on the host instead:
    `np.asarray(action)` (a sync), the observations sent back with the next `act`.
    """
    e, b = config.env.num_envs, config.replay.batch_size
    obs = int(np.prod(spec.obs_shape)) * np.dtype(spec.obs_dtype).itemsize
    steps = config.prefill_steps + blocks * config.collect_steps_per_block
    updates = blocks * config.updates_per_block
    targets = blocks // config.target_period_blocks
    pool = config.env.is_envpool
    return {
        "collect_steps": steps,
        "updates": updates,
        "target_updates": targets,
        "compiled_calls": steps * (1 if pool else 2) + updates + targets,
        "host_syncs": steps * (2 if pool else 1),
        "device_to_host_bytes": steps * e * (8 if pool else 4 + obs + 4 + 3 + 4),
        "host_to_device_transfers": steps * (2 if pool else 1) + updates,
        "host_to_device_bytes": steps * (4 + (e * obs if pool else 0))
        + updates * b * (2 * obs + 20),
        "host_replay_copy_bytes": steps * e * (2 * obs + 9) + updates * b * (2 * obs + 9),
    }


def _unfused(config: TrainConfig, spec: Any, metrics_bytes: int) -> dict[str, Any]:
    """(e) per env step: the conventional loop (steady state, one block) vs the fused one."""
    period = config.target_period_blocks  # blocks with exactly one target update
    some, none = unfused_totals(config, spec, period), unfused_totals(config, spec, 0)
    per_step = {k: (some[k] - none[k]) / (period * config.train_frequency) for k in some}
    chunk_steps = config.blocks_per_chunk * config.train_frequency
    fused = {
        "compiled_calls": 1 / chunk_steps,  # one run_chunk per chunk
        "host_syncs": 1 / chunk_steps,  # the shell's jax.device_get of ChunkMetrics
        "device_to_host_bytes": metrics_bytes / chunk_steps,
        "host_to_device_transfers": 0.0,
        "host_to_device_bytes": 0.0,
        "host_replay_copy_bytes": 0.0,
    }
    keys = list(fused)
    return {
        "per_env_step": {"unfused": {k: per_step[k] for k in keys}, "fused": fused},
        "ratio_unfused_to_fused": {k: (per_step[k] / fused[k] if fused[k] else None) for k in keys},
        "method": "counted from baseline.py's code and the config (tests/test_xla_report.py "
        "checks the counts against an instrumented train_unfused run); fused: one run_chunk "
        "call and one device_get of ChunkMetrics per chunk of blocks_per_chunk blocks",
    }


# -- the report ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProgramReport:
    """Measures (a)-(c) of one compiled program."""

    jaxpr: JaxprCounts
    hlo_lowered: HloCounts
    hlo_optimised: HloCounts  # default settings
    hlo_optimised_lowest: HloCounts | None  # LOWEST_OPTIONS (run_chunk only)
    cost: Cost


@dataclasses.dataclass(frozen=True)
class XlaReport:
    """What JAX and XLA did to one run's programs; `to_dict()` for JSON, `render()` for text."""

    run: dict[str, Any]
    trips: dict[str, dict[str, Any]]
    programs: dict[str, ProgramReport]
    timing: dict[str, Any]
    unfused: dict[str, Any]
    apis: dict[str, str]
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready data."""
        return _plain(dataclasses.asdict(self))

    def render(self) -> str:
        """Return the report as a plain-text table."""
        return _render(self)


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, (np.integer, np.bool_)):
        return x.item()
    return x


def _divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in range(1, max(1, min(n, cap)) + 1) if n % d == 0)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t


def report(
    config_or_run: TrainConfig | ResolvedRun, *, timing_iterations: int = 2, timing_chunks: int = 2
) -> XlaReport:
    """Compile the fused loop's `init` and `run_chunk`, measure (a)-(e), and time it.

    Args:
      config_or_run: the run (a `TrainConfig`, resolved for the first local device, or a
        `ResolvedRun`).
      timing_iterations: at most this many blocks run op by op (`jax.disable_jit`; slow), after
        one op-by-op block of warm-up (each primitive compiles on first use: seconds).
      timing_chunks: steady-state chunks (`blocks_per_chunk` blocks each) timed per jitted
        build; the fastest is kept.

    Returns:
      An `XlaReport`; trip counts and per-iteration times are those of a steady-state chunk (the
      first chunk also runs the prefill iteration of `prefill_steps` collect steps).

    Raises:
      ValueError: a bad config, or `timing_iterations` / `timing_chunks` below 1.
    """
    from jaxrl_fast import seeds
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.train import init_compiler_options

    if timing_iterations < 1 or timing_chunks < 1:
        raise ValueError(
            f"report(timing_iterations={timing_iterations}, timing_chunks={timing_chunks}) is not "
            "allowed; expected ints >= 1."
        )
    run = config_or_run if isinstance(config_or_run, ResolvedRun) else resolve(config_or_run)
    config, platform = run.config, run.device.platform
    trips = {
        "blocks_per_chunk": {
            "value": config.blocks_per_chunk,
            "source": f"TrainConfig.blocks_per_chunk = num_blocks {config.num_blocks} // chunks "
            f"{config.chunks}: the outer while loop (fori_loop over blocks)",
        },
        "collect_steps_per_block": {
            "value": config.collect_steps_per_block,
            "source": f"TrainConfig.collect_steps_per_block = train_frequency "
            f"{config.train_frequency} // env.num_envs {config.env.num_envs}: the inner while",
        },
        "updates_per_block": {
            "value": config.updates_per_block,
            "source": "TrainConfig.updates_per_block: a scan of that length inside the learn "
            "cond (no loop when 1)",
        },
    }
    while_trips = [(v["value"], v["source"]) for k, v in trips.items() if k != "updates_per_block"]
    keys = seeds.train_keys(config)
    fns = make_train(run)
    eager: list = []  # the op-by-op loops (each holds a replay buffer to close)
    try:
        init_jit = jax.jit(fns.init)
        init_low = init_jit.lower(keys)
        init_c, init_s = _timed(lambda: init_low.compile(init_compiler_options(platform)))
        abstract = init_jit.eval_shape(keys)
        chunk_jaxpr, lower_s = _timed(lambda: jax.make_jaxpr(fns.run_chunk)(abstract))
        chunk_low, lower2_s = _timed(
            lambda: jax.jit(fns.run_chunk, donate_argnums=0).lower(abstract)
        )
        chunk_c, chunk_s = _timed(lambda: chunk_low.compile())
        lowest_c, lowest_s = _timed(lambda: chunk_low.compile(compiler_options=LOWEST_OPTIONS))
        t = time.perf_counter()
        programs = {
            "init": _program(jax.make_jaxpr(fns.init)(keys), init_low, init_c, None, ()),
            "run_chunk": _program(
                chunk_jaxpr, chunk_low, chunk_c, lowest_c, while_trips, config.updates_per_block
            ),
        }
        analysis_s = time.perf_counter() - t
        # (d) time: the first chunk runs the prefill; later ones are steady state
        runner, first_s = _timed(lambda: chunk_c(init_c(keys))[0])
        per_iteration: dict[str, float] = {}
        for name, compiled in (("jit_default", chunk_c), ("jit_lowest", lowest_c)):
            best = math.inf
            for _ in range(timing_chunks):
                runner, dt = _timed(lambda c=compiled, r=runner: c(r)[0])
                best = min(best, dt)
            per_iteration[name] = best / config.blocks_per_chunk
        blocks = _divisor_at_most(config.num_blocks, timing_iterations)
        for n in (1, blocks):  # a 1-block warm-up (each primitive compiles on first use)
            eager.append(
                make_train(
                    dataclasses.replace(
                        run, config=config.replace(num_chunks=config.num_blocks // n)
                    )
                )
            )
        with jax.disable_jit():
            runner, warm_s = _timed(lambda: eager[0].run_chunk(runner)[0])
            runner, eager_s = _timed(lambda: eager[1].run_chunk(runner)[0])
        per_iteration = {"op_by_op": eager_s / blocks, **per_iteration}
    finally:
        for f in [fns, *eager]:
            f.buffer.close()
    n_runner = len(jax.tree.leaves(abstract))
    metrics_bytes = sum(
        int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in chunk_jaxpr.out_avals[n_runner:]
    )
    timing = {
        "per_iteration_s": per_iteration,
        "iterations_timed": {
            "op_by_op": blocks,
            "jit": config.blocks_per_chunk,
            "jit_chunks": timing_chunks,
        },
        "op_by_op_first_block_s": warm_s,  # with each primitive's first compile
        "first_chunk_s": first_s,
        "compile_s": {"init": init_s, "run_chunk_default": chunk_s, "run_chunk_lowest": lowest_s},
        "trace_s": lower_s,
        "lower_s": lower2_s,
        "analysis_s": analysis_s,
        "init_compiler_options": init_compiler_options(platform),
        "lowest_options": LOWEST_OPTIONS,
    }
    return XlaReport(
        run={
            "env": config.env.name,
            "num_seeds": config.num_seeds,
            "num_envs": config.env.num_envs,
            "total_env_steps": config.total_env_steps,
            "platform": platform,
            "device": str(run.device),
            "jax": jax.__version__,
        },
        trips=trips,
        programs=programs,
        timing=timing,
        unfused=_unfused(config, run.env.spec, metrics_bytes),
        apis=dict(APIS),
        notes=_notes(programs),
    )


def _program(closed, lowered, compiled, lowest, while_trips, upb: int = 0) -> ProgramReport:
    with_trips, loops = trip_cost(closed, xla_cost(compiled), while_trips, upb)
    memory, peak = _memory(compiled)
    return ProgramReport(
        jaxpr=jaxpr_counts(closed, while_trips, upb),
        hlo_lowered=hlo_counts(lowered.as_text(dialect="hlo")),
        hlo_optimised=hlo_counts(compiled.as_text()),
        hlo_optimised_lowest=None if lowest is None else hlo_counts(lowest.as_text()),
        cost=Cost(xla_cost(compiled), with_trips, loops, memory, peak),
    )


def _notes(programs: dict[str, ProgramReport]) -> list[str]:
    chunk = programs["run_chunk"]
    same = chunk.hlo_optimised_lowest.fusions == chunk.hlo_optimised.fusions
    cache = jax.config.jax_compilation_cache_dir
    notes = [
        f"lowest settings vs default: {chunk.hlo_optimised_lowest.fusions} vs "
        f"{chunk.hlo_optimised.fusions} fusions ({'the same' if same else 'they differ'}): "
        "xla_backend_optimization_level=0 lowers LLVM's level, it does not turn off HLO fusion "
        "or DCE.",
        "JAX's DCE has no rule for while loops: the loop's fori_loops (traced bounds) keep "
        "their bodies whole; 'reaching no output' counts what a while-aware pass finds dead "
        "there (XLA's HLO DCE and while-loop simplifier can remove it).",
        "cost: XLA counts a while body once and a conditional as its costliest branch (the "
        "learn branch; the target copy is counted every block); loops XLA creates below the "
        "jaxpr (known_trip_counts: threefry's rounds on CPU) stay counted once.",
        "counts of the analysed programs on one device; evaluate is not analysed.",
    ]
    if cache:
        notes.append(f"a persistent compilation cache is on ({cache}): compile times may be hits")
    return notes


# -- text ---------------------------------------------------------------------------------------


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.0f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def _render(r: XlaReport) -> str:
    names = list(r.programs)
    rows: list[tuple[str, ...]] = []

    def add(label: str, get: Callable[[ProgramReport], Any]) -> None:
        rows.append((label, *(_fmt(get(r.programs[n])) for n in names)))

    run = r.run
    out = [
        f"xla-report: {run['env']}, {run['num_seeds']} seed(s) x {run['num_envs']} envs, "
        f"{run['device']} (jax {run['jax']})",
        "trips per steady-state chunk: "
        + "; ".join(f"{k} {v['value']} ({v['source']})" for k, v in r.trips.items()),
    ]
    rows.append(("(a) jaxpr equations", *names))
    add("  traced (through sub-jaxprs)", lambda p: p.jaxpr.traced)
    add("  after JAX's DCE", lambda p: p.jaxpr.after_jax_dce)
    add(
        "  reaching no output (while-aware)",
        lambda p: f"{p.jaxpr.reaching_no_output} ({p.jaxpr.no_output_share:.1%})",
    )
    add("  run per call (x trip counts)", lambda p: p.jaxpr.per_call)
    rows.append(("(b) HLO instructions", *names))
    add("  lowered (pre-optimisation)", lambda p: p.hlo_lowered.instructions)
    add("  optimised", lambda p: p.hlo_optimised.instructions)
    add("  fusions (kernels)", lambda p: p.hlo_optimised.fusions)
    add("  fusions at lowest settings", lambda p: getattr(p.hlo_optimised_lowest, "fusions", "-"))
    add("  thunks (est.)", lambda p: p.hlo_optimised.thunks)
    add(
        "  while loops / conditionals",
        lambda p: f"{p.hlo_optimised.while_loops} / {p.hlo_optimised.conditionals}",
    )
    rows.append(("(c) cost per call", *names))
    add("  flops (XLA: bodies once)", lambda p: p.cost.xla["flops"])
    add("  flops (x trip counts)", lambda p: p.cost.with_trips["flops"])
    add("  bytes accessed (XLA)", lambda p: p.cost.xla["bytes accessed"])
    add("  bytes accessed (x trip counts)", lambda p: p.cost.with_trips["bytes accessed"])
    add("  peak memory (bytes)", lambda p: p.cost.peak_bytes)
    for f in ("argument_size", "output_size", "alias_size", "temp_size", "generated_code_size"):
        add(f"  memory {f.replace('_', ' ')} (bytes)", lambda p, f=f: p.cost.memory.get(f, 0))
    width = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, width, strict=True)) for row in rows]
    for name in names:
        j = r.programs[name].jaxpr
        out.append(
            f"{name}: no output by primitive {j.no_output_by_primitive}; removed by "
            f"JAX's DCE {j.removed_by_jax_dce}"
        )
    t = r.timing
    out.append(
        "(d) time per iteration (one block), s: "
        + ", ".join(f"{k} {_fmt(v)}" for k, v in t["per_iteration_s"].items())
    )
    out.append(
        f"    op by op, first block (each primitive's first compile): "
        f"{_fmt(t['op_by_op_first_block_s'])} s"
    )
    out.append(
        "    compile, s: "
        + ", ".join(f"{k} {_fmt(v)}" for k, v in t["compile_s"].items())
        + f"; trace {_fmt(t['trace_s'])}, lower {_fmt(t['lower_s'])}"
    )
    out.append("(e) per env step            unfused        fused")
    per = r.unfused["per_env_step"]
    for k in per["fused"]:
        out.append(f"    {k:<24}{_fmt(per['unfused'][k]):>10}  {_fmt(per['fused'][k]):>11}")
    out += ["notes:"] + [f"  - {n}" for n in r.notes]
    return "\n".join(out)


# -- command line -------------------------------------------------------------------------------


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `xla-report` subcommand to an argparse `subparsers` object.

    `args.func(args)` prints the report (text, or JSON with --json) and returns 0; bad input
    raises `ValueError` (and a missing extra `ImportError`) for the caller to report.
    """
    p = subparsers.add_parser(
        "xla-report", help="what JAX and XLA did to the fused loop: DCE, fusion, cost, timing"
    )
    p.add_argument("--preset", help="a preset name (default: the default preset)")
    p.add_argument("--env", help="env name; overrides the preset's")
    p.add_argument("--seeds", type=int, help="seeds in the program (vmapped)")
    p.add_argument("--total-env-steps", type=int, help="env steps per seed")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="any config field")
    p.add_argument("--timing-iterations", type=int, default=2, help="blocks run op by op")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_main)
    return p


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The config the `xla-report` options name: the preset with --env, --seeds,
    --total-env-steps and --set applied together (validated once, so e.g. a shorter run and its
    `learning_starts` can change at once).

    Raises:
      ValueError: unknown preset or field, or a config that does not validate.
    """
    from jaxrl_fast import options, presets

    config = presets.get(args.preset or presets.DEFAULT)
    short = {"env.name": args.env, "num_seeds": args.seeds, "total_env_steps": args.total_env_steps}
    changes = {k: v for k, v in short.items() if v is not None}
    changes.update(options.parse_set(args.set or []))
    return options.apply(config, changes)


def _main(args: argparse.Namespace) -> int:
    result = report(config_from_args(args), timing_iterations=args.timing_iterations)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.render())
    return 0
