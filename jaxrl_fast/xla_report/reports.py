"""The report of `xla_report`: `report(config) -> XlaReport`, which compiles the fused loop's
`init` and `run_chunk` and gathers measures (a)-(e) into `ProgramReport`s and an `XlaReport`; the
optimisation settings it compares (`LOWEST_OPTIONS`) and the JAX APIs each measure uses (`APIS`)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import jax
import numpy as np

from jaxrl_fast.config import TrainConfig
from jaxrl_fast.loop.resolve import ResolvedRun, resolve
from jaxrl_fast.xla_report.cost import Cost, compiled_memory, trip_cost, xla_cost
from jaxrl_fast.xla_report.hlo import HloCounts, HostWaits, hlo_counts, host_waits
from jaxrl_fast.xla_report.jaxprs import JaxprCounts, jaxpr_counts
from jaxrl_fast.xla_report.render import render_report
from jaxrl_fast.xla_report.timing import time_iterations, timed
from jaxrl_fast.xla_report.unfused import unfused_report

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


@dataclasses.dataclass(frozen=True)
class ProgramReport:
    """Measures (a)-(c) of one compiled program."""

    jaxpr: JaxprCounts
    hlo_lowered: HloCounts
    hlo_optimised: HloCounts  # default settings
    hlo_optimised_lowest: HloCounts | None  # LOWEST_OPTIONS (run_chunk only)
    cost: Cost
    host_waits: HostWaits  # what XLA:GPU would wait on the host for, in the optimised HLO


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
        return plain_value(dataclasses.asdict(self))

    def render(self) -> str:
        """Return the report as a plain-text table."""
        return render_report(self)


def plain_value(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): plain_value(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain_value(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, (np.integer, np.bool_)):
        return x.item()
    return x


def _trip_counts(config: TrainConfig) -> dict:
    """The trip counts of run_chunk's loops, each with where it comes from and its depth."""
    return {
        "prefill_steps": {
            "value": config.prefill_steps,
            "depth": 0,
            "source": f"TrainConfig.prefill_steps = learning_starts {config.learning_starts} // "
            f"env.num_envs {config.env.num_envs}: the prefill's loop, inside the prefill cond "
            "(run in the first chunk only; the counts here include it, as XLA's cost counts a "
            "cond's costliest branch)",
        },
        "blocks_per_chunk": {
            "value": config.blocks_per_chunk,
            "depth": 0,
            "source": f"TrainConfig.blocks_per_chunk = num_blocks {config.num_blocks} // chunks "
            f"{config.chunks}: the outer loop (fori_loop over blocks, a fixed trip count)",
        },
        "collect_steps_per_block": {
            "value": config.collect_steps_per_block,
            "depth": 1,
            "source": f"TrainConfig.collect_steps_per_block = train_frequency "
            f"{config.train_frequency} // env.num_envs {config.env.num_envs}: a block's collect "
            "loop",
        },
        "updates_per_block": {
            "value": config.updates_per_block,
            "depth": 1,
            "source": "TrainConfig.updates_per_block: a block's learn loop (no loop when 1)",
        },
    }


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
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.parallel import seeds
    from jaxrl_fast.run.programs import init_compiler_options

    if timing_iterations < 1 or timing_chunks < 1:
        raise ValueError(
            f"report(timing_iterations={timing_iterations}, timing_chunks={timing_chunks}) is not "
            "allowed; expected ints >= 1."
        )
    run = config_or_run if isinstance(config_or_run, ResolvedRun) else resolve(config_or_run)
    config, platform = run.config, run.device.platform
    trips = _trip_counts(config)
    sources = [(v["depth"], v["value"], k) for k, v in trips.items()]
    keys = seeds.train_keys(config)
    fns = make_train(run)
    eager: list = []  # the op-by-op loops (each holds a replay buffer to close)
    try:
        init_jit = jax.jit(fns.init)
        init_low = init_jit.lower(keys)
        init_c, init_s = timed(lambda: init_low.compile(init_compiler_options(platform)))
        abstract = init_jit.eval_shape(keys)
        chunk_jaxpr, lower_s = timed(lambda: jax.make_jaxpr(fns.run_chunk)(abstract))
        chunk_low, lower2_s = timed(
            lambda: jax.jit(fns.run_chunk, donate_argnums=0).lower(abstract)
        )
        chunk_c, chunk_s = timed(lambda: chunk_low.compile())
        lowest_c, lowest_s = timed(lambda: chunk_low.compile(compiler_options=LOWEST_OPTIONS))
        t = time.perf_counter()
        programs = {
            "init": _program(jax.make_jaxpr(fns.init)(keys), init_low, init_c, None, ()),
            "run_chunk": _program(chunk_jaxpr, chunk_low, chunk_c, lowest_c, sources),
        }
        analysis_s = time.perf_counter() - t
        per_iteration, blocks, first_s, warm_s = time_iterations(
            run,
            init_c,
            chunk_c,
            lowest_c,
            keys,
            eager,
            timing_iterations=timing_iterations,
            timing_chunks=timing_chunks,
        )
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
        unfused=unfused_report(config, run.env.spec, metrics_bytes),
        apis=dict(APIS),
        notes=_notes(programs),
    )


def _program(closed, lowered, compiled, lowest, sources) -> ProgramReport:
    with_trips, loops = trip_cost(closed, xla_cost(compiled), sources)
    memory, peak = compiled_memory(compiled)
    return ProgramReport(
        jaxpr=jaxpr_counts(closed, sources),
        hlo_lowered=hlo_counts(lowered.as_text(dialect="hlo")),
        hlo_optimised=hlo_counts(compiled.as_text()),
        hlo_optimised_lowest=None if lowest is None else hlo_counts(lowest.as_text()),
        cost=Cost(xla_cost(compiled), with_trips, loops, memory, peak),
        host_waits=host_waits(compiled.as_text()),
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
        "the loop's fori_loops have trip counts fixed at trace time, so JAX traces them as "
        "scans, which its DCE enters; 'reaching no output' counts what a liveness pass through "
        "every sub-jaxpr finds dead (XLA's HLO DCE can remove more).",
        "cost: XLA counts a loop body once and a conditional as its costliest branch (the "
        "prefill branch, which runs in the first chunk only); loops XLA creates below the "
        "jaxpr (known_trip_counts: threefry's rounds on CPU) stay counted once.",
        "counts of the analysed programs on one device; evaluate is not analysed.",
    ]
    for name, prog in programs.items():
        waits = prog.host_waits
        notes.append(
            f"{name}: {len(waits.unknown_trip_loops)} loop(s) without a known trip count and "
            f"{len(waits.conditionals)} conditional(s) ({', '.join(waits.conditionals) or '-'}): "
            "on a GPU each waits on the host at every iteration"
        )
    if cache:
        notes.append(f"a persistent compilation cache is on ({cache}): compile times may be hits")
    return notes
