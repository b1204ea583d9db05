"""jaxrl_fast's fused loop against a PureJaxRL-style loop (`benchmarks/reference_loop.py`), side by side.

One command, one process, one machine:

    python benchmarks/peers.py            # 1, 8 and 32 seeds, 3 rounds (~15 min on 2 cores)
    python benchmarks/peers.py --quick    # 1 and 8 seeds, shorter runs (~3 min)
    python benchmarks/peers.py --quick --prng-impl unsafe_rbg   # jaxrl_fast side on XLA's RNG

Writes `benchmarks/results/peers/peers[-quick][-PRNG].json` and `.md`. Both loops run `cartpole-cleanrl`
(CleanRL / PureJaxRL hyperparameters) for the same env steps per seed, on one XLA device, with
per-seed keys. In each round and seed count, the two take turns (which goes first alternates).
Each side is compiled once per round from freshly built functions (trace + XLA compile, in this
process: the first round's figure is the coldest) and then runs the whole budget (prefill and
learning; jaxrl_fast's final evaluation is not part of either). Ratios are of the medians over
the rounds: run time reference / jaxrl_fast (> 1: jaxrl_fast faster), compile jaxrl_fast /
reference (< 1: jaxrl_fast compiles faster).
"""

from __future__ import annotations

import os
import time

import common
import jax
import numpy as np
import reference_loop  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import presets  # noqa: E402
from jaxrl_fast.loop import make_train  # noqa: E402
from jaxrl_fast.parallel.seeds import train_keys  # noqa: E402
from jaxrl_fast.run.programs import init_compiler_options  # noqa: E402


def _timed(f, *args):
    t = time.perf_counter()
    out = jax.block_until_ready(f(*args))
    return out, time.perf_counter() - t


def run_library(config) -> dict:
    """Compile and run jaxrl_fast's init and every chunk; no evaluation."""
    t = time.perf_counter()
    fns = make_train(config)
    keys = train_keys(config)
    options = init_compiler_options(jax.devices()[0].platform)  # as `train` compiles it
    init = jax.jit(fns.init).lower(keys).compile(compiler_options=options)
    runner_shape = jax.eval_shape(fns.init, keys)
    chunk = jax.jit(fns.run_chunk, donate_argnums=0).lower(runner_shape).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    runner = init(keys)
    for _ in range(config.chunks):
        runner, metrics = chunk(runner)
    jax.block_until_ready((runner, metrics))
    run_s = time.perf_counter() - t
    return {"compile_s": compile_s, "run_s": run_s, "loss": float(np.nanmean(metrics.loss))}


def run_reference(config) -> dict:
    """Compile and run the PureJaxRL-style loop: jit of vmap of `train` over the seed keys."""
    t = time.perf_counter()
    train, _ = reference_loop.make_train(config)
    keys = train_keys(config)
    program = jax.jit(jax.vmap(train)).lower(keys).compile()
    compile_s = time.perf_counter() - t
    (carry, losses), run_s = _timed(program, keys)
    last = np.asarray(losses)[:, -100:]
    return {"compile_s": compile_s, "run_s": run_s, "loss": float(np.mean(last[last > 0]))}


