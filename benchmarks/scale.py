"""Data-parallel scaling: 1 device, 2 local devices, 2 local processes; fp32 vs 1-bit exchange.

    python benchmarks/scale.py                 # ~25 min on 2 cores: throughput rounds + parity
    python benchmarks/scale.py --quick         # one round, small budgets (a smoke run)

Every run is a fresh `jaxrl-fast train` process (`--no-cache`, `--no-progress`, `--out DIR`); the
2-process runs go through `jaxrl-fast launch --local 2`, one CPU device per process, gloo
collectives over 127.0.0.1. The throughput modes alternate round by round:

- `1 device`: one seed, no replicas (the yardstick);
- `2 dev, data 2`: one seed, 2 replicas on 2 local devices, fp32 gradients averaged every update;
- `2 dev, data 2, no exchange`: the same with `sync="every:<all updates>"` (one average, at the
  end): the run without its communication, so `1 - its time / the every-step time` is
  communication's share of the step;
- `2 dev, data 2, onebit`, `2 dev, data 2, every:50`;
- `2 proc, data 2` and `2 proc, data 2, onebit`: the same over 2 processes.

Figures: env-steps/s over all replicas (training phase), updates/s per seed, bytes a replica puts
into the exchange per update (`parallel.Exchange.bytes_per_update`), final greedy return and
scaling efficiency `env-steps/s / (replicas x the 1-device env-steps/s)`. Each replica runs the
config's whole schedule (so 2 replicas collect twice the env steps, with twice the batch).

The parity part trains `--parity-seeds` seeds of each `--parity-presets` preset (default CartPole
and MinAtar-Breakout, each preset's full budget) with 2 replicas over 2 processes, fp32 vs 1-bit
exchange, and compares the final returns; `--parity-only` redoes just that part into the
existing results.
Writes `benchmarks/results/scale.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

from _machine import machine, machine_line, write_results  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
JAXRL = [sys.executable, "-m", "jaxrl_fast.cli"]
TRAIN = ["train", "--no-cache", "--no-progress"]


def _modes(total_updates: int) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (launcher prefix, train flags)."""
    local, launch = [], ["launch", "--local", "2", "--timeout", "900", "--"]
    return {
        "1 device": (local, []),
        "2 dev, data 2": (local, ["--parallel.data", "2"]),
        "2 dev, data 2, no exchange": (
            local,
            ["--parallel.data", "2", "--parallel.sync", f"every:{total_updates}"],
        ),
        "2 dev, data 2, onebit": (local, ["--parallel.data", "2", "--parallel.compression", "onebit"]),
        "2 dev, data 2, every:50": (local, ["--parallel.data", "2", "--parallel.sync", "every:50"]),
        "2 proc, data 2": (launch, ["--parallel.data", "2"]),
        "2 proc, data 2, onebit": (launch, ["--parallel.data", "2", "--parallel.compression", "onebit"]),
    }  # fmt: skip


def _run(prefix: list[str], flags: list[str], base: list[str]) -> dict:
    out = tempfile.mkdtemp(prefix="jaxrl_scale_")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    cmd = [*JAXRL, *prefix, *TRAIN, *base, *flags, "--out", out]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=1200)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    return {
        "process_wall_s": wall,
        "run_time_s": s["run_time_s"],
        "compile_time_s": s["compile_time_s"],
        "env_steps_per_s": s["train_env_steps_per_s"],
        "mean_final_return": s["mean_final_return"],
        "final_returns": [x["final_return"] for x in s["seeds"]],
        "num_devices": s["num_devices"],
    }


def _bytes_per_update(preset: str, flags: list[str]) -> float:
    """Bytes one replica puts into the exchange per update, from the network's parameters."""
    import jax

    from jaxrl_fast import options, presets
    from jaxrl_fast.loop import make_train
    from jaxrl_fast.parallel import make_exchange

    cfg = presets.get(preset)
    changes = {flags[i][2:].replace("-", "_"): flags[i + 1] for i in range(0, len(flags), 2)}
    cfg = options.apply(
        cfg, {k: options.parse_value(v, options.field(k)) for k, v in changes.items()}
    )
    one = cfg.replace(parallel={"data": 1, "sync": "every_step", "compression": "none"})
    fns = make_train(one)
    runner = jax.eval_shape(fns.init, jax.random.split(jax.random.key(0), one.num_seeds))
    params = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), runner.seeds.agent.params
    )
    return make_exchange(cfg.parallel, cfg.total_updates).bytes_per_update(params)  # fmt: skip


