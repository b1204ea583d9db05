"""The docs' data-parallel example, run several times: does it solve CartPole on every run?

    python benchmarks/data_parallel_example.py            # 5 runs, seeds 0-4 (~8 min on 2 cores)
    python benchmarks/data_parallel_example.py --runs 3

Run k is the command of docs/data-parallel.md, `jaxrl-fast launch --local 2 -- train --preset
cartpole --parallel.data 2 --out DIR`, with `--set seed=k` (run 0 is the command itself: seed
0 is the default). Two local processes, one data replica each, on the CPU (`launch --cpu`).
Writes `benchmarks/results/data_parallel_example/data_parallel_example.json` and `.md`: per run
the final greedy return (the mean over the evaluation's episodes), the last training return,
and the run's wall time; then the spread and how many runs solved CartPole (>= 475).
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
COMMAND = "jaxrl-fast launch --local 2 -- train --preset cartpole --parallel.data 2 --out DIR"


def one_run(seed: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="jaxrl_fast-dp-example-") as out:
        cmd = [sys.executable, "-m", "jaxrl_fast.cli", "launch", "--local", "2", "--cpu"]
        cmd += ["--timeout", str(timeout), "--", "train", "--preset", "cartpole"]
        cmd += ["--parallel.data", "2", "--set", f"seed={seed}", "--no-progress", "--out", out]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, cwd=ROOT)
        process_s = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed:\n{proc.stderr[-3000:]}")
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
    (only,) = s["seeds"]
    return {
        "seed": seed,
        "final_return": only["final_return"],
        "train_return": only["train_return"],
        "process_s": process_s,
        "train_wall_s": s["wall_time_s"],
        "env_steps_per_seed": s["env_steps_per_seed"],
    }


def render(r: dict) -> str:
    finals = [run["final_return"] for run in r["runs"]]
    runs = "" if r["num_runs"] == 5 else f" --runs {r['num_runs']}"
    lines = [
        "# The data-parallel example, run by run",
        "",
        f"{machine_line(r['machine'])}. Produced by `python benchmarks/data_parallel_example.py"
        f"{runs}` in {r['benchmark_time_s']:.0f} s.",
        "",
        f"Command: `{COMMAND}` with `--set seed=K` (K = 0 is the command as written).",
        "",
        "| seed | final greedy return | last training return | run wall s |",
        "|---:|---:|---:|---:|",
    ]
    for run in r["runs"]:
        lines.append(
            f"| {run['seed']} | {run['final_return']:.1f} | {run['train_return']:.1f} | "
            f"{run['train_wall_s']:.1f} |"
        )
    lines += [
        "",
        f"**{r['solved']} of {len(finals)} runs solved CartPole (>= {SOLVED:g})**; final greedy "
        f"return min {min(finals):.1f}, median {statistics.median(finals):.1f}, max "
        f"{max(finals):.1f}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--runs", type=int, default=5, help="runs, seeds 0 .. runs-1")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    t0 = time.perf_counter()
    runs = []
    for seed in range(args.runs):
        print(f"[{seed + 1}/{args.runs}] seed {seed}", flush=True)
        runs.append(one_run(seed, args.timeout))
        print(f"  final greedy return {runs[-1]['final_return']:.1f}", flush=True)
    result = {
        "machine": machine(),
        "command": COMMAND,
        "num_runs": args.runs,
        "runs": runs,
        "solved": sum(run["final_return"] >= SOLVED for run in runs),
        "benchmark_time_s": time.perf_counter() - t0,
    }
    write_results(os.path.join(args.out, common.script_name(__file__)), result, render)


if __name__ == "__main__":
    main()
