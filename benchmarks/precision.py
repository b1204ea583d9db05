"""Mixed precision: update-step time per compute dtype, end-to-end speed and learning.

One command, one process, one machine:

    python benchmarks/precision.py            # full (about 10 min on a 2-core CPU)
    python benchmarks/precision.py --quick    # smoke run, about 4 min
    python benchmarks/precision.py --render benchmarks/results/precision/precision.json  # Markdown only

Writes `benchmarks/results/precision/precision[-quick].json` and `.md`. What it measures, each low
precision against fp32 in the same run:

1. **Update step.** One DQN gradient step (double-Q forward passes, backward, clipping, Adam,
   and for fp16 the dynamic loss scale and the non-finite check) for the CartPole MLP
   (120-84, batch 128), the MinAtar CNN (batch 64) and the Nature CNN on 84x84x4 uint8 frames
   (batch 32 and 256). Steps run inside one jitted `lax.scan`, as in the fused loop; the dtypes
   alternate within each repeat and the median per step is reported. The compiled program's
   dots and convolutions are counted by the dtype they compute in, which shows whether the
   backend really runs low precision (XLA:CPU converts them to f32).
2. **End to end** on `minatar-breakout` (4 seeds at the preset's budget): training-phase
   env-steps/s, final greedy return per seed, skipped updates and any fp32 fallback. A dtype
   counts as learning "within noise" of fp32 when its mean final return differs from fp32's by
   at most twice the standard error of that difference (from the seeds' spread).

3. **Nature CNN convolutions in and out of a loop** (fp32, batch 32): the update step inside a
   jitted `lax.scan` and as one jitted call, with the torso computed as convolutions
   (`conv_impl="conv"`), as patches x matmul (`"patches"`), as convolutions whose kernel
   gradient is patches x matmul (`"conv_patches_grad"`), and as convolutions whose gradients
   are written as NHWC x HWIO convolutions (`"conv_canonical_grads"`, what `"auto"` picks on
   CPU); and conv_canonical_grads' kernel gradient as a convolution vs as patches x matmul
   inside the scan at batch 32 to 256, which sets `networks.CANONICAL_KERNEL_GRAD_MAX_BATCH`.

GPU rows stay "not measured" until the benchmark runs on a GPU.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import time

import common
from common import machine, write_results  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrl_fast.agent import layers as networks  # noqa: E402
from jaxrl_fast.agent.dqn import make_agent  # noqa: E402
from jaxrl_fast.agent.network import QNetwork  # noqa: E402
from jaxrl_fast.agent.precision import resolve_precision  # noqa: E402
from jaxrl_fast.config import DQNConfig, NetworkConfig, PrecisionConfig  # noqa: E402
from jaxrl_fast.envs.base import EnvSpec  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402
from jaxrl_fast.types import Batch  # noqa: E402

DTYPES = ("fp32", "bf16", "fp16")
MODELS = {
    # name: (network config, obs shape, obs dtype, actions, batch)
    "CartPole MLP 120-84, batch 128": (
        NetworkConfig(kind="mlp", hidden_sizes=(120, 84)), (4,), jnp.float32, 2, 128,
    ),
    "MinAtar CNN (3x3x16, 128), batch 64": (
        NetworkConfig(kind="cnn", conv_channels=(16,), hidden_sizes=(128,)),
        (10, 10, 4), jnp.float32, 3, 64,
    ),
    "Nature CNN 84x84x4, batch 32": (
        NetworkConfig(kind="nature", hidden_sizes=(512,)), (84, 84, 4), jnp.uint8, 6, 32,
    ),
    "Nature CNN 84x84x4, batch 256": (
        NetworkConfig(kind="nature", hidden_sizes=(512,)), (84, 84, 4), jnp.uint8, 6, 256,
    ),
}  # fmt: skip
_OP = re.compile(r"= (\w+)\[[^\]]*\](?:\{[^}]*\})? (dot|convolution)\(")


def _batch(shape, dtype, actions, b, key):
    k1, k2, k3 = jax.random.split(key, 3)
    if dtype == jnp.uint8:
        obs = jax.random.randint(k1, (b, *shape), 0, 256).astype(jnp.uint8)
    else:
        obs = (jax.random.uniform(k1, (b, *shape)) < 0.3).astype(dtype)
    return Batch(
        obs=obs,
        action=jax.random.randint(k2, (b,), 0, actions, jnp.int32),
        reward=jax.random.normal(k3, (b,)),
        discount=jnp.full((b,), 0.99, jnp.float32),
        next_obs=obs[::-1],
        weight=jnp.ones((b,), jnp.float32),
        index=jnp.arange(b, dtype=jnp.int32),
    )


def _program(
    model: str,
    compute: str,
    steps: int,
    conv_impl: str = "auto",
    batch: int | None = None,
    **precision,
):
    """`precision`: more `PrecisionConfig` fields (default: the fp32 fallback compiled in, as
    the committed results were measured; it was the default then, it is opt-in now)."""
    net_cfg, shape, dtype, actions, b = MODELS[model]
    b = batch or b
    spec = EnvSpec("bench", shape, dtype, actions, 1, 1000)
    precision = {"fallback": True, **precision}
    policy = resolve_precision(PrecisionConfig(compute=compute, **precision))
    net = QNetwork.for_precision(net_cfg, spec, policy, conv_impl=conv_impl)
    agent = make_agent(DQNConfig(), net, actions, precision=policy)
    state = agent.init(jax.random.key(0), jnp.zeros((1, *shape), dtype))
    # A different batch per step: with one loop-invariant batch XLA hoists work out of the loop
    # (e.g. the target net's forward pass), which flatters in-loop timings.
    keys = jax.random.split(jax.random.key(1), max(steps, 1))
    batch = jax.vmap(lambda k: _batch(shape, dtype, actions, b, k))(keys)

    def run(state, batches):
        def body(s, batch):
            s, _, m = agent.update(s, batch)
            return s, m.loss

        if steps == 0:  # one update, no loop around it
            s, _, m = agent.update(state, jax.tree.map(lambda x: x[0], batches))
            return s, m.loss[None]
        return jax.lax.scan(body, state, batches)

    t = time.perf_counter()
    compiled = jax.jit(run).lower(state, batch).compile()
    compile_s = time.perf_counter() - t
    ops: dict[str, int] = {}
    for dt, op in _OP.findall(compiled.as_text()):
        ops[f"{op} {dt}"] = ops.get(f"{op} {dt}", 0) + 1
    return compiled, state, batch, compile_s, ops, policy.describe()


def update_step(
    model: str,
    steps: int,
    repeats: int,
    batch: int | None = None,
    variants: dict[str, dict] | None = None,
) -> dict:
    """Each variant's update step on `model` (interleaved, median ms per update).

    `batch` overrides the model's batch size (the GPU kit's `--tiny` rehearsal uses 8).
    `variants`: name -> `PrecisionConfig` fields (default: each of `DTYPES` as `compute`, the
    fallback compiled in); the first is the reference of `time_vs_fp32`.
    """
    variants = variants or {c: {"compute": c} for c in DTYPES}
    progs = {k: _program(model, steps=steps, batch=batch, **v) for k, v in variants.items()}
    states = {c: p[1] for c, p in progs.items()}
    times: dict[str, list[float]] = {c: [] for c in variants}
    for c in variants:  # warm-up call
        states[c], _ = progs[c][0](states[c], progs[c][2])
        jax.block_until_ready(states[c])
    for _ in range(repeats):
        for c in variants:
            t = time.perf_counter()
            states[c], losses = progs[c][0](states[c], progs[c][2])
            jax.block_until_ready(losses)
            times[c].append((time.perf_counter() - t) / steps * 1e3)
    fp32 = statistics.median(times[next(iter(variants))])
    rows = []
    for c in variants:
        ms = statistics.median(times[c])
        rows.append(
            {
                "compute": c,
                "ms_per_update_median": ms,
                "ms_per_update_runs": times[c],
                "time_vs_fp32": ms / fp32,
                "compile_s": progs[c][3],
                "compiled_ops_by_dtype": progs[c][4],
                "skipped_updates": int(states[c].loss_scale.skipped),
                "policy": progs[c][5],
            }
        )
    return {"model": model, "steps_per_call": steps, "repeats": repeats, "rows": rows}


DEFAULT_KERNEL_GRAD_MAX_BATCH = networks.CANONICAL_KERNEL_GRAD_MAX_BATCH


def _ms_per_update(progs: dict, repeats: int) -> dict:
    """Milliseconds per update of each `_program` (a warm-up call, then `repeats` calls with
    the programs interleaved); a program of 0 steps is one update outside a loop."""
    times: dict = {k: [] for k in progs}
    states = {k: p[1] for k, p in progs.items()}
    for k, p in progs.items():  # warm-up call
        states[k], _ = p[0](states[k], p[2])
        jax.block_until_ready(states[k])
    for _ in range(repeats):
        for k, p in progs.items():
            t = time.perf_counter()
            states[k], losses = p[0](states[k], p[2])
            jax.block_until_ready(losses)
            times[k].append((time.perf_counter() - t) / losses.shape[0] * 1e3)
    return times


def kernel_grad_by_batch(repeats: int, batches=(32, 64, 128, 256)) -> dict:
    """conv_canonical_grads' kernel gradient as a convolution vs as patches x matmul, inside
    a jitted scan, per batch size: what `networks.CANONICAL_KERNEL_GRAD_MAX_BATCH` is set by."""
    model = "Nature CNN 84x84x4, batch 32"
    progs = {}
    for b in batches:
        for how, limit in (("convolution", 10**9), ("patches x matmul", 0)):
            networks.CANONICAL_KERNEL_GRAD_MAX_BATCH = limit  # read when the program is traced
            steps = 2 if b > 64 else 5
            progs[(b, how)] = _program(model, "fp32", steps, "conv_canonical_grads", batch=b)
    networks.CANONICAL_KERNEL_GRAD_MAX_BATCH = DEFAULT_KERNEL_GRAD_MAX_BATCH
    times = _ms_per_update(progs, repeats)
    rows = [
        {"batch": b, "kernel_grad": how, "ms_per_update_median": statistics.median(ts)}
        for (b, how), ts in times.items()
    ]
    return {"repeats": repeats, "max_batch": DEFAULT_KERNEL_GRAD_MAX_BATCH, "rows": rows}


def conv_in_loop(repeats: int) -> dict:
    model = "Nature CNN 84x84x4, batch 32"
    rows = []
    progs = {
        (impl, steps): _program(model, "fp32", steps, conv_impl=impl)
        for impl in ("conv", "patches", "conv_patches_grad", "conv_canonical_grads")
        for steps in (0, 5)
    }
    times = _ms_per_update(progs, repeats)
    for (impl, steps), ts in times.items():
        rows.append(
            {
                "conv_impl": impl,
                "where": "inside lax.scan" if steps else "one jitted call",
                "ms_per_update_median": statistics.median(ts),
                "ms_per_update_runs": ts,
            }
        )
    return {"model": model, "compute": "fp32", "repeats": repeats, "rows": rows}


def end_to_end(steps: int | None, seeds: int) -> dict:
    base = presets.get("minatar-breakout").replace(num_seeds=seeds)
    if steps is not None:
        base = base.replace(total_env_steps=steps)
    runs = {}
    for c in DTYPES:
        print(f"  minatar-breakout {c}, {seeds} seeds", flush=True)
        r = train(base.replace(precision=dict(compute=c, fallback=True)), progress=False)
        runs[c] = {
            "train_env_steps_per_s": r.train_env_steps_per_s,
            "run_time_s": r.run_time_s,
            "compile_time_s": r.compile_time_s,
            "final_returns": [float(x) for x in r.final_return],
            "skipped_updates": [
                int(x) for x in np.asarray(r.runner.seeds.agent.loss_scale.skipped)
            ],
            "final_loss_scale": r.history[-1]["loss_scale"],
            "fp32_fallback_env_steps": r.fp32_fallback_env_steps,
            "precision": r.precision,
            "num_devices": r.num_devices,
        }
    ref = runs["fp32"]
    for run in runs.values():
        f, g = run["final_returns"], ref["final_returns"]
        se = math.sqrt(statistics.variance(f) / len(f) + statistics.variance(g) / len(g))
        diff = statistics.mean(f) - statistics.mean(g)
        run["mean_return"] = statistics.mean(f)
        run["diff_vs_fp32"] = diff
        run["se_of_diff"] = se
        run["within_noise"] = abs(diff) <= 2 * se
        run["speed_vs_fp32"] = run["train_env_steps_per_s"] / ref["train_env_steps_per_s"]
    return {"preset": "minatar-breakout", "env_steps": base.total_env_steps, "runs": runs}


def render(r: dict) -> str:
    m = r["machine"]
    q = " --quick" if r["quick"] else ""
    lines = [
        f"# Mixed precision{' (quick)' if r['quick'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; jax {m['jax']} on "
        f"{m['backend']}. Produced by `python benchmarks/precision.py{q}` in "
        f"{r['benchmark_time_s']:.0f} s. CPU timings on a shared VM are noisy: compare the rows of "
        "one table, which ran interleaved.",
        "",
        "## Update step (fwd + bwd + Adam), ms per update",
        "",
        "| model | compute | ms / update | time vs fp32 | compiled dots/convs by dtype |",
        "|---|---|---:|---:|---|",
    ]
    for t in r["update_step"]:
        for row in t["rows"]:
            ops = ", ".join(f"{k}: {v}" for k, v in sorted(row["compiled_ops_by_dtype"].items()))
            lines.append(
                f"| {t['model']} | {row['compute']} | {row['ms_per_update_median']:.3f} | "
                f"{row['time_vs_fp32']:.2f}x | {ops or '-'} |"
            )
    lines += [
        "",
        "Time vs fp32 above 1 means slower. fp16 includes the dynamic loss scale and the",
        "non-finite check. The low-precision programs hold twice the dots and convolutions because",
        "the fp32 fallback branch is compiled in too (only one branch runs per step). Every one",
        "of them computes in f32 on XLA:CPU, whatever the compute dtype: there low precision only",
        'adds converts, which is why `compute="auto"` picks fp32 on CPU.',
        "",
    ]
    e = r["end_to_end"]
    lines += [
        f"## End to end: `minatar-breakout`, {e['env_steps']:,} env steps per seed",
        "",
    ]
    if r.get("end_to_end_run_by"):
        lines += [f"(From {r['end_to_end_run_by']}.)", ""]
    lines += [
        "| compute | training env-steps/s (all seeds) | vs fp32 | final greedy return per seed "
        "| mean | diff vs fp32 (2 SE) | within noise | skipped updates | fp32 fallback |",
        "|---|---:|---:|---|---:|---:|---|---|---|",
    ]
    for c, run in e["runs"].items():
        fb = run["fp32_fallback_env_steps"]
        lines.append(
            f"| {c} | {run['train_env_steps_per_s']:,.0f} | {run['speed_vs_fp32']:.2f}x | "
            f"{', '.join(f'{x:.1f}' for x in run['final_returns'])} | {run['mean_return']:.2f} | "
            f"{run['diff_vs_fp32']:+.2f} ({2 * run['se_of_diff']:.2f}) | "
            f"{'yes' if run['within_noise'] else 'no'} | "
            f"{', '.join(str(s) for s in run['skipped_updates'])} | "
            f"{'no' if fb is None else f'at {fb:,} steps'} |"
        )
    c = r["conv_in_loop"]
    lines += [
        "",
        f"## {c['model']}, fp32: convolutions in and out of a loop",
        "",
        "| torso computed as | where | ms / update |",
        "|---|---|---:|",
    ]
    for row in c["rows"]:
        lines.append(f"| {row['conv_impl']} | {row['where']} | {row['ms_per_update_median']:.1f} |")
    lines += [
        "",
        '`conv_impl="auto"` picks conv_canonical_grads on CPU (the conventional baseline, which',
        "calls each update on its own, uses conv), conv elsewhere. XLA:CPU rewrites convolutions",
        "into its fast NHWC x HWIO form only outside loops, so autodiff's gradient convolutions",
        "(other layouts) are slow inside the scan unless written in that form.",
    ]
    kg = r.get("kernel_grad_by_batch")
    if kg:
        lines += [
            "",
            "### conv_canonical_grads' kernel gradient inside lax.scan, by batch size",
            "",
            "| batch | kernel gradient as | ms / update |",
            "|---:|---|---:|",
        ]
        for row in kg["rows"]:
            lines.append(
                f"| {row['batch']} | {row['kernel_grad']} | {row['ms_per_update_median']:.1f} |"
            )
        lines += [
            "",
            f"The library uses the convolution up to batch {kg['max_batch']} and patches x "
            "matmul above (`networks.CANONICAL_KERNEL_GRAD_MAX_BATCH`).",
        ]
    lines += [
        "",
        "## GPU",
        "",
        "| device | compute | update step | end to end |",
        "|---|---|---|---|",
        "| T4 (fp16 + dynamic scale under `auto`) | fp16 | not measured | not measured |",
        "| Ampere or newer (bf16 under `auto`) | bf16 | not measured | not measured |",
        "",
        "No GPU was lent to the session that produced this file; run "
        "`python benchmarks/precision.py` on one to fill these rows.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="smoke run (~3 min)")
    parser.add_argument(
        "--render", metavar="JSON", help="only rewrite the Markdown from a results JSON file"
    )
    parser.add_argument(
        "--update-steps-only",
        action="store_true",
        help="re-measure sections 1 and 3 and keep the end-to-end runs of the results JSON",
    )
    args = parser.parse_args()
    if args.render:
        with open(args.render) as f:
            result = json.load(f)
        with open(os.path.splitext(args.render)[0] + ".md", "w") as f:
            f.write(render(result))
        return
    q = args.quick
    out: dict = {"machine": machine(), "quick": q}
    t0 = time.perf_counter()
    print("[1/3] update step", flush=True)
    out["update_step"] = []
    for model in MODELS:
        big = "256" in model
        steps = (2 if big else 5) if q else (5 if big else 50)
        print(f"  {model}", flush=True)
        out["update_step"].append(update_step(model, steps, 2 if q else 5))
    print("[2/3] convolutions in and out of a loop", flush=True)
    out["conv_in_loop"] = conv_in_loop(2 if q else 4)
    out["kernel_grad_by_batch"] = kernel_grad_by_batch(1 if q else 3)
    stem = os.path.join(args.out, "precision" + ("-quick" if q else ""))
    if args.update_steps_only:
        with open(stem + ".json") as f:
            kept = json.load(f)
        out["end_to_end"] = kept["end_to_end"]
        out["end_to_end_run_by"] = (
            "the previous full run of this benchmark (sections 1 and 3 re-measured with "
            "`--update-steps-only`)"
        )
    else:
        print("[3/3] end to end", flush=True)
        out["end_to_end"] = end_to_end(20_000 if q else None, 2 if q else 4)
    out["benchmark_time_s"] = time.perf_counter() - t0
    write_results(stem, out, render)


if __name__ == "__main__":
    main()