def _parity(args: argparse.Namespace) -> dict:
    """Per preset: `--parity-seeds` seeds, 2 replicas over 2 processes, fp32 vs 1-bit exchange."""
    from jaxrl_fast import presets

    launch = ["launch", "--local", "2", "--timeout", "1500", "--"]
    parity = {}
    for preset in args.parity_presets.split(","):
        steps = (
            presets.get(preset).total_env_steps if args.parity_steps is None else args.parity_steps
        )
        rec = {"env_steps_per_replica": steps, "seeds": args.parity_seeds, "over": "2 processes"}
        for comp in ("none", "onebit"):
            flags = ["--parallel.data", "2", "--parallel.compression", comp]
            flags += ["--seeds", str(args.parity_seeds)]
            rec[comp] = _run(launch, flags, ["--preset", preset, "--total-env-steps", str(steps)])
            print(f"parity {preset} {comp}: {rec[comp]['final_returns']}", flush=True)
        parity[preset] = rec
    return parity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--total-env-steps", type=int, default=31_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parity-seeds", type=int, default=4)
    parser.add_argument("--parity-presets", default="cartpole,minatar-breakout")
    parser.add_argument("--parity-steps", type=int, default=None, help="default: each preset's own")
    parser.add_argument("--parity-only", action="store_true", help="redo only the parity part")
    parser.add_argument("--quick", action="store_true", help="1 round, 11k steps, 2 parity seeds")
    args = parser.parse_args()
    if args.quick:
        args.total_env_steps, args.rounds, args.parity_seeds = 11_000, 1, 2
        args.parity_presets, args.parity_steps = "cartpole", 11_000
    path = os.path.join(ROOT, "benchmarks", "results", "scale")
    if args.parity_only:
        with open(path + ".json") as f:
            result = json.load(f)
        result["parity"] = _parity(args)
        write_results(path, result, render)
        return
    from jaxrl_fast import presets

    cfg = presets.get(args.preset).replace(total_env_steps=args.total_env_steps, num_chunks=None)
    base = ["--preset", args.preset, "--total-env-steps", str(args.total_env_steps)]
    modes = _modes(cfg.total_updates)
    runs: dict[str, list[dict]] = {name: [] for name in modes}
    for r in range(args.rounds):
        for name, (prefix, flags) in modes.items():
            rec = _run(prefix, flags, base)
            runs[name].append(rec)
            print(f"round {r}: {name}: {rec['env_steps_per_s']:,.0f} env-steps/s, "
                  f"return {rec['mean_final_return']}", flush=True)  # fmt: skip
    rows = {}
    one_sps = statistics.median(x["env_steps_per_s"] for x in runs["1 device"])
    for name, (_, flags) in modes.items():
        sps = statistics.median(x["env_steps_per_s"] for x in runs[name])
        replicas = 2 if "data 2" in name else 1
        run_time = statistics.median(x["run_time_s"] for x in runs[name])
        rows[name] = {
            "env_steps_per_s": sps,
            "updates_per_s": cfg.total_updates / run_time,
            "run_time_s": run_time,
            "bytes_per_update": _bytes_per_update(args.preset, flags) if flags else 0.0,
            "mean_final_return": statistics.median(
                x["mean_final_return"] for x in runs[name] if x["mean_final_return"] is not None
            ),
            "scaling_efficiency": sps / (replicas * one_sps),
        }
    for kind in ("2 dev", "2 proc"):
        every, none = rows.get(f"{kind}, data 2"), rows.get("2 dev, data 2, no exchange")
        if every and none:
            every["comm_share"] = max(0.0, 1 - none["run_time_s"] / every["run_time_s"])
    parity = _parity(args)
    result = {
        "machine": machine(),
        "preset": args.preset,
        "total_env_steps_per_replica": args.total_env_steps,
        "total_updates": cfg.total_updates,
        "rounds": args.rounds,
        "runs": runs,
        "rows": rows,
        "parity": parity,
    }
    write_results(path, result, render)


def render(res: dict) -> str:
    lines = [
        f"# Data-parallel scaling ({res['preset']})",
        "",
        machine_line(res["machine"]),
        "",
        f"{res['total_env_steps_per_replica']:,} env steps and {res['total_updates']:,} updates "
        f"per replica; medians of {res['rounds']} alternating round(s), fresh processes, cold "
        "compile. `python benchmarks/scale.py` re-runs it.",
        "",
        "| mode | env-steps/s (all replicas) | updates/s | bytes/update/replica | comm share "
        "| scaling eff. | final return |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in res["rows"].items():
        comm = f"{r['comm_share']:.0%}" if "comm_share" in r else "-"
        lines.append(
            f"| {name} | {r['env_steps_per_s']:,.0f} | {r['updates_per_s']:,.0f} | "
            f"{r['bytes_per_update']:,.0f} | {comm} | {r['scaling_efficiency']:.2f} | "
            f"{r['mean_final_return']:.1f} |"
        )
    for preset, p in res["parity"].items():
        lines += [
            "",
            f"## Learning parity on {preset}: fp32 vs 1-bit exchange ({p['seeds']} seeds, 2 "
            f"replicas over {p['over']}, {p['env_steps_per_replica']:,} env steps per replica)",
            "",
            "| exchange | final greedy return per seed | mean | stdev |",
            "|---|---|---:|---:|",
        ]
        for comp in ("none", "onebit"):
            rets = [x for x in p[comp]["final_returns"] if x is not None]
            sd = statistics.stdev(rets) if len(rets) > 1 else 0.0
            lines.append(
                f"| {comp} | {', '.join(f'{x:.1f}' for x in rets)} | "
                f"{sum(rets) / max(len(rets), 1):.1f} | {sd:.1f} |"
            )
    lines += [
        "",
        "comm share: `1 - run time without exchange / run time with it` (the no-exchange run "
        "averages once, at the end). Scaling efficiency: env-steps/s over replicas x the "
        "1-device env-steps/s.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
