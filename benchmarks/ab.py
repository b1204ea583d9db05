"""A/B of two source trees of jaxrl_fast: fused-loop speed and cold compile, side by side.

One command, one machine; each run is a fresh Python process (so every compile is cold) with
`PYTHONPATH` set to one tree, and the trees alternate A, B, A, B, ...:

    git worktree add /tmp/base <commit>              # the tree to compare against
    python benchmarks/ab.py --a /tmp/base --b .      # about 15 min on a 2-core CPU
    python benchmarks/ab.py --a /tmp/base --b . --quick

Writes `benchmarks/experiments/ab[-quick].json` and `.md`. Cases (the public `train` API only, so
any commit since the Atari work runs them):

- `cartpole-1`, `cartpole-8`: `cartpole-cleanrl` with 1 and 8 seeds (`benchmarks/speedup.py`'s
  fused rows, shorter), one XLA device per core as there.
- `rainbow-2`: full Rainbow (C51 with its dueling form, noisy layers, double Q, 3-step PER) on
  the `minatar-breakout` preset with 2 seeds, 1,008 prefill steps and no final evaluation: the
  DQN family's heads and layers (`dqn_family.apply`; trees before it moved to `presets/` read
  `jaxrl_fast.dqn_family`). It first ran the `rainbow-minatar` preset as it stood before issue
  51 made that preset Revisiting Rainbow's (full Rainbow with lr 1e-4, batch 32 and 4 updates per
  16 env steps): `experiments/ab-quick-issue50-heads.md` is that case.
- `pong-1`, `pong-4`: `atari-pong` shrunk as in `benchmarks/atari.py` (4,096 prefill steps,
  then the training steps), 1 seed and 4 seeds over one pool; skipped without envpool.

The cartpole cases run without the final evaluation (`eval_episodes=0`): since 286a5ef its
program compiles in a background thread while the chunks run, which in these short runs shares
the cores with the timed chunks (runs before that change compiled it first and counted it as
compile time). Results written before this note include the evaluation.

Each row: training-phase env-steps/s (after the prefill) and compile seconds. The ratios are
B / A of the medians; on this shared VM two runs of one program differ by up to 25%.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import common
from common import machine, write_results  # noqa: E402

# The body each subprocess runs: it imports whichever jaxrl_fast PYTHONPATH points at.
CASE = r"""
import json, sys
case, steps = sys.argv[1], int(sys.argv[2])
from jaxrl_fast import parallel, presets
parallel.use_cpu_cores()
from jaxrl_fast import train
if case.startswith("cartpole"):
    cfg = presets.get("cartpole-cleanrl")
    # No final evaluation: its program would compile in a background thread while the timed
    # chunks run (trees since 286a5ef), and share their cores.
    cfg = cfg.replace(total_env_steps=cfg.learning_starts + steps, eval_episodes=0)
elif case.startswith("rainbow"):
    try:
        from jaxrl_fast.presets import dqn_family
    except ImportError:
        from jaxrl_fast import dqn_family
    cfg = dqn_family.apply("full-rainbow", presets.get("minatar-breakout"))
    cfg = cfg.replace(learning_starts=1_008, eval_episodes=0, num_chunks=4)
    cfg = cfg.replace(total_env_steps=cfg.learning_starts + steps)
else:
    cfg = presets.get("atari-pong").replace(learning_starts=4096)
    cfg = cfg.replace(total_env_steps=4096 + steps, eval_episodes=1, num_chunks=None)
