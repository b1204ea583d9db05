"""Data-parallel scaling: 1 device, 2 local devices, 2 local processes; fp32 vs 1-bit exchange.

    python benchmarks/scale.py                 # ~30 min on 2 cores: throughput rounds + parity
    python benchmarks/scale.py --quick         # one round, small budgets (a smoke run)
    python benchmarks/scale.py --throughput-only   # the rounds and the issue's check; keeps parity
    python benchmarks/scale.py --parity-only       # only the parity runs
    python benchmarks/scale.py --render-only       # the Markdown again from the JSON

Every run is a fresh `jaxrl-fast train` process (`--no-cache`, `--no-progress`, `--out DIR`); the
2-process runs go through `jaxrl-fast launch --local 2`, one CPU device per process, gloo
collectives over 127.0.0.1. The throughput modes alternate round by round:

- `1 device`: one seed, no replicas (the yardstick);
- `2 dev, data 2`: one seed, 2 replicas on 2 local devices, fp32 gradients averaged every update;
- `2 dev, data 2, no exchange`: the same with `sync="every:<all updates>"` (one average, at the
  end): the run without its communication, so `1 - its time / the every-step time` is
  communication's share of the step;
- `2 dev, data 2, onebit`, `2 dev, data 2, every:50`;
- `2 proc, data 2`, `2 proc, data 2, no exchange` and `2 proc, data 2, onebit`: the same over
  2 processes (communication's share measured against the no-exchange run of its transport).

Then issue 15's check as written: `jaxrl-fast launch --local 2 -- train --preset cartpole
--parallel.data 2 --out DIR` with the preset's whole budget (solved: greedy return >= 475).

Figures: env-steps/s over all replicas (training phase), updates/s per seed, bytes a replica puts
into the exchange per update (`parallel.Exchange.bytes_per_update`), final greedy return and
scaling efficiency `env-steps/s / (replicas x the 1-device env-steps/s)`. Each replica runs the
config's whole schedule (so 2 replicas collect twice the env steps, with twice the batch).

The parity part trains `--parity-seeds` seeds of each `--parity-presets` preset (default CartPole
and MinAtar-Breakout, each preset's full budget) with 2 replicas over 2 processes, fp32 vs 1-bit
exchange, and compares the final returns; `--parity-only` redoes just that part into the
existing results.
Writes `benchmarks/results/scale/scale.json` and `.md`.
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

import common  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402

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
        "2 proc, data 2, no exchange": (
            launch,
            ["--parallel.data", "2", "--parallel.sync", f"every:{total_updates}"],
        ),
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
        "env_steps_per_replica": s["env_steps_per_seed"],
    }


def _bytes_per_update(preset: str, flags: list[str]) -> float:
    """Bytes one replica puts into the exchange per update, from the network's parameters."""
    import jax

    from jaxrl_fast import presets
    from jaxrl_fast.config import options
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


DONE_WHEN = ["launch", "--local", "2", "--timeout", "900", "--"], [
    "--preset", "cartpole", "--parallel.data", "2"
]  # fmt: skip


def _done_when() -> dict:
    """Issue 15's check as written: `jaxrl-fast launch --local 2 -- train --preset cartpole
    --parallel.data 2 --out DIR`, the preset's whole budget."""
    prefix, flags = DONE_WHEN
    rec = _run(prefix, flags, [])
    rec["command"] = " ".join(["jaxrl-fast", *prefix, "train", *flags, "--out", "DIR"])
    print(f"done-when: {rec['final_returns']}", flush=True)
    return rec


