"""GPU suite: the headline numbers of every benchmark, on one accelerator, in one command.

    python benchmarks/gpu_suite.py                      # on a GPU: about 6-8 min
    python benchmarks/gpu_suite.py --sections pong,per  # some sections only
    python benchmarks/gpu_suite.py --tiny               # everything shrunk: a CPU smoke run

Writes `benchmarks/results/gpu_suite/gpu.json` and `.md` (`--tiny`: `gpu-tiny.*`; `--out DIR`
sets the folder). The committed `gpu.json` only exists once someone has run this on a GPU: the sessions
that wrote the other benchmarks had none. The script runs unchanged on CPU, which is what
`--tiny` (and `tests/test_gpu_suite.py`) checks; full sizes on a CPU take far longer than 8 min.

Sections (each guarded: one that fails records its error and the suite goes on):

1. `cartpole`: the `cartpole` preset's fused loop on a short budget at 1, 64 and 1,024 seeds:
   env-steps/s (whole run and training phase, all seeds) and compile seconds.
2. `minatar`: `minatar-breakout` (gymnax `Breakout-MinAtar`) at 1 and 16 seeds, the same.
3. `pong`: `atari-pong` fused (`train`) vs conventional (`baseline.train_unfused`, as
   `benchmarks/atari.py`) at 1 and 8 seeds; the conventional loop trains one seed, so S seeds
   are S runs in a row: one run is made and counted S times (`runs_made: 1`). Skipped, with
   the reason, when envpool cannot be imported.
4. `precision`: the Nature-CNN update step in fp32 / bf16 / fp16 at batch 32 and 256
   (`benchmarks/precision.py`).
5. `per`: PER sample + priority update at 1e6 rows, ours (sum tree, cumsum) vs flashbax, for
   CartPole and Atari rows (`benchmarks/replay.py`; flashbax's own `device` kernel).
6. `l3`: the L3 host spill tier's cost inside the fused loop (`benchmarks/replay_loop.py`):
   training env-steps/s with L3 off / host / disk at the same L2 size, 10% of each batch from
   L3, and the extra time per L3 read call that implies (spills included).

Speed runs skip the final evaluation (`eval_episodes=0`): only throughput is measured here.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib.util
import os
import tempfile
import time
import traceback

import common  # noqa: E402
from common import machine, write_results  # noqa: E402
from gpu_markdown import render  # noqa: E402

from jaxrl_fast import parallel, presets  # noqa: E402

parallel.use_cpu_cores()  # CPU runs only: one XLA device per core
import jax  # noqa: E402
import precision as precision_bench  # noqa: E402
import replay as replay_bench  # noqa: E402
import replay_loop as replay_loop_bench  # noqa: E402

from jaxrl_fast.baseline import train_unfused  # noqa: E402
from jaxrl_fast.train import train  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sizes:
    """Every size the suite uses. Budgets are env steps per seed: `*_prefill` before the first
    update, `*_train` after it (rounded to whole blocks of the preset)."""

    cartpole_seeds: tuple[int, ...] = (1, 64, 1024)
    cartpole_prefill: int = 1_000
    cartpole_train: int = 30_000
    minatar_seeds: tuple[int, ...] = (1, 16)
    minatar_prefill: int = 5_000
    minatar_train: int = 20_000
    pong_seeds: tuple[int, ...] = (1, 8)
    pong_prefill: int = 2_048
    pong_train: int = 4_096
    pong_replay_rows: int | None = None  # None: the preset's 100,000
    precision_batches: tuple[int, ...] = (32, 256)
    precision_steps: int = 20  # updates per jitted call
    precision_repeats: int = 5
    per_obs: tuple[str, ...] = ("cartpole", "atari")  # keys of replay.OBS
    per_rows: int = 1_000_000
    per_iters: int = 100
    per_repeats: int = 5
    l3_preset: str = "cartpole-cleanrl"
    l3_env_steps: int = 50_000  # the prefill included
    l3_prefill: int | None = None  # None: the preset's 10,000
    l3_l2_rows: int = 10_000
    l3_repeats: int = 1


TINY = Sizes(
    cartpole_seeds=(1, 2),
    cartpole_prefill=200,
    cartpole_train=1_000,
    minatar_seeds=(2,),  # one seed count: each compiles its own program
    minatar_prefill=256,
    minatar_train=512,
    pong_seeds=(2,),
    pong_prefill=64,
    pong_train=128,
    pong_replay_rows=2_048,
    precision_batches=(8,),
    precision_steps=2,
    precision_repeats=1,
    per_obs=("cartpole",),
    per_rows=10_000,
    per_iters=5,
    per_repeats=2,
    l3_env_steps=4_000,
    l3_prefill=1_000,
    l3_l2_rows=2_000,
)


class Skipped(Exception):
    """A section that cannot run here (its reason is recorded)."""


def short_config(name: str, seeds: int, prefill: int, train_steps: int):
    """`name`'s preset with `seeds` seeds, about `prefill` + `train_steps` env steps per seed
    (rounded to the preset's env batch and blocks) and no final evaluation."""
    cfg = presets.get(name)
    e, f = cfg.env.num_envs, cfg.train_frequency
    learning_starts = max(2 * e, prefill // e * e, -(-cfg.replay.batch_size // e) * e)
    return cfg.replace(
        num_seeds=seeds,
        learning_starts=learning_starts,
        total_env_steps=learning_starts + max(1, train_steps // f) * f,
        eval_episodes=0,
        num_chunks=None,
    )


def _fused(cfg) -> dict:
    r = train(cfg, progress=False)
    return {
        "num_seeds": cfg.num_seeds,
        "num_devices": r.num_devices,
        "env_steps_per_seed": r.env_steps,
        "compile_s": r.compile_time_s,
        "run_s": r.run_time_s,
        "env_steps_per_s": r.env_steps_per_s,
        "train_env_steps_per_s": r.train_env_steps_per_s,
    }


def _seed_sweep(name: str, seeds, prefill: int, train_steps: int) -> dict:
    rows = []
    for s in seeds:
        print(f"  {name}, {s} seeds", flush=True)
        rows.append(_fused(short_config(name, s, prefill, train_steps)))
    env = presets.get(name).env.name
    return {"preset": name, "env": env, "seeds": list(seeds), "rows": rows}


def cartpole(z: Sizes) -> dict:
    return _seed_sweep("cartpole", z.cartpole_seeds, z.cartpole_prefill, z.cartpole_train)


def minatar(z: Sizes) -> dict:
    return _seed_sweep("minatar-breakout", z.minatar_seeds, z.minatar_prefill, z.minatar_train)


def _pong_config(z: Sizes, seeds: int):
    cfg = short_config("atari-pong", seeds, z.pong_prefill, z.pong_train)
    if z.pong_replay_rows is not None:
        cfg = cfg.replace(replay=dict(capacity=z.pong_replay_rows))
    return cfg


def _conventional(runs, learning_starts: int) -> dict:
    """Aggregate one-seed `train_unfused` runs in a row (the same run repeated, where its rate is
    taken as every seed's) as one S-seed row."""
    run_s = sum(r.run_time_s for r in runs)
    train_s = sum(r.run_time_s - r.prefill_time_s for r in runs)
    return {
        "num_seeds": len(runs),
        "num_devices": 1,
        "env_steps_per_seed": runs[0].env_steps,
        "compile_s": sum(r.compile_time_s for r in runs) / len(runs),  # per run
        "run_s": run_s,
        "env_steps_per_s": sum(r.env_steps for r in runs) / max(run_s, 1e-9),
        "train_env_steps_per_s": sum(r.env_steps - learning_starts for r in runs)
        / max(train_s, 1e-9),
    }


def pong(z: Sizes) -> dict:
    if importlib.util.find_spec("envpool") is None:
        raise Skipped("envpool is not installed (`pip install -e '.[atari]'`)")
    try:
        import envpool  # noqa: F401
    except Exception as e:  # installed but broken (e.g. a wheel for another platform)
        raise Skipped(f"envpool cannot be imported: {type(e).__name__}: {e}") from e
    rows = []
    for s in z.pong_seeds:
        print(f"  atari-pong fused, {s} seeds", flush=True)
        rows.append({"loop": "fused", **_fused(_pong_config(z, s))})
    # The conventional loop trains one seed at a time, so S seeds are S such runs in a row: its
    # rate at S seeds is its one-seed rate by construction. One run is made; the S-seed rows
    # count it S times (the fused loop's rows are each measured).
    one = _pong_config(z, 1)
    print("  atari-pong conventional, 1 seed", flush=True)
    run = train_unfused(one)
    for s in z.pong_seeds:
        rows.append(
            {
                "loop": "conventional",
                "runs_made": 1,
                **_conventional([run] * s, one.learning_starts),
            }
        )
    for row in rows:  # fused over conventional at the same seed count
        conv = next(
            r for r in rows if r["loop"] == "conventional" and r["num_seeds"] == row["num_seeds"]
        )
        row["train_speed_vs_conventional"] = (
            row["train_env_steps_per_s"] / conv["train_env_steps_per_s"]
        )
    return {"preset": "atari-pong", "seeds": list(z.pong_seeds), "rows": rows}


def precision(z: Sizes) -> dict:
    model = next(m for m in precision_bench.MODELS if m.startswith("Nature CNN"))
    tables = []
    for b in z.precision_batches:
        print(f"  Nature CNN, batch {b}", flush=True)
        t = precision_bench.update_step(model, z.precision_steps, z.precision_repeats, batch=b)
        t["batch"] = b
        t["model"] = "Nature CNN 84x84x4"
        tables.append(t)
    return {"batches": list(z.precision_batches), "tables": tables}


def _flashbax_missing() -> str | None:
    """Why flashbax cannot be compared here (None when it can): it is the `bench` extra."""
    if importlib.util.find_spec("flashbax") is None:
        return "flashbax is not installed (pip install -e '.[bench]')"
    try:
        import flashbax  # noqa: F401
    except Exception as e:
        return f"flashbax cannot be imported: {type(e).__name__}: {e}"
    return None


def per(z: Sizes) -> dict:
    """Ours always; flashbax beside it where the `bench` extra is installed."""
    device = "gpu" if jax.default_backend() == "gpu" else "cpu"
    missing = _flashbax_missing()
    if missing:
        print(f"  flashbax left out: {missing}", flush=True)
    cells = []
    for obs_name in z.per_obs:
        shape, dtype = replay_bench.OBS[obs_name]
        print(f"  {obs_name} rows, {z.per_rows:,}", flush=True)
        timers, info = replay_bench.ours_timers(
            z.per_rows, shape, dtype, z.per_iters, uniform=False, host=False
        )
        fill_s = {"ours": info["ours_fill_s"]}
        if not missing:
            fb, fb_info = replay_bench.flashbax_timers(
                z.per_rows, shape, dtype, z.per_iters, device=device
            )
            timers = {**timers, **fb}
            fill_s["flashbax"] = fb_info["flashbax_fill_s"]
        methods = replay_bench.measure(timers, z.per_repeats)
        del timers
        gc.collect()
        cells.append(
            {
                "obs": obs_name,
                "capacity": z.per_rows,
                "batch": replay_bench.BATCH,
                "fill_s": fill_s,
                "methods": methods,
                "flashbax_per_over_ours_sum_tree": None
                if missing
                else replay_bench.ratio(methods["flashbax_per"], methods["ours_sum_tree"]),
                "ours_cumsum_over_ours_sum_tree": replay_bench.ratio(
                    methods["ours_cumsum"], methods["ours_sum_tree"]
                ),
            }
        )
    return {"flashbax_device": device, "flashbax_missing": missing, "cells": cells}


def l3(z: Sizes) -> dict:
    with tempfile.TemporaryDirectory(prefix="jaxrl_fast-gpu-spill-") as spill_dir:
        t = replay_loop_bench.l3_overhead(
            z.l3_preset,
            z.l3_env_steps,
            z.l3_repeats,
            spill_dir,
            capacity=z.l3_l2_rows,
            learning_starts=z.l3_prefill,
        )
    train_steps = z.l3_env_steps - t["learning_starts"]
    off = next(r for r in t["rows"] if r["variant"] == "L3 off")
    off_s = train_steps / off["train_env_steps_per_s_median"]
    for row in t["rows"]:
        calls = row["replay_counters"].get("l3_read_calls")
        extra_s = train_steps / row["train_env_steps_per_s_median"] - off_s
        row["extra_ms_per_l3_read_call"] = 1e3 * extra_s / calls if calls else None
    return t


SECTIONS = {
    "cartpole": cartpole,
    "minatar": minatar,
    "pong": pong,
    "precision": precision,
    "per": per,
    "l3": l3,
}


def run_sections(names, z: Sizes) -> dict:
    """Run each named section, guarded; returns `{name: {status, wall_s, result | reason |
    error}}` with status "ok", "skipped" or "error"."""
    out = {}
    t_suite = time.perf_counter()
    for k, name in enumerate(names, 1):
        print(f"[{k}/{len(names)}] {name}", flush=True)
        t = time.perf_counter()
        try:
            rec = {"status": "ok", "result": SECTIONS[name](z)}
        except Skipped as e:
            rec = {"status": "skipped", "reason": str(e)}
        except Exception as e:  # record it and go on with the next section
            traceback.print_exc()
            rec = {"status": "error", "error": f"{type(e).__name__}: {e}"}
        rec["wall_s"] = time.perf_counter() - t
        out[name] = rec
        gc.collect()
        print(
            f"  {name}: {rec['status']} in {rec['wall_s']:.1f} s "
            f"(suite {time.perf_counter() - t_suite:.1f} s)",
            flush=True,
        )
    return out


def main(argv=None) -> None:
    parser = common.parser(__doc__, __file__)
    parser.add_argument(
        "--tiny", action="store_true", help="smoke sizes (2 CPU cores: about 2-3 min)"
    )
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)",
    )
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in names if s not in SECTIONS]
    if unknown or not names:
        parser.error(f"--sections: unknown {unknown}; choose from {','.join(SECTIONS)}")
    backend = jax.default_backend()
    if backend == "cpu" and not args.tiny:
        print("warning: no accelerator; full sizes on a CPU take far longer than 8 min", flush=True)
    z = TINY if args.tiny else Sizes()
    t0 = time.perf_counter()
    out: dict = {
        "machine": machine(),
        "backend": backend,
        "device_kind": jax.devices()[0].device_kind,
        "jax": jax.__version__,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "tiny": args.tiny,
        "sizes": dataclasses.asdict(z),
        "sections": run_sections(names, z),
    }
    out["benchmark_time_s"] = time.perf_counter() - t0
    stem = os.path.join(args.out, "gpu-tiny" if args.tiny else "gpu")
    write_results(stem, out, render)
    print(f"wrote {stem}.json and {stem}.md", flush=True)


if __name__ == "__main__":
    main()