cfg = cfg.replace(num_seeds=int(case.split("-")[1]))
r = train(cfg, progress=False)
import jaxrl_fast
out = {"sps": r.train_env_steps_per_s, "compile_s": r.compile_time_s, "module": jaxrl_fast.__file__}
print("RESULT " + json.dumps(out))
"""

CASES = {  # name -> training env steps per seed (full, quick)
    "cartpole-1": (100_000, 30_000),
    "cartpole-8": (50_000, 20_000),
    "rainbow-2": (16_000, 8_000),
    "pong-1": (2_048, 512),
    "pong-4": (2_048, 512),
}


def _has_envpool() -> bool:
    try:
        import envpool  # noqa: F401
    except ImportError:
        return False
    return True


def run_case(tree: str, case: str, steps: int, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CASE, case, str(steps)],
        env=env,
        cwd=os.path.abspath(tree),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{case} in {tree} failed:\n{out.stderr[-3000:]}")
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT ") :])
    module = result.pop("module")
    if not os.path.abspath(module).startswith(os.path.abspath(tree) + os.sep):
        raise RuntimeError(f"{case}: imported {module}, not the tree {tree}")
    return {**result, "process_s": time.perf_counter() - t}


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def main() -> None:
    parser = common.parser(__doc__, __file__, out=common.EXPERIMENTS)  # one-off A/Bs
    parser.add_argument("--a", required=True, help="source tree A (the reference)")
    parser.add_argument("--b", required=True, help="source tree B (the change)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per tree and case (>= 3)")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--tag", default="", help="output name suffix: ab[-quick][-TAG].json")
    args = parser.parse_args()
    for tree in (args.a, args.b):
        if not os.path.isfile(os.path.join(tree, "jaxrl_fast", "__init__.py")):
            raise SystemExit(f"--a/--b: {tree!r} holds no jaxrl_fast/ package")
    if args.repeats < 1:
        raise SystemExit(f"--repeats={args.repeats}: must be >= 1 (3 or more for a ratio)")
    cases = [c for c in args.cases if not c.startswith("pong") or _has_envpool()]
    t0 = time.perf_counter()
    runs: dict = {c: {"a": [], "b": []} for c in cases}
    for rep in range(args.repeats):
        for case in cases:
            steps = CASES[case][1 if args.quick else 0]
            for side in ("a", "b"):
                tree = getattr(args, side)
                print(f"[{rep + 1}/{args.repeats}] {case} {side.upper()} ({tree})", flush=True)
                runs[case][side].append(run_case(tree, case, steps, args.timeout))
    rows = {}
    for case, r in runs.items():
        med = {s: {k: _median([x[k] for x in r[s]]) for k in ("sps", "compile_s")} for s in r}
        rows[case] = {
            "steps": CASES[case][1 if args.quick else 0],
            "runs": r,
            "median": med,
            "sps_ratio_b_over_a": med["b"]["sps"] / med["a"]["sps"],
            "compile_ratio_b_over_a": med["b"]["compile_s"] / med["a"]["compile_s"],
        }
    out = {
        "machine": machine(),
        "a": os.path.abspath(args.a),
        "b": os.path.abspath(args.b),
        "a_commit": _commit(args.a),
        "b_commit": _commit(args.b),
        "repeats": args.repeats,
        "quick": args.quick,
        "cases": rows,
        "benchmark_time_s": time.perf_counter() - t0,
    }
    name = "ab" + ("-quick" if args.quick else "") + (f"-{args.tag}" if args.tag else "")
    stem = os.path.join(args.out, name)
    write_results(stem, out, render)


def _commit(tree: str) -> str:
    try:
        head = subprocess.run(
            ["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", tree, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return head + ("+changes" if dirty else "") if head else "unknown"


def render(r: dict) -> str:
    m = r["machine"]
    lines = [
        f"# A/B: {r['b_commit']} (B) against {r['a_commit']} (A){' (quick)' if r['quick'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; jax {m['jax']} on "
        f"{m['backend']}. Produced by `python benchmarks/ab.py --a A --b B"
        f"{' --quick' if r['quick'] else ''}` in {r['benchmark_time_s']:.0f} s: {r['repeats']} "
        "fresh processes per tree and case, alternating A and B. Training-phase env-steps/s "
        "(after the prefill) and cold compile seconds, medians; ratios are B / A.",
        "",
        "| case | train steps per seed | env-steps/s A | env-steps/s B | B / A | compile s A "
        "| compile s B | B / A |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, c in r["cases"].items():
        a, b = c["median"]["a"], c["median"]["b"]
        lines.append(
            f"| {case} | {c['steps']:,} | {a['sps']:,.0f} | {b['sps']:,.0f} | "
            f"{c['sps_ratio_b_over_a']:.2f} | {a['compile_s']:.1f} | {b['compile_s']:.1f} | "
            f"{c['compile_ratio_b_over_a']:.2f} |"
        )
    lines += ["", "Every run (env-steps/s, A then B):", ""]
    for case, c in r["cases"].items():
        fmt = lambda xs: ", ".join(f"{x['sps']:,.0f}" for x in xs)  # noqa: E731
        lines.append(f"- {case}: A {fmt(c['runs']['a'])}; B {fmt(c['runs']['b'])}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