def _nature_cnn_bytes() -> dict:
    """Parameters of the Nature-DQN CNN (`atari-pong`: 84x84x4 frames, 6 actions), and what a
    replica exchanges per update with fp32 gradients or 1-bit momentum (no env needed)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxrl_fast import presets
    from jaxrl_fast.agent.network import QNetwork
    from jaxrl_fast.envs.base import EnvSpec
    from jaxrl_fast.parallel import onebit

    cfg = presets.get("atari-pong")
    spec = EnvSpec("Pong-v5", (84, 84, 4), np.uint8, 6, cfg.env.num_envs, 27_000)
    net = QNetwork.from_config(cfg.network, spec, cfg.algo)
    obs = jax.ShapeDtypeStruct((1, 84, 84, 4), jnp.uint8)
    params = jax.eval_shape(net.init, jax.random.key(0), obs)
    return {
        "params": int(sum(x.size for x in jax.tree.leaves(params))),
        "tensors": len(jax.tree.leaves(params)),
        "fp32_bytes": onebit.full_bytes(params),
        "onebit_bytes": onebit.compressed_bytes(params),
        "batch_size": cfg.replay.batch_size,
    }


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
    parser = common.parser(__doc__, __file__, quick="1 round, 11k steps, 2 parity seeds")
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--total-env-steps", type=int, default=31_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parity-seeds", type=int, default=4)
    parser.add_argument("--parity-presets", default="cartpole,minatar-breakout")
    parser.add_argument("--parity-steps", type=int, default=None, help="default: each preset's own")
    parser.add_argument("--parity-only", action="store_true", help="redo only the parity part")
    parser.add_argument("--render-only", action="store_true", help="rewrite the .md from the .json")
    parser.add_argument(
        "--throughput-only", action="store_true", help="redo the throughput rounds, keep the parity"
    )
    args = parser.parse_args()
    if args.quick:
        args.total_env_steps, args.rounds, args.parity_seeds = 11_000, 1, 2
        args.parity_presets, args.parity_steps = "cartpole", 11_000
    path = common.stem(args, "scale")
    if args.parity_only:
        with open(path + ".json") as f:
            result = json.load(f)
        result["parity"] = _parity(args)
        result["nature_cnn"] = _nature_cnn_bytes()
        write_results(path, result, render)
        return
    if args.render_only:
        with open(path + ".json") as f:
            result = json.load(f)
        result["nature_cnn"] = _nature_cnn_bytes()
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
    for kind in ("2 dev", "2 proc"):  # each against the run without exchange on its transport
        none = rows.get(f"{kind}, data 2, no exchange")
        for name in (f"{kind}, data 2", f"{kind}, data 2, onebit"):
            if rows.get(name) and none:
                rows[name]["comm_share"] = 1 - none["run_time_s"] / rows[name]["run_time_s"]
    done_when = _done_when()
    if args.throughput_only:
        with open(path + ".json") as f:
            parity = json.load(f)["parity"]
    else:
        parity = _parity(args)
    result = {
        "machine": machine(),
        "done_when": done_when,
        "preset": args.preset,
        "total_env_steps_per_replica": args.total_env_steps,
        "total_updates": cfg.total_updates,
        "rounds": args.rounds,
        "runs": runs,
        "rows": rows,
        "parity": parity,
        "nature_cnn": _nature_cnn_bytes(),
    }
    write_results(path, result, render)


# Link speeds for the plan on paper: assumptions, not measurements (per direction).
_LINKS = {"NVLink (H100, 450 GB/s)": 450e9, "100 Gbit/s": 12.5e9, "25 Gbit/s Ethernet": 3.125e9}
_PLAN_REPLICAS = (2, 8, 64, 512)


def wire_bytes(kind: str, full: float, compressed: float, replicas: int, period: int = 50) -> float:
    """Bytes each replica sends per update with `replicas` replicas: "fp32" a ring all-reduce
    of the gradients (`2 (N-1)/N` x their bytes), "onebit" an all-gather of every replica's
    signs and scales (`(N-1)` x the compressed bytes), "every" a ring all-reduce of online and
    target parameters every `period` updates."""
    n = replicas
    if kind == "fp32":
        return 2 * (n - 1) / n * full
    if kind == "onebit":
        return (n - 1) * compressed
    return 2 * 2 * (n - 1) / n * full / period


def exchange_cost(rows: dict, kind: str) -> dict | None:
    """Seconds per update that the fp32 and the 1-bit exchange add to the run without exchange
    on transport `kind` ("2 dev" or "2 proc"), from the measured updates/s."""
    names = [f"{kind}, data 2{x}" for x in ("", ", onebit", ", no exchange")]
    if not all(n in rows for n in names):
        return None
    fp32, one, none = (1 / rows[n]["updates_per_s"] for n in names)
    return {"fp32_s": fp32 - none, "onebit_s": one - none, "none_s": none}


def parity_verdict(none: list[float], onebit: list[float]) -> dict:
    """Mean difference (1-bit minus fp32), its standard error and whether it is within noise
    (|difference| <= 2 standard errors)."""

    def var(x):
        return statistics.variance(x) if len(x) > 1 else 0.0

    diff = statistics.fmean(onebit) - statistics.fmean(none)
    se = (var(none) / len(none) + var(onebit) / len(onebit)) ** 0.5
    return {"difference": diff, "se": se, "within_noise": abs(diff) <= 2 * se}


def render(res: dict) -> str:
    rows = res["rows"]
    lines = [
        f"# Data-parallel scaling ({res['preset']})",
        "",
        machine_line(res["machine"]),
        "",
        f"{res['total_env_steps_per_replica']:,} env steps and {res['total_updates']:,} updates "
        f"per replica; medians of {res['rounds']} alternating round(s), fresh processes, cold "
        "compile. `python benchmarks/scale.py` re-runs it (about 30 minutes on 2 cores).",
        "",
        "| mode | env-steps/s (all replicas) | updates/s | bytes/update/replica | comm share "
        "| scaling eff. | final return |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        comm = f"{r['comm_share']:.0%}" if "comm_share" in r else "-"
        lines.append(
            f"| {name} | {r['env_steps_per_s']:,.0f} | {r['updates_per_s']:,.0f} | "
            f"{r['bytes_per_update']:,.0f} | {comm} | {r['scaling_efficiency']:.2f} | "
            f"{r['mean_final_return']:.1f} |"
        )
    done = res.get("done_when")
    if done:
        lines += [
            "",
            f"`{done['command']}` (the preset's {done['env_steps_per_replica']:,} env steps per replica, "
            f"{len(done['final_returns'])} seed): final greedy return "
            f"{', '.join(f'{x:.1f}' for x in done['final_returns'])} (solved: >= 475), "
            f"run {done['run_time_s']:.1f} s, compile {done['compile_time_s']:.1f} s.",
        ]
    lines += [
        "",
        "- bytes/update/replica: what one replica puts into the exchange per update "
        "(`parallel.Exchange.bytes_per_update`): fp32 gradients, 1-bit signs plus a scale per "
        "tensor, or online and target parameters every K updates, per update.",
        "- comm share: `1 - run time without exchange / run time with it`, each against the "
        "no-exchange run on the same transport (it averages once, at the end).",
        "- scaling efficiency: env-steps/s over replicas x the 1-device env-steps/s. final "
        "return: one seed per run (the parity tables below have several).",
    ]
    for preset, p in res["parity"].items():
        lines += [
            "",
            f"## Learning parity on {preset}: fp32 vs 1-bit exchange ({p['seeds']} seeds, 2 "
            f"replicas over {p['over']}, {p['env_steps_per_replica']:,} env steps per replica)",
            "",
            "| exchange | final greedy return per seed | mean | stdev |",
            "|---|---|---:|---:|",
        ]
        rets = {}
        for comp in ("none", "onebit"):
            rets[comp] = [x for x in p[comp]["final_returns"] if x is not None]
            sd = statistics.stdev(rets[comp]) if len(rets[comp]) > 1 else 0.0
            lines.append(
                f"| {comp} | {', '.join(f'{x:.1f}' for x in rets[comp])} | "
                f"{statistics.fmean(rets[comp]):.1f} | {sd:.1f} |"
            )
        v = parity_verdict(rets["none"], rets["onebit"])
        word = "within noise" if v["within_noise"] else "NOT within noise"
        lines += [
            "",
            f"1-bit minus fp32: {v['difference']:+.2f} (standard error {v['se']:.2f}): {word} "
            "(|difference| <= 2 standard errors).",
        ]
    lines += _render_plan(res)
    return "\n".join(lines) + "\n"


def _render_plan(res: dict) -> list[str]:
    rows, cnn = res["rows"], res.get("nature_cnn")
    lines = ["", "## What the exchange costs, and a plan on paper for 8 GPUs and 64 hosts", ""]
    mlp = {
        "fp32": rows["2 dev, data 2"]["bytes_per_update"],
        "onebit": rows["2 dev, data 2, onebit"]["bytes_per_update"],
    }
    for kind in ("2 dev", "2 proc"):
        cost = exchange_cost(rows, kind)
        if cost is None:
            continue
        lines.append(
            f"- {kind} (measured): the fp32 exchange adds {cost['fp32_s'] * 1e3:.3f} ms per "
            f"update, the 1-bit one {cost['onebit_s'] * 1e3:.3f} ms (an update without "
            f"exchange: {cost['none_s'] * 1e3:.3f} ms)."
        )
    cost = exchange_cost(rows, "2 dev")
    if cost is not None:
        extra = cost["onebit_s"] - cost["fp32_s"]  # compression's own compute, link ~free
        saved = wire_bytes("fp32", mlp["fp32"], 0, 2) - wire_bytes("onebit", 0, mlp["onebit"], 2)
        if extra > 0:
            lines.append(
                f"- Break-even link bandwidth, CartPole's MLP, 2 replicas: 1-bit exchange "
                f"saves {saved:,.0f} bytes per update on the wire and costs {extra * 1e3:.3f} ms "
                f"of packing on this CPU, so it pays on links slower than "
                f"{saved / extra / 1e6:,.0f} MB/s ({8 * saved / extra / 1e9:.2f} Gbit/s)."
            )
            if cnn:
                per_param = extra / (mlp["fp32"] / 4)  # seconds per parameter, this CPU
                cnn_extra = per_param * cnn["params"]
                lines.append(
                    f"- The Nature CNN ({cnn['params']:,} parameters, {cnn['fp32_bytes'] / 1e6:.2f}"
                    f" MB of fp32 gradients, {cnn['onebit_bytes'] / 1e6:.3f} MB in 1 bit): "
                    f"about {cnn_extra * 1e3:.0f} ms of packing per update on this CPU (the "
                    "MLP's cost per parameter, an extrapolation), so the same break-even "
                    "bandwidth. A GPU packs far faster, which raises it; not measured here."
                )
        else:
            lines.append(
                "- The 1-bit exchange cost no more than the fp32 one here: it pays on any link."
            )
    if cnn:
        lines += [
            "",
            "Bytes each replica sends per update for the Nature CNN, and the time on a link "
            "(ring all-reduce for fp32; all-gather for 1-bit, as `parallel.onebit` does; local "
            "SGD every 50 updates; link speeds assumed, not measured):",
            "",
            "| replicas | exchange | MB per update | "
            + " | ".join(f"ms on {name}" for name in _LINKS)
            + " |",
            "|---:|---|---:|" + "---:|" * len(_LINKS),
        ]
        for n in _PLAN_REPLICAS:
            for kind in ("fp32", "onebit", "every"):
                b = wire_bytes(kind, cnn["fp32_bytes"], cnn["onebit_bytes"], n)
                label = {"fp32": "fp32 every update", "onebit": "1-bit", "every": "every:50"}[kind]
                times = " | ".join(f"{b / bw * 1e3:.3f}" for bw in _LINKS.values())
                lines.append(f"| {n} | {label} | {b / 1e6:.3f} | {times} |")
        lines += [
            "",
            "The all-gather's bytes grow with the replicas ((N-1)/32 of the fp32 gradient "
            "against the all-reduce's 2 (N-1)/N), so 1-bit exchange stops saving bytes at about "
            "64 replicas; beyond that only local SGD (every:K) cuts the traffic.",
        ]
    return lines


if __name__ == "__main__":
    main()
