"""The GPU kit's run: every section in its own process under its own time limit, inside a budget.

    benchmarks/gpu/run.sh --out DIR                     # on the device (installs the kit first)
    benchmarks/gpu/run.sh --cpu --tiny --out DIR        # the CPU dress rehearsal (the tests run it)
    benchmarks/gpu/run.sh --sections cartpole,learn_pqn --budget 120 --out DIR

`run.sh` installs the kit's wheels and puts the project on the path, then runs this. Sections,
most valuable first (`PLAN`): every module imported (failures by name), the `gpu`-marked tests,
CartPole at 1 / 64 / 1,024 seeds (auto, fp32, bf16), the PureJaxRL-style reference loop beside
ours, MinAtar Breakout with DQN, PQN and Rainbow, the Nature-CNN update per precision, PER
against the ring buffer, the L3 tier's cost, Atari (where envpool is installed), then the wall
time to a score: CartPole at 1,024 seeds to 475 and PQN on MinAtar Breakout to 20.

A section's limit is its share of `--budget` (default 450 s: the run ends within 8 minutes with
the install) plus what the sections before it left unused; a section past its limit is stopped
and the next one runs. `DIR/gpu_run.json` and `.md` (`gpu_run-tiny.*` for `--tiny`) are written
again after every section, so a run cut short keeps what it finished. This process never starts
JAX: the device is described by the first section that ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name -> (share of the budget in seconds at the default 450 s, what it measures)
PLAN = {
    "imports": (20, "every module of the package, the benchmarks and the kit imported"),
    "tests": (90, "the `gpu`-marked tests: precision, chunking, resume, device against CPU"),
    "cartpole": (55, "CartPole DQN at 1 / 64 / 1,024 seeds; fp32-highest and bf16 at 1,024"),
    "reference": (45, "ours against the PureJaxRL-style loop on CartPole, in turns"),
    "minatar": (50, "MinAtar Breakout: DQN, PQN and Rainbow at 8 seeds"),
    "precision": (30, "Nature-CNN update: fp32 / TF32 / bf16 / fp16 at batch 32 and 256"),
    "replay": (30, "PER (sum tree) against the ring buffer at 1e6 rows, and flashbax"),
    "l3": (25, "the L3 host tier's cost per read call inside the fused loop"),
    "atari": (15, "Pong fused at 1 and 8 seeds, where envpool is installed"),
    "learn_cartpole": (40, "wall time: CartPole at 1,024 seeds to a mean of 475"),
    "learn_pqn": (50, "wall time: PQN on MinAtar Breakout to a mean of 20"),
}
DEFAULT_BUDGET_S = sum(share for share, _ in PLAN.values())  # 450


def host() -> dict:
    """The machine as this process sees it without starting JAX (the sections add the device)."""
    cpu = platform.processor() or "unknown"
    if os.path.exists("/proc/cpuinfo"):  # Linux: the model name (platform.processor() is terse)
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "jax": "unknown", "backend": "unknown"}  # fmt: skip


def limits(names, budget_s: float) -> dict[str, float]:
    """Each section's share of `budget_s`, in proportion to `PLAN` (they add up to it)."""
    total = sum(PLAN[n][0] for n in names)
    return {n: budget_s * PLAN[n][0] / total for n in names}


def _write(stem: str, report: dict) -> None:
    """`stem.json` and `stem.md`, each written whole to a temporary name first."""
    from report import render

    for path, body in (
        (stem + ".json", json.dumps(report, indent=2)),
        (stem + ".md", render(report)),
    ):
        with open(path + ".tmp", "w") as f:
            f.write(body)
        os.replace(path + ".tmp", path)


