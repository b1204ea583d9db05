"""Where a DQN iteration's time goes: the update's matmuls against everything else.

    python benchmarks/update_cost.py            # ~2 min on 2 cores
    python benchmarks/update_cost.py --quick    # fewer rounds

Writes `benchmarks/results/update_cost/update_cost[-quick].json` and `.md`. Two measurements, one process:

1. **Iteration time against batch size.** `cartpole-cleanrl` (1 seed, one collect step of 10 envs
   plus one update per iteration) compiled at several batch sizes; the compiled chunks take
   turns, round by round. A straight line through (batch, us per iteration) splits the
   iteration into a part that does not grow with the batch (collect step, RNG, Adam, loop
   overhead) and a per-row part (the update's matmuls, gathers and elementwise work).
2. **Each large product alone**, at the update's own shapes (batch x 120 x 84 for CartPole's
   120-84 MLP), in a compiled loop: the forward product, the weight gradient (contracting over
   the batch, the `dot` that XLA:CPU leaves outside its YNN fusions) and the input gradient,
   plus the weight gradient with its operand transposed beforehand so that it does land in a
   YNN fusion. Both operands change every step (an elementwise nudge, the same in every case),
   so no product can be hoisted out of the loop. Which kernel XLA chose is read off the
   compiled HLO.

The update's flops are counted from the layer shapes (dense layers only: 2 x rows x in x out
per product; the online forward, the target forward, and the backward's weight and input
gradients, no input gradient into the observations).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

import common
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402

from jaxrl_fast import presets  # noqa: E402
from jaxrl_fast.loop import make_train  # noqa: E402
from jaxrl_fast.parallel.seeds import train_keys  # noqa: E402

PRESET = "cartpole-cleanrl"


def update_flops(layers: list[int], batch: int) -> int:
    """Dense-layer flops of one DQN update: online + target forward, weight + input grads."""
    pairs = list(zip(layers[:-1], layers[1:], strict=False))
    forward = sum(2 * batch * i * o for i, o in pairs)
    input_grads = sum(2 * batch * i * o for i, o in pairs[1:])  # none into the observations
    return 2 * forward + forward + input_grads


def _layers(config) -> list[int]:
    fns = make_train(config)
    spec = fns.run.env.spec
    return [int(spec.obs_shape[-1]), *config.network.hidden_sizes, int(spec.num_actions)]


def iteration_vs_batch(batches: list[int], rounds: int) -> dict:
    base = presets.get(PRESET)
    progs = {}
    for b in batches:
        cfg = base.replace(
            num_seeds=1,
            total_env_steps=base.learning_starts + 100_000,
            replay=dataclasses.replace(base.replay, batch_size=b),
        )
        fns = make_train(cfg)
        keys = train_keys(cfg)
        run = jax.jit(fns.run_chunk, donate_argnums=0).lower(jax.eval_shape(fns.init, keys))
        run = run.compile()
        runner, _ = run(jax.jit(fns.init)(keys))  # the prefill iteration
        jax.block_until_ready(runner)
        iters = (cfg.total_env_steps - cfg.learning_starts) / cfg.chunks / cfg.env.num_envs
        progs[b] = [run, runner, iters, []]
        print(f"  batch {b} compiled", flush=True)
    for r in range(rounds):
        for b in batches if r % 2 == 0 else batches[::-1]:
            p = progs[b]
            t = time.perf_counter()
            p[1], m = p[0](p[1])
            jax.block_until_ready((p[1], m))
            p[3].append((time.perf_counter() - t) / p[2] * 1e6)
    layers = _layers(base)
    rows = [
        {
            "batch": b,
            "us_per_iteration": statistics.median(p[3]),
            "update_mflop": update_flops(layers, b) / 1e6,
        }
        for b, p in progs.items()
    ]
    xs, ys = [r["batch"] for r in rows], [r["us_per_iteration"] for r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return {
        "preset": PRESET,
        "layers": layers,
        "rows": rows,
        "fixed_us": my - slope * mx,
        "us_per_row": slope,
    }


def _kernels(compiled_text: str) -> str:
    ynn = "__ynn_fusion" in compiled_text
    plain = any(" dot(" in line and "ROOT" not in line for line in compiled_text.splitlines())
    return "YNN fusion" if ynn and not plain else "plain dot" if plain and not ynn else "both"


def products(batch: int, hidden: tuple[int, int], iters: int, repeats: int) -> list[dict]:
    """Each of the update's large products alone, in a scan of `iters` steps."""
    n_in, n_out = hidden
    h = jax.random.normal(jax.random.key(0), (batch, n_in))
    dy = jax.random.normal(jax.random.key(1), (batch, n_out))
    w = jax.random.normal(jax.random.key(2), (n_in, n_out))
    dims = lambda lc, rc: ((lc, rc), ((), ()))  # noqa: E731
    cases = {
        "forward h @ W": (lambda h, dy: h @ w, (batch, n_out)),
        "weight grad (contract over batch)": (
            lambda h, dy: jax.lax.dot_general(dy, h, dims((0,), (0,))),
            (n_out, n_in),
        ),
        "weight grad, operand transposed first": (
            lambda h, dy: jax.lax.optimization_barrier(h.T) @ dy,
            (n_in, n_out),
        ),
        "input grad dy @ W^T": (
            lambda h, dy: jax.lax.dot_general(dy, w, dims((1,), (1,))),
            (batch, n_in),
        ),
    }
    out = []
    for name, (product, shape) in cases.items():

        def run(h, dy, product=product, shape=shape):
            def body(carry, _):  # both operands change every step: no product leaves the loop
                h, dy, acc = carry
                y = product(h, dy)
                nudge = 1e-9 * y.ravel()[0]
                return (h + nudge, dy + nudge, acc + y), None

            return jax.lax.scan(body, (h, dy, jnp.zeros(shape)), None, length=iters)[0][2]

        compiled = jax.jit(run).lower(h, dy).compile()
        jax.block_until_ready(compiled(h, dy))
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            jax.block_until_ready(compiled(h, dy))
            times.append((time.perf_counter() - t) / iters * 1e6)
        us = min(times)
        flop = 2 * batch * n_in * n_out
        out.append(
            {
                "product": name,
                "shape": f"{batch}x{n_in}x{n_out}",
                "us": us,
                "gflops": flop / us / 1e3,
                "kernel": _kernels(compiled.as_text()),
            }
        )
    return out


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="fewer rounds")
    args = parser.parse_args()
    t = time.perf_counter()
    rounds, repeats = (4, 3) if args.quick else (8, 7)
    print("iteration time against batch size", flush=True)
    sweep = iteration_vs_batch([8, 32, 128], rounds)
    print("products alone", flush=True)
    hidden = tuple(sweep["layers"][1:3])
    alone = products(128, hidden, 2000, repeats)
    result = {
        "machine": machine(),
        "quick": args.quick,
        "sweep": sweep,
        "products": alone,
        "wall_s": time.perf_counter() - t,
    }
    stem = os.path.join(args.out, "update_cost" + ("-quick" if args.quick else ""))
    write_results(stem, result, render)


