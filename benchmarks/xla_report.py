"""`jaxrl-fast xla-report` on presets, committed: what JAX and XLA did to the fused loop.

    python benchmarks/xla_report.py                          # cartpole and minatar-breakout
    python benchmarks/xla_report.py --presets cartpole

Writes `benchmarks/results/xla_report/xla-report.json` (each preset's `XlaReport.to_dict()`) and `.md` (each
report's own table, `XlaReport.render()`), with the machine. The op-by-op timing compiles every
primitive on first use, so a preset takes about a minute here.
"""

from __future__ import annotations

import os

import common
from common import machine, machine_line, write_results  # noqa: E402


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--presets", default="cartpole,minatar-breakout")
    parser.add_argument("--timing-iterations", type=int, default=2)
    args = parser.parse_args()
    from jaxrl_fast import presets, xla_report

    reports = {}
    for name in args.presets.split(","):
        print(f"xla-report: {name}", flush=True)
        rep = xla_report.report(presets.get(name), timing_iterations=args.timing_iterations)
        reports[name] = {"report": rep.to_dict(), "text": rep.render()}
    result = {"machine": machine(), "reports": reports}
    write_results(os.path.join(args.out, "xla-report"), result, render)


def render(r: dict) -> str:
    lines = [
        "# What XLA did to the fused loop (`jaxrl-fast xla-report`)",
        "",
        machine_line(r["machine"]),
        "",
        "Command: `python benchmarks/xla_report.py` (each preset as `jaxrl-fast xla-report "
        "--preset NAME`). The four measures are kept apart: (a) jaxpr equations, (b) HLO "
        "instructions and fusions, (c) flops and bytes with the loops' trip counts and memory, "
        "(d) time per training block op by op, jitted at the lowest settings and at the default; "
        "(e) the conventional loop's extra work per env step.",
        "",
    ]
    for name, x in r["reports"].items():
        lines += [f"## `{name}`", "", "```", x["text"].rstrip(), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
