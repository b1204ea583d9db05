"""What a sweep costs as one program against one `train` per point.

A: `train(config, sweep=...)`: 4 learning rates x 2 gammas, K seeds each, one program (one
compile). B: the same 8 points as 8 `train` calls of K seeds (8 compiles). Both on the
`cartpole` preset at a short budget, alternated A, B, A, B, ... (`--repeats` each) in one
process, with no compilation cache. Reported: wall time (compile + run + evaluation) per
repeat, the medians and their ratio.

    python benchmarks/sweep_cost.py            # 3 repeats each, 20k env steps, 2 seeds per point
"""

from __future__ import annotations

import statistics
import time

import common  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402

SPEC = {"dqn.learning_rate": [1e-4, 3e-4, 1e-3, 3e-3], "dqn.gamma": [0.95, 0.99]}


def one_program(config, seeds: int) -> dict:
    from jaxrl_fast.run.train import train

    t = time.perf_counter()
    swept = train(config, sweep=SPEC, seeds_per_point=seeds, progress=False)
    wall = time.perf_counter() - t
    r = swept.result
    return {"wall_s": wall, "compile_s": r.compile_time_s, "run_s": r.run_time_s,
            "means": [p.mean for p in swept.points]}  # fmt: skip


def one_per_point(config, seeds: int) -> dict:
    from jaxrl_fast.config import options
    from jaxrl_fast.run.sweep import plan
    from jaxrl_fast.run.train import train

    t, compile_s, run_s, means = time.perf_counter(), 0.0, 0.0, []
    for point in plan(config, SPEC, seeds).points:
        r = train(options.apply(config, point).replace(num_seeds=seeds), progress=False)
        compile_s, run_s = compile_s + r.compile_time_s, run_s + r.run_time_s
        means.append(float(r.final_return.mean()))
    return {"wall_s": time.perf_counter() - t, "compile_s": compile_s, "run_s": run_s,
            "means": means}  # fmt: skip


def render(result: dict) -> str:
    a, b = result["one_program"], result["one_per_point"]
    med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
    lines = [
        "# A sweep as one program vs one `train` per point",
        "",
        machine_line(result["machine"]),
        "",
        f"Re-run: `python benchmarks/sweep_cost.py`. `cartpole` preset, "
        f"{result['env_steps']:,} env steps per seed, 8 points (4 learning rates x 2 gammas) x "
        f"{result['seeds']} seeds; A and B alternated, {len(a)} runs each, no compilation cache.",
        "",
        "| | wall s (median) | compile s | run s | runs (wall s) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, runs in (("A: one program", a), ("B: one train per point", b)):
        walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
        lines.append(
            f"| {name} | {med(runs, 'wall_s'):.1f} | {med(runs, 'compile_s'):.1f} | "
            f"{med(runs, 'run_s'):.1f} | {walls} |"
        )
    ratio = med(b, "wall_s") / med(a, "wall_s")
    lines += ["", f"B / A wall time (medians): **{ratio:.2f}x**.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--env-steps", type=int, default=21_000)
    args = parser.parse_args()
    from jaxrl_fast import presets

    config = presets.get("cartpole").replace(total_env_steps=args.env_steps)
    a, b = [], []
    for _ in range(args.repeats):
        a.append(one_program(config, args.seeds))
        b.append(one_per_point(config, args.seeds))
    result = {
        "machine": machine(),
        "env_steps": args.env_steps,
        "seeds": args.seeds,
        "one_program": a,
        "one_per_point": b,
    }
    write_results(common.stem(args, "sweep_cost"), result, render)


if __name__ == "__main__":
    main()
