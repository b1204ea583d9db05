"""What JAX and XLA did to the fused loop: `report(config) -> XlaReport`, `jaxrl-fast xla-report`.

Four measures of the compiled `init` and `run_chunk` programs (`loop.make_train`), kept apart and
never folded into one number, plus the conventional loop's extra work:

(a) jaxpr equations, counted through every sub-jaxpr (scan / while / cond bodies, jit and
    custom_jvp / custom_vjp calls), as traced and after JAX's own dead-code elimination
    (`partial_eval.dce_jaxpr`, the pass `jit` runs before lowering). The loop's `fori_loop`s
    have fixed trip counts, so they are scans, which JAX's DCE enters (it has no rule for
    `while`); a liveness pass here, through every sub-jaxpr, counts the equations that reach no
    output (by primitive). Loop bodies are also counted with their multiplicity per chunk.
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

Modules, one measure each: `jaxprs` (a), `hlo` (b), `cost` (c), `timing` (d), `unfused` (e);
`reports` gathers them (`report`, `XlaReport`, `LOWEST_OPTIONS`), `render` writes the text and
`cli` the `xla-report` subcommand. The public names are re-exported here.
"""

from __future__ import annotations

from jaxrl_fast.xla_report.cli import add_parser, config_from_args
from jaxrl_fast.xla_report.cost import Cost, trip_cost, xla_cost
from jaxrl_fast.xla_report.hlo import HloCounts, hlo_counts
from jaxrl_fast.xla_report.jaxprs import JaxprCounts, Loop, count_eqns, jaxpr_counts
from jaxrl_fast.xla_report.reports import APIS, LOWEST_OPTIONS, ProgramReport, XlaReport, report
from jaxrl_fast.xla_report.unfused import unfused_totals

__all__ = [
    "APIS",
    "LOWEST_OPTIONS",
    "Cost",
    "HloCounts",
    "JaxprCounts",
    "Loop",
    "ProgramReport",
    "XlaReport",
    "add_parser",
    "config_from_args",
    "count_eqns",
    "hlo_counts",
    "jaxpr_counts",
    "report",
    "trip_cost",
    "unfused_totals",
    "xla_cost",
]