def render(r: dict) -> str:
    s = r["sweep"]
    per_row_part = s["us_per_row"] * 128
    lines = [
        "# Where a DQN iteration's time goes",
        "",
        machine_line(r["machine"]) + ".",
        f"Produced by `python benchmarks/update_cost.py{' --quick' if r['quick'] else ''}` "
        f"in {r['wall_s']:.0f} s.",
        "",
        f"## Iteration time against batch size (`{s['preset']}`, 1 seed, layers {s['layers']})",
        "",
        "| batch | us / iteration | update MFLOP | update GFLOP/s if it took the whole iteration |",
        "|---:|---:|---:|---:|",
    ]
    for row in s["rows"]:
        g = row["update_mflop"] * 1e3 / row["us_per_iteration"]
        lines.append(
            f"| {row['batch']} | {row['us_per_iteration']:.0f} | {row['update_mflop']:.2f} | "
            f"{g:.0f} |"
        )
    lines += [
        "",
        f"Straight line: {s['fixed_us']:.0f} us per iteration that do not grow with the batch, "
        f"plus {s['us_per_row']:.2f} us per sampled row ({per_row_part:.0f} us at batch 128).",
        "",
        "## The update's large products alone (batch 128, compiled loop of 2,000)",
        "",
        "| product | shape | us | GFLOP/s | XLA:CPU kernel |",
        "|---|---|---:|---:|---|",
    ]
    for p in r["products"]:
        lines.append(
            f"| {p['product']} | {p['shape']} | {p['us']:.1f} | {p['gflops']:.0f} | {p['kernel']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
