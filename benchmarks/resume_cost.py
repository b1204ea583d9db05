"""What a kill and a resume cost: a run killed half way and resumed, against the same run whole.

    python benchmarks/resume_cost.py                       # cartpole preset, 3 rounds (~2 min)
    python benchmarks/resume_cost.py --preset minatar-breakout --total-env-steps 50000 --rounds 3

Each round runs, alternating, in fresh processes with a cold compile cache (`--no-cache`, as a new
Colab runtime has):
- **whole**: `jaxrl-fast train --run-dir A` start to end;
- **killed + resumed**: `jaxrl-fast train --run-dir B`, SIGKILLed once half of its chunks are in
  `metrics.jsonl` (not aligned with a checkpoint, so the chunks since the last one are lost), then
  `jaxrl-fast train --resume B` to the end.
The cost of the kill is `(killed process + resume process) - whole process`: the second start-up
and compile, the restore, and the chunks run again. Checks that both runs end with the same
`params_sha256`. Writes `benchmarks/results/resume_cost/resume_cost.json` and `.md`.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import common
from common import machine, machine_line, write_results  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CLI = [sys.executable, "-m", "jaxrl_fast.cli", "train", "--no-cache", "--no-progress"]


def _summary(run_dir: str) -> dict:
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def _rows(run_dir: str) -> int:
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            return sum(1 for line in f if line.endswith("\n"))
    except FileNotFoundError:
        return 0


def whole(args_: list[str], run_dir: str, timeout: float) -> dict:
    t = time.perf_counter()
    proc = subprocess.run(
        [*CLI, *args_, "--run-dir", run_dir], capture_output=True, text=True, timeout=timeout,
        cwd=ROOT,
    )  # fmt: skip
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    s = _summary(run_dir)
    return {"process_s": wall, "compile_s": s["compile_time_s"], "summary": s}


def killed_and_resumed(args_: list[str], run_dir: str, rows_at_kill: int, timeout: float) -> dict:
    t = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, *args_, "--run-dir", run_dir], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        cwd=ROOT,
    )  # fmt: skip
    while _rows(run_dir) < rows_at_kill:
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended before the kill: {proc.stderr.read()[-3000:]}")
        if time.perf_counter() - t > timeout:
            proc.kill()
            raise RuntimeError("timed out before the kill")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_s = time.perf_counter() - t
    steps = sorted(int(d) for d in os.listdir(os.path.join(run_dir, "checkpoints")) if d.isdigit())
    t = time.perf_counter()
    res = subprocess.run(
        [*CLI, "--resume", run_dir], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    resume_s = time.perf_counter() - t
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    s = _summary(run_dir)
    return {
        "killed_process_s": killed_s,
        "resume_process_s": resume_s,
        "chunks_logged_at_kill": rows_at_kill,
        "checkpoint_at_kill": steps[-1] if steps else None,
        "resume_compile_s": s["compile_time_s"],
        "resume_run_s": s["run_time_s"],
        "summary": s,
    }


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--total-env-steps", type=int)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    args = parser.parse_args()
    run_args = ["--preset", args.preset, "--seeds", str(args.seeds), "--eval-episodes", "1"]
    if args.total_env_steps:
        run_args += ["--total-env-steps", str(args.total_env_steps)]
    probe = subprocess.run(
        [*CLI, *run_args, "--print-config"], capture_output=True, text=True, check=True, cwd=ROOT
    )
    config = json.loads(probe.stdout[probe.stdout.index("{") :])
    from jaxrl_fast.config import options

    chunks = options.from_dict(config).chunks
    rows_at_kill = (chunks // 2) * args.seeds
    rounds = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="jaxrl_fast-resume-") as tmp:
            a = whole(run_args, os.path.join(tmp, "whole"), args.timeout)
            b = killed_and_resumed(run_args, os.path.join(tmp, "kr"), rows_at_kill, args.timeout)
        same = [x["params_sha256"] for x in a.pop("summary")["seeds"]] == [
            x["params_sha256"] for x in b.pop("summary")["seeds"]
        ]
        cost = b["killed_process_s"] + b["resume_process_s"] - a["process_s"]
        rounds.append({**a, **b, "cost_s": cost, "same_params_sha256": same})
        print(f"round {i}: whole {a['process_s']:.1f}s, killed {b['killed_process_s']:.1f}s + "
              f"resumed {b['resume_process_s']:.1f}s, cost {cost:.1f}s, same hashes {same}",
              flush=True)  # fmt: skip
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if k.endswith("_s")}
    result = {
        "machine": machine(),
        "preset": args.preset,
        "total_env_steps": config["total_env_steps"],
        "num_seeds": args.seeds,
        "chunks": chunks,
        "checkpoint_every_chunks": "default (about 10% of the run)",
        "rounds": rounds,
        "median": med,
        "all_same_params_sha256": all(r["same_params_sha256"] for r in rounds),
    }
    write_results(os.path.join(args.out, "resume_cost"), result, render)


def render(r: dict) -> str:
    m = r["median"]
    lines = [
        f"# Resume cost: `{r['preset']}`, {r['num_seeds']} seed(s), "
        f"{r['total_env_steps']:,} env steps, {r['chunks']} chunks",
        "",
        machine_line(r["machine"]),
        "",
        "Fresh processes, cold compile cache (`--no-cache`), alternating; killed with SIGKILL once "
        "half the chunks were logged, then `jaxrl-fast train --resume`. Medians of "
        f"{len(r['rounds'])} rounds (`python benchmarks/resume_cost.py`).",
        "",
        "| | seconds |",
        "|---|---|",
        f"| whole run (one process) | {m['process_s']:.1f} |",
        f"| killed run, until the kill | {m['killed_process_s']:.1f} |",
        f"| resume process, to the end | {m['resume_process_s']:.1f} |",
        f"| of which compile | {m['resume_compile_s']:.1f} |",
        f"| **cost of the kill** (killed + resumed - whole) | **{m['cost_s']:.1f}** |",
        "",
        f"Same `params_sha256` as the whole run in every round: {r['all_same_params_sha256']}.",
        "",
        "| round | whole s | killed s | resumed s | checkpoint (chunks) at the kill | cost s |",
        "|---|---|---|---|---|---|",
    ]
    for i, x in enumerate(r["rounds"]):
        lines.append(
            f"| {i} | {x['process_s']:.1f} | {x['killed_process_s']:.1f} | "
            f"{x['resume_process_s']:.1f} | {x['checkpoint_at_kill']} | {x['cost_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
