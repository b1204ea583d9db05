"""What a data replica's exchange costs per update, piece by piece, on 2 local CPU devices.

    python benchmarks/exchange_cost.py            # ~1 min on 2 cores

`benchmarks/scale.py` measures the exchange inside whole training runs; this takes it apart.
Each case is one compiled `shard_map` over a 2-device `data` mesh running 2,000 steps of a
`lax.scan`, on gradients shaped as the `cartpole` preset's MLP (4-120-84-2); every step nudges
its input, so nothing can be hoisted out of the loop. The cases take turns, round by round
(3 rounds), and the table gives the median microseconds per step:

- `nothing`: the nudge alone (the loop's own cost);
- `fp32 all-reduce`: `parallel.exchange`'s flat `pmean` of the gradients;
- `pack + unpack`: 1-bit packing and unpacking of every tensor, no collective;
- `1-bit exchange`: `parallel.onebit.exchange_signs` (pack, one uint8 all-gather, unpack, mean);
- `..., in a seed vmap`: the same inside `jax.vmap` over a seed axis of 1, as the training loop
  runs its update;
- `Adam + fp32 all-reduce`: optax Adam on the averaged gradients (the `every_step` update);
- `1-bit Adam, warm-up`, `1-bit Adam, compressed`: `parallel.onebit.onebit_adam` in its two
  phases (its `lax.cond` picks the phase from the shared step).

Writes `benchmarks/results/exchange_cost/exchange_cost.json` and `.md`.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
).strip()

import statistics  # noqa: E402
import time  # noqa: E402

import common  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from jaxrl_fast.parallel import DATA_AXIS, onebit  # noqa: E402
from jaxrl_fast.parallel.exchange import pmean_flat  # noqa: E402

SHAPES = [(4, 120), (120,), (120, 84), (84,), (84, 2), (2,)]  # the cartpole preset's MLP
STEPS = 2_000


def _cases() -> dict:
    """name -> step(grads, state, i) -> (grads', state'): one update's exchange."""
    adam = optax.adam(1e-3)
    warm = onebit.onebit_adam(1e-3, axis=DATA_AXIS, warmup_updates=STEPS + 1)
    cold = onebit.onebit_adam(1e-3, axis=DATA_AXIS, warmup_updates=1)

    def exchange(fn):
        return lambda g, s, i: (fn(g), s)

    def optimiser(tx, **kw):
        def step(g, s, i):
            updates, s = tx.update(g, s, g, **({"step": i + 1} if kw else {}))
            return updates, s

        return step

    def in_seed_vmap(fn):  # as the training loop runs it: inside the vmap over seeds (1 here)
        def run(g):
            out = jax.vmap(fn)(jax.tree.map(lambda x: x[None], g))
            return jax.tree.map(lambda x: x[0], out)

        return run

    def adam_mean(g, s, i):
        updates, s = adam.update(pmean_flat(g, DATA_AXIS), s, g)
        return updates, s

    return {
        "nothing": (exchange(lambda g: g), None),
        "fp32 all-reduce": (exchange(lambda g: pmean_flat(g, DATA_AXIS)), None),
        "pack + unpack": (
            exchange(lambda g: [onebit.unpack_signs(*onebit.pack_signs(x), x) for x in g]),
            None,
        ),
        "1-bit exchange": (exchange(lambda g: onebit.exchange_signs(g, DATA_AXIS)[0]), None),
        "fp32 all-reduce, in a seed vmap": (
            exchange(in_seed_vmap(lambda g: pmean_flat(g, DATA_AXIS))),
            None,
        ),
        "1-bit exchange, in a seed vmap": (
            exchange(in_seed_vmap(lambda g: onebit.exchange_signs(g, DATA_AXIS)[0])),
            None,
        ),
        "Adam + fp32 all-reduce": (adam_mean, adam),
        "1-bit Adam, warm-up": (optimiser(warm, step=True), warm),
        "1-bit Adam, compressed": (optimiser(cold, step=True), cold),
    }


def _compile(step, tx, mesh):
    def body(grads):
        state = tx.init(grads) if tx is not None else None

        def one(carry, i):
            g, s = carry
            out, s = step(g, s, i)
            # nudge the input by the output, so every step depends on the last
            g = jax.tree.map(lambda a, b: a * 0.999 + 1e-3 * b.astype(a.dtype), g, out)
            return (g, s), None

        (grads, _), _ = jax.lax.scan(one, (grads, state), jnp.arange(STEPS))
        return grads

    spec = P(DATA_AXIS)
    fn = jax.shard_map(body, mesh=mesh, in_specs=(spec,), out_specs=spec, check_vma=False)
    return jax.jit(fn)


def main() -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mesh = jax.make_mesh((2,), (DATA_AXIS,), axis_types=(jax.sharding.AxisType.Auto,))
    sharding = NamedSharding(mesh, P(DATA_AXIS))
    key = jax.random.key(0)
    grads = [
        jax.device_put(jax.random.normal(jax.random.fold_in(key, i), (2, *s)), sharding)
        for i, s in enumerate(SHAPES)
    ]
    cases = _cases()
    compiled = {name: _compile(step, tx, mesh) for name, (step, tx) in cases.items()}
    for fn in compiled.values():
        jax.block_until_ready(fn(grads))  # compile and warm
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in compiled.items():
            t = time.perf_counter()
            jax.block_until_ready(fn(grads))
            times[name].append((time.perf_counter() - t) / STEPS * 1e6)
    result = {
        "machine": machine(),
        "shapes": SHAPES,
        "params": sum(int(jnp.prod(jnp.array(s))) for s in SHAPES),
        "steps": STEPS,
        "rounds": args.rounds,
        "us_per_step": times,
        "median_us": {k: statistics.median(v) for k, v in times.items()},
    }
    write_results(common.stem(args, "exchange_cost"), result, render)


def render(res: dict) -> str:
    base = res["median_us"]["nothing"]
    lines = [
        "# What a replica's exchange costs per update (2 local CPU devices)",
        "",
        machine_line(res["machine"]),
        "",
        f"The `cartpole` MLP's gradients ({res['params']:,} parameters in "
        f"{len(res['shapes'])} tensors), {res['steps']:,} steps per compiled loop, medians of "
        f"{res['rounds']} alternating rounds. `python benchmarks/exchange_cost.py` re-runs it.",
        "",
        "| case | us per step | over `nothing` | per round |",
        "|---|---:|---:|---|",
    ]
    for name, med in res["median_us"].items():
        rounds = ", ".join(f"{x:.1f}" for x in res["us_per_step"][name])
        lines.append(f"| {name} | {med:.1f} | {med - base:+.1f} | {rounds} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