def run(names, budget_s: float, tiny: bool, cpu: bool, out_dir: str) -> dict:
    shares = limits(names, budget_s)
    print(f"gpu kit: {len(names)} section(s) in at most {budget_s:.0f} s:", flush=True)
    for n in names:
        print(f"  {n:<15} {shares[n]:>5.0f} s  {PLAN[n][1]}", flush=True)
    print(f"  {'total':<15} {sum(shares.values()):>5.0f} s", flush=True)
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, "gpu_run-tiny" if tiny else "gpu_run")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cpu:
        env["JAX_PLATFORMS"] = "cpu"
    report = {
        "machine": host(),
        "device_kind": "unknown",
        "tiny": tiny,
        "cpu": cpu,
        "command": "benchmarks/gpu/run.sh " + " ".join(sys.argv[1:]),
        "budget_s": budget_s,
        "limits_s": shares,
        "sections": {},
    }
    t0, spare = time.perf_counter(), 0.0
    for k, name in enumerate(names, 1):
        limit = shares[name] + spare
        print(f"[{k}/{len(names)}] {name} (limit {limit:.0f} s)", flush=True)
        path = f"{stem}.{name}.part.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--section", name, "--to", path,
               "--limit", str(limit)] + (["--tiny"] if tiny else [])  # fmt: skip
        t = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, timeout=limit, text=True, stdout=sys.stdout,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            if proc.returncode == 0 and os.path.exists(path):
                with open(path) as f:
                    rec = json.load(f)
            else:
                err = (proc.stderr or "").strip().splitlines()
                sys.stderr.write("\n".join(err[-20:]) + "\n")
                rec = {
                    "status": "error",
                    "error": " | ".join(err[-3:]) or f"exit {proc.returncode}",
                }
        except subprocess.TimeoutExpired:
            rec = {"status": "timeout", "error": f"stopped at its limit of {limit:.0f} s"}
        if os.path.exists(path):
            os.remove(path)
        device = rec.pop("device", None)
        if device and report["machine"]["backend"] == "unknown":
            report["machine"].update(jax=device["jax"], backend=device["backend"])
            report["device_kind"] = device["device_kind"]
        failed = (rec.get("result") or {}).get("failed") or (rec.get("result") or {}).get(
            "failures"
        )
        if rec["status"] == "ok" and failed:
            rec["status"] = "failed"  # imports or tests that failed: the section ran, they did not
        rec["wall_s"], rec["limit_s"] = time.perf_counter() - t, limit
        spare = max(0.0, limit - rec["wall_s"])
        report["sections"][name] = rec
        report["benchmark_time_s"] = time.perf_counter() - t0
        _write(stem, report)  # after every section
        print(f"  {name}: {rec['status']} in {rec['wall_s']:.1f} s", flush=True)
    print(f"wrote {stem}.json and {stem}.md", flush=True)
    return report


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--out", metavar="DIR", help="folder for the results (default: "
                   "benchmarks/results/gpu/)")  # fmt: skip
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                   help="seconds for all sections together (default %(default)s)")  # fmt: skip
    p.add_argument("--sections", default=",".join(PLAN),
                   help=f"comma-separated subset of {','.join(PLAN)}")  # fmt: skip
    p.add_argument("--tiny", action="store_true", help="smoke sizes (not results)")
    p.add_argument("--cpu", action="store_true", help="run on the CPU (JAX_PLATFORMS=cpu)")
    p.add_argument("--section", help=argparse.SUPPRESS)  # the child's: one section
    p.add_argument("--to", help=argparse.SUPPRESS)
    p.add_argument("--limit", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.section:
        import sections

        deadline = time.monotonic() + (args.limit or float("inf"))
        return sections.run_one(args.section, args.tiny, args.to, deadline)
    names = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in names if s not in PLAN]
    if unknown or not names:
        p.error(f"--sections: unknown {unknown}; choose from {','.join(PLAN)}")
    if len(set(names)) != len(names):
        p.error(f"--sections: {args.sections} names a section twice")
    if args.budget <= 0:
        p.error(f"--budget {args.budget:g}: expected seconds > 0")
    out = args.out or os.path.join(ROOT, "benchmarks", "results", "gpu")
    run(names, args.budget, args.tiny, args.cpu, out)


if __name__ == "__main__":
    main()