def _median(xs):
    return float(np.median(np.asarray(xs, float)))


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="1 and 8 seeds, shorter runs")
    parser.add_argument("--rounds", type=int, default=3, help="turns per side and seed count")
    parser.add_argument("--seeds", type=int, nargs="*", help="seed counts (default 1 8 32)")
    parser.add_argument(
        "--prng-impl",
        default="threefry2x32",
        choices=["threefry2x32", "rbg", "unsafe_rbg"],
        help="TrainConfig.prng_impl of the jaxrl_fast side (the reference keeps threefry2x32)",
    )
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"--rounds={args.rounds}: must be >= 1 (3 or more for a ratio)")
    seeds = args.seeds or ([1, 8] if args.quick else [1, 8, 32])
    steps = 30_000 if args.quick else 100_000
    base = presets.get("cartpole-cleanrl").replace(total_env_steps=steps, eval_episodes=0)
    if args.prng_impl != "threefry2x32":
        base = base.replace(prng_impl=args.prng_impl)
    t0 = time.perf_counter()
    rows = []
    for s in seeds:
        config = base.replace(num_seeds=s)
        turns = {"jaxrl_fast": [], "reference": []}
        for r in range(args.rounds):
            order = ["jaxrl_fast", "reference"] if r % 2 == 0 else ["reference", "jaxrl_fast"]
            for side in order:
                print(f"[{s} seeds, round {r + 1}/{args.rounds}] {side}", flush=True)
                fn = run_library if side == "jaxrl_fast" else run_reference
                turns[side].append(fn(config))
        med = {k: {m: _median([x[m] for x in v]) for m in ("compile_s", "run_s")}
               for k, v in turns.items()}  # fmt: skip
        env_steps = s * config.total_env_steps
        rows.append(
            {
                "num_seeds": s,
                "env_steps_per_seed": config.total_env_steps,
                "turns": turns,
                "median": med,
                "env_steps_per_s": {k: env_steps / v["run_s"] for k, v in med.items()},
                "run_ratio_reference_over_jaxrl_fast": med["reference"]["run_s"]
                / med["jaxrl_fast"]["run_s"],
                "compile_ratio_jaxrl_fast_over_reference": med["jaxrl_fast"]["compile_s"]
                / med["reference"]["compile_s"],
            }
        )
    out = {
        "machine": machine(),
        "quick": args.quick,
        "prng_impl": args.prng_impl,
        "rounds": args.rounds,
        "rows": rows,
        "benchmark_time_s": time.perf_counter() - t0,
    }
    suffix = ("-quick" if args.quick else "") + (
        f"-{args.prng_impl}" if args.prng_impl != "threefry2x32" else ""
    )
    stem = os.path.join(args.out, "peers" + suffix)
    write_results(stem, out, render)


def render(r: dict) -> str:
    m = r["machine"]
    lines = [
        f"# jaxrl_fast vs a PureJaxRL-style loop, CartPole-v1{' (quick)' if r['quick'] else ''}",
        "",
        f"{machine_line(m)}, one device. Produced by `python benchmarks/peers.py"
        f"{' --quick' if r['quick'] else ''}` in {r['benchmark_time_s']:.0f} s, {r['rounds']} "
        "alternating rounds per seed count; medians. The reference is "
        "`benchmarks/reference_loop.py` (jit of vmap of one `train`, flashbax flat buffer, "
        "per-seed keys), both with `cartpole-cleanrl` hyperparameters; compile is trace + XLA "
        "compile in one process. jaxrl_fast's `prng_impl`: "
        f"{r.get('prng_impl', 'threefry2x32')}.",
        "",
        "| seeds | env steps per seed | env-steps/s jaxrl_fast | env-steps/s reference | "
        "run: reference / jaxrl_fast | compile s jaxrl_fast | compile s reference | "
        "compile: jaxrl_fast / reference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        med, sps = row["median"], row["env_steps_per_s"]
        lines.append(
            f"| {row['num_seeds']} | {row['env_steps_per_seed']:,} | {sps['jaxrl_fast']:,.0f} | "
            f"{sps['reference']:,.0f} | {row['run_ratio_reference_over_jaxrl_fast']:.2f} | "
            f"{med['jaxrl_fast']['compile_s']:.1f} | {med['reference']['compile_s']:.1f} | "
            f"{row['compile_ratio_jaxrl_fast_over_reference']:.2f} |"
        )
    lines += ["", "Run seconds of every turn (jaxrl_fast; reference):", ""]
    for row in r["rows"]:
        turns = row["turns"]
        a, b = (
            ", ".join(f"{x['run_s']:.2f}" for x in turns[k]) for k in ("jaxrl_fast", "reference")
        )
        lines.append(f"- {row['num_seeds']} seeds: {a}; {b}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
