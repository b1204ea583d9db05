"""Paired A/B of two source trees' compiled `run_chunk`: steady state, chunk by chunk.

`ab.py` compares whole fresh processes; on this shared VM their speed is bimodal (runs of one
program land near 25k or near 37k env-steps/s), so a handful of them cannot separate a 10%
change from the noise. Here two persistent worker processes (one per tree) compile the
`cartpole-cleanrl` loop once, then take turns running `--chunks` chunks each, never at the
same time, the order flipping every round, so both trees see the same noise windows:

    python benchmarks/ab_paired.py --a /tmp/base --b . --seeds 1 --rounds 12

Prints the per-round time ratios A / B (> 1: B is faster) and their median.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import common

WORKER = r"""
import sys, time, json
from jaxrl_fast import parallel, presets
parallel.use_cpu_cores()
import jax
try:
    from jaxrl_fast.loop import make_train
except ImportError:  # trees from before the loop / train split
    from jaxrl_fast.loop import make_train
seeds = int(sys.argv[1])
cfg = presets.get("cartpole-cleanrl")
cfg = cfg.replace(total_env_steps=cfg.learning_starts + 100_000, num_seeds=seeds)
fns = make_train(cfg)
keys = jax.device_put(jax.random.split(jax.random.key(0), seeds), jax.devices()[0])
runner = jax.jit(fns.init)(keys)
run_chunk = jax.jit(fns.run_chunk, donate_argnums=0).lower(runner).compile()
runner, m = run_chunk(runner)
jax.block_until_ready(m)
print("READY", flush=True)
for line in sys.stdin:
    t = time.perf_counter()
    for _ in range(int(line)):
        runner, m = run_chunk(runner)
    jax.block_until_ready(m)
    print(json.dumps(time.perf_counter() - t), flush=True)
"""


def main() -> None:
    parser = common.parser(__doc__, __file__, out=common.EXPERIMENTS)
    parser.add_argument("--a", required=True, help="source tree A (the reference)")
    parser.add_argument("--b", required=True, help="source tree B (the change)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=12, help="turns per tree (>= 3)")
    parser.add_argument("--chunks", type=int, default=3, help="chunks per turn")
    parser.add_argument("--name", default="", help="write OUT/NAME.{json,md}; default: print only")
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error(f"--rounds={args.rounds}: at least 3 turns per tree")
    workers = []
    for tree in (args.a, args.b):
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        p = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(args.seeds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        if p.stdout.readline().strip() != "READY":
            raise SystemExit(f"the worker for {tree} did not start")
        workers.append(p)
    times: tuple[list[float], list[float]] = ([], [])
    for r in range(args.rounds):
        for i in (0, 1) if r % 2 == 0 else (1, 0):
            workers[i].stdin.write(f"{args.chunks}\n")
            workers[i].stdin.flush()
            times[i].append(float(workers[i].stdout.readline()))
    for p in workers:
        p.stdin.close()
        p.wait(timeout=60)
    ratios = [a / b for a, b in zip(*times, strict=True)]
    result = {
        "a": _describe(args.a),
        "b": _describe(args.b),
        "seeds": args.seeds,
        "rounds": args.rounds,
        "chunks_per_turn": args.chunks,
        "median_s_a": statistics.median(times[0]),
        "median_s_b": statistics.median(times[1]),
        "median_ratio_a_over_b": statistics.median(ratios),
        "ratios": [round(x, 3) for x in ratios],
    }
    if not args.name:
        print(json.dumps(result))
        return
    result["machine"] = common.machine()
    common.write_results(os.path.join(args.out, args.name), result, _render)


def _describe(tree: str) -> str:
    """The tree's commit (short hash) or, outside git, its path."""
    try:
        out = subprocess.run(
            ["git", "-C", tree, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return tree


def _render(r: dict) -> str:
    import common

    return (
        f"# Paired A/B: {r['b']} (B) against {r['a']} (A), `run_chunk` steady state\n\n"
        f"Produced by `python benchmarks/ab_paired.py --a A --b B --seeds {r['seeds']}"
        f" --rounds {r['rounds']} --chunks {r['chunks_per_turn']}`: two persistent processes, one"
        " compiled `cartpole-cleanrl` loop each, taking turns (order flipped every round).\n\n"
        f"{common.machine_line(r['machine'])}.\n\n"
        "| seeds | turns per tree | median s per turn A | B | A / B (> 1: B faster) |\n"
        "|---|---|---|---|---|\n"
        f"| {r['seeds']} | {r['rounds']} | {r['median_s_a']:.3f} | {r['median_s_b']:.3f}"
        f" | {r['median_ratio_a_over_b']:.3f} |\n\n"
        f"Per-turn ratios A / B: {', '.join(str(x) for x in r['ratios'])}\n"
    )


if __name__ == "__main__":
    main()
