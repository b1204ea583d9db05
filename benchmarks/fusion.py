"""What XLA's operator fusion is worth to the fused loop: `run_chunk` with and without it.

    python benchmarks/fusion.py                        # cartpole and minatar-breakout, 3 rounds
    python benchmarks/fusion.py --presets cartpole --rounds 5

The seed article's "further directions" claim another 1.3-1.8x from fusing and regrouping ops by
their measured timings. This measures what XLA's own fusion already gives: the same `run_chunk`
compiled at the default and with XLA's HLO fusion pass turned off
(`compiler_options={"xla_disable_hlo_passes": "fusion"}`, the one switch that does turn it off;
`xla_backend_optimization_level=0` does not, see `jaxrl-fast xla-report`). Both builds run the
same steady-state chunks from the same state, alternating A and B each round; reported are the
medians of the per-chunk time, the ratio, the compile times and the number of `fusion`
instructions in each optimised program. Writes `benchmarks/results/fusion/fusion.json` and `.md`.
"""

from __future__ import annotations

import os
import statistics
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

NO_FUSION = {"xla_disable_hlo_passes": "fusion"}


def _time_chunks(compiled, runner, chunks: int) -> tuple[float, object]:
    import jax

    t = time.perf_counter()
    for _ in range(chunks):
        runner, _ = compiled(runner)
    jax.block_until_ready(runner)
    return (time.perf_counter() - t) / chunks, runner


def measure(preset: str, rounds: int, chunks: int) -> dict:
    import jax

    from jaxrl_fast import presets
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.loop.resolve import resolve
    from jaxrl_fast.parallel import seeds

    config = presets.get(preset)
    fns = make_train(resolve(config))
    try:
        keys = seeds.train_keys(config)
        init = jax.jit(fns.init).lower(keys).compile()
        abstract = jax.jit(fns.init).eval_shape(keys)
        builds, compile_s, fusions = {}, {}, {}
        for name, options in (("default", None), ("no_fusion", NO_FUSION)):
            t = time.perf_counter()
            builds[name] = (
                jax.jit(fns.run_chunk, donate_argnums=0)
                .lower(abstract)
                .compile(compiler_options=options)
            )
            compile_s[name] = time.perf_counter() - t
            fusions[name] = builds[name].as_text().count(" fusion(")
        # each build warms up on its own runner (the first chunk holds the prefill)
        runners = {}
        for name, build in builds.items():
            runners[name], _ = build(init(keys))
        times = {name: [] for name in builds}
        for _ in range(rounds):
            for name, build in builds.items():  # alternating A, B every round
                dt, runners[name] = _time_chunks(build, runners[name], chunks)
                times[name].append(dt)
    finally:
        fns.buffer.close()
    med = {name: statistics.median(v) for name, v in times.items()}
    return {
        "preset": preset,
        "env": config.env.name,
        "blocks_per_chunk": config.blocks_per_chunk,
        "chunk_s": times,
        "median_chunk_s": med,
        "no_fusion_over_default": med["no_fusion"] / med["default"],
        "compile_s": compile_s,
        "fusion_instructions": fusions,
    }


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--presets", default="cartpole,minatar-breakout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=2, help="chunks timed per build per round")
    args = parser.parse_args()
    cases = []
    for preset in args.presets.split(","):
        case = measure(preset, args.rounds, args.chunks)
        print(f"{preset}: no fusion / default = {case['no_fusion_over_default']:.2f}", flush=True)
        cases.append(case)
    result = {"machine": machine(), "rounds": args.rounds, "chunks": args.chunks, "cases": cases}
    write_results(os.path.join(args.out, "fusion"), result, render)


def render(r: dict) -> str:
    lines = [
        "# XLA's operator fusion, on and off (`python benchmarks/fusion.py`)",
        "",
        machine_line(r["machine"]),
        "",
        f"`run_chunk` compiled at the default and with `xla_disable_hlo_passes=fusion`; "
        f"{r['rounds']} rounds alternating the two builds, {r['chunks']} steady-state chunks "
        "per build per round; medians of the per-chunk time.",
        "",
        "| preset | blocks per chunk | default s/chunk | no fusion s/chunk | no fusion / default "
        "| compile s (default / no fusion) | `fusion` instructions (default / no fusion) |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in r["cases"]:
        m, cs, f = c["median_chunk_s"], c["compile_s"], c["fusion_instructions"]
        lines.append(
            f"| `{c['preset']}` | {c['blocks_per_chunk']} | {m['default']:.3f} | "
            f"{m['no_fusion']:.3f} | **{c['no_fusion_over_default']:.2f}x** | "
            f"{cs['default']:.1f} / {cs['no_fusion']:.1f} | {f['default']} / {f['no_fusion']} |"
        )
    lines += [
        "",
        "With the fusion pass off, XLA:CPU still wraps single ops as `fusion` computations to "
        "emit them, hence the larger count: each is one kernel of one op.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
