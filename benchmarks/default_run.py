"""The README's first command, timed: `jaxrl-fast train` on the default preset, cold cache.

    python benchmarks/default_run.py               # 5 fresh processes (~1 min on 2 cores)
    python benchmarks/default_run.py --runs 3

Each run is a fresh `python -m jaxrl_fast.cli train --no-cache --no-progress --out DIR` (the
default `cartpole` preset, 1 seed, nothing reused from an on-disk compile cache). Writes
`benchmarks/results/default_run/default_run.json` and `.md`: per run the process's wall time (imports and
JAX start-up included), the run's own `wall_time_s` (compile + run + evaluation, from its
`summary.json`), the set-up before compiling (env construction, `import gymnax` included), its
compile seconds and its final greedy return.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOLVED = 475.0  # CartPole-v1's own threshold


def one_run(timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="jaxrl_fast-default-") as out:
        cmd = [sys.executable, "-m", "jaxrl_fast.cli", "train", "--no-cache", "--no-progress"]
        t = time.perf_counter()
        proc = subprocess.run(
            [*cmd, "--out", out], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
        process_s = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed:\n{proc.stderr[-3000:]}")
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
    return {
        "process_s": process_s,
        "train_wall_s": s["wall_time_s"],
        "compile_s": s["compile_time_s"],
        # before compiling: env construction (`import gymnax`), resolving the config, keys
        "setup_s": s["wall_time_s"] - s["compile_time_s"] - s["run_time_s"] - s["eval_time_s"],
        "final_return": [x["final_return"] for x in s["seeds"]],
        "env_steps_per_seed": s["env_steps_per_seed"],
    }


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    runs = []
    for i in range(args.runs):
        runs.append(one_run(args.timeout))
        r = runs[-1]
        print(
            f"[{i + 1}/{args.runs}] process {r['process_s']:.1f} s, train {r['train_wall_s']:.1f} s "
            f"(compile {r['compile_s']:.1f}), return {r['final_return']}",
            flush=True,
        )
    med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
    result = {
        "machine": machine(),
        "runs": runs,
        "median": {k: med(k) for k in ("process_s", "train_wall_s", "compile_s", "setup_s")},
        "solved_runs": sum(min(r["final_return"]) >= SOLVED for r in runs),
    }
    write_results(os.path.join(args.out, "default_run"), result, render)


def render(r: dict) -> str:
    m = r["median"]
    lines = [
        "# `jaxrl-fast train` (default `cartpole` preset), cold compile cache",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/default_run.py --runs {len(r['runs'])}`: fresh processes, "
        "one after another.",
        "",
        f"Median: **{m['train_wall_s']:.1f} s** train wall time (compile {m['compile_s']:.1f} s "
        f"and {m['setup_s']:.1f} s of set-up before it included), {m['process_s']:.1f} s for the whole process (Python, imports and JAX "
        f"start-up included); {r['solved_runs']} of {len(r['runs'])} runs solved "
        f"(final greedy return >= {SOLVED:.0f}).",
        "",
        "| run | process s | train wall s | set-up s | compile s | env steps / seed "
        "| final greedy return |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, x in enumerate(r["runs"], 1):
        ret = ", ".join(f"{v:.1f}" for v in x["final_return"])
        lines.append(
            f"| {i} | {x['process_s']:.1f} | {x['train_wall_s']:.1f} | {x['setup_s']:.1f} | "
            f"{x['compile_s']:.1f} | "
            f"{x['env_steps_per_seed']:,} | {ret} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
