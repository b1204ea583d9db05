"""Measure (b) of `xla_report`: instructions, fusions, estimated CPU thunks, while loops and
conditionals counted in HLO text (lowered or optimised)."""

from __future__ import annotations

import collections
import dataclasses
import re

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
    comps, run = _parse(text)
    fused = {
        ref
        for ins in comps.values()
        for op, line in ins
        if op == "fusion"
        for ref in re.findall(r"calls=%?([\w.\-]+)", line)
    }
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


def _parse(text: str) -> tuple[dict[str, list[tuple[str, str]]], list[tuple[str, str]]]:
    """HLO text's computations (name -> [(opcode, line)]) and the instructions that run (those
    of the entry, loop bodies and conditions, branches and calls; not fused ones)."""
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
    return comps, [(op, line) for name in scheduled for op, line in comps[name]]


@dataclasses.dataclass(frozen=True)
class HostWaits:
    """What makes XLA:GPU wait on the host inside one compiled program: `while` loops without a
    trip count known at compile time (their condition is read on the host every iteration) and
    `conditional`s (their predicate is), each by its op name (`jax.named_scope`s included)."""

    unknown_trip_loops: list[str]
    conditionals: list[str]


def host_waits(text: str) -> HostWaits:
    """`HostWaits` of optimised HLO text (`Compiled.as_text()`; XLA annotates the trip counts
    it can prove while it optimises, on CPU as on GPU).

    >>> text = '''ENTRY %main (x: s32[]) -> s32[] {
    ...   %x = s32[] parameter(0)
    ...   ROOT %w = s32[] while(%x), condition=%c, body=%b, metadata={op_name="jit(f)/while"}
    ... }'''
    >>> host_waits(text).unknown_trip_loops
    ['jit(f)/while']
    """
    _, run = _parse(text)

    def name(line: str) -> str:
        m = re.search(r'op_name="([^"]*)"', line)
        return m.group(1) if m else line.split("=", 1)[0].strip()

    return HostWaits(
        unknown_trip_loops=sorted(
            name(line) for op, line in run if op == "while" and "known_trip_count" not in line
        ),
        conditionals=sorted(name(line) for op, line in run if op == "conditional"),
    )
