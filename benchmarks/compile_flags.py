"""XLA:CPU compile options for the test suite: the compile time and CPU of three small training
runs (probe-chain as `tests/conftest.tiny_config`, 2 seeds each of MinAtar Breakout and CartPole
on 2,000-step budgets), with most optimisations off (as the tests run) and a set of `XLA_FLAGS`.

    python benchmarks/compile_flags.py --rounds 3

Each (round, flag set) is a fresh Python process with no compilation cache; the flag sets
alternate within a round. Writes `benchmarks/experiments/compile_flags.{json,md}`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import machine, machine_line, write_results

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "experiments", "compile_flags")

FLAG_SETS = {
    "default": "",
    "no fusion emitters": "--xla_cpu_use_fusion_emitters=false",
    "no fusion emitters, 1 codegen split": (
        "--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1"
    ),
}

_CHILD = r"""
import json, os, resource, sys, time
import jax
jax.config.update("jax_disable_most_optimizations", True)
jax.config.update("jax_enable_compilation_cache", False)
total = {"compile_s": 0.0, "compiles": 0}
def listen(name, secs, **kw):
    if name == "/jax/core/compile/backend_compile_duration":
        total["compile_s"] += secs
        total["compiles"] += 1
jax.monitoring.register_event_duration_secs_listener(listen)
from jaxrl_fast import presets, train
from jaxrl_fast.config import DQNConfig, EnvConfig, NetworkConfig, ReplayConfig, TrainConfig
t0 = time.perf_counter()
probe = TrainConfig(env=EnvConfig(name="probe-chain", num_envs=4),
    network=NetworkConfig(hidden_sizes=(32,)), replay=ReplayConfig(capacity=400, batch_size=16),
    dqn=DQNConfig(learning_rate=1e-3, target_period=40, gamma=0.9), total_env_steps=880,
    learning_starts=80, train_frequency=4, num_seeds=2, num_chunks=4, eval_episodes=2)
train(probe, progress=False)
short = dict(num_chunks=1, num_seeds=2, eval_episodes=0, eval_every=None)
train(presets.get("minatar-breakout").replace(total_env_steps=2048, learning_starts=1024,
    replay={"capacity": 2048}, **short), progress=False)
train(presets.get("cartpole").replace(total_env_steps=2000, learning_starts=1000, **short),
    progress=False)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({**total, "wall_s": time.perf_counter() - t0,
    "cpu_s": ru.ru_utime + ru.ru_stime}))
"""


def render(result: dict) -> str:
    runs = result["runs"]
    base = {r["round"]: r for r in runs if r["flags"] == "default"}
    lines = [
        "# XLA:CPU compile options for the test suite",
        "",
        f"{machine_line(result['machine'])}. `python benchmarks/compile_flags.py "
        f"--rounds {result['rounds']}`: three small training runs per process (see the script), "
        "most optimisations off, no compilation cache, the flag sets alternating.",
        "",
        "| round | XLA_FLAGS | compile s | compiles | CPU s | wall s | compile / default |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        ratio = r["compile_s"] / base[r["round"]]["compile_s"]
        lines.append(
            f"| {r['round']} | {r['flags']} | {r['compile_s']:.1f} | {r['compiles']} "
            f"| {r['cpu_s']:.1f} | {r['wall_s']:.1f} | {ratio:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for r in range(args.rounds):
        for name, flags in FLAG_SETS.items():
            env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
            env["XLA_FLAGS"] = flags
            out = subprocess.run(
                [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
            )
            row = {"round": r + 1, "flags": name, **json.loads(out.stdout.splitlines()[-1])}
            print(row, flush=True)
            runs.append(row)
    result = {"machine": machine(), "rounds": args.rounds, "flag_sets": FLAG_SETS, "runs": runs}
    write_results(OUT, result, render)


if __name__ == "__main__":
    main()
