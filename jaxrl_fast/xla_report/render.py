"""Text of `xla_report`: `XlaReport.render()`'s plain-text table of measures (a)-(e)."""

from __future__ import annotations

from typing import Any, Callable

# `r` is a `reports.XlaReport` and `get` reads a `reports.ProgramReport`; not imported here,
# since `reports` imports this module.


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.0f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def render_report(r: Any) -> str:
    names = list(r.programs)
    rows: list[tuple[str, ...]] = []

    def add(label: str, get: Callable[[Any], Any]) -> None:
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
