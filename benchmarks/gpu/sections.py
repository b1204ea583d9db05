"""The GPU kit's sections: what `run.py` measures, one function each, at full or `TINY` sizes.

Each section runs in a process of its own (`run.py --section NAME`), so nothing here imports
JAX at module level: the parent never starts a backend (on a GPU it would take 75% of the
memory away from the sections). A section returns a JSON-ready dict, or raises `Skipped` with
the reason it cannot run here. `DEADLINE` (a `time.monotonic()` value, set by `run.py` from the
section's limit) lets the learning sections stop in time and still report.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import os
import pkgutil
import re
import statistics
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEADLINE = float("inf")  # set by run.py: when this section's limit ends
# What the run reports the version of (the image's and the kit's).
PACKAGES = ("jax", "jaxlib", "flax", "optax", "chex", "orbax-checkpoint", "numpy", "gymnax",
            "gymnasium", "flashbax", "envpool", "pytest")  # fmt: skip
# The benchmark modules the sections import (from benchmarks/, on PYTHONPATH through run.sh).
BENCH_MODULES = ("common", "precision", "replay", "replay_loop", "reference_loop", "wheels")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sizes:
    tests_files: tuple[str, ...] | None = None  # None: every test file with a `gpu` mark
    tests_select: str | None = None  # a `pytest -k` expression
    cartpole_seeds: tuple[int, ...] = (1, 64, 1024)
    cartpole_prefill: int = 1_000
    cartpole_train: int = 20_000
    cartpole_compare: tuple[str, ...] = ("fp32 highest", "bf16")  # at the most seeds
    reference_seeds: tuple[int, ...] = (1, 1024)
    reference_steps: int = 30_000  # cartpole-cleanrl: 10,000 of them the prefill
    reference_rounds: int = 3
    minatar_presets: tuple[str, ...] = ("minatar-breakout", "pqn-minatar-breakout",
                                        "rainbow-minatar")  # fmt: skip
    minatar_seeds: int = 8
    minatar_prefill: int = 2_048
    minatar_train: int = 16_384
    precision_model: str = "Nature CNN"  # a prefix of a key of precision.MODELS
    precision_batches: tuple[int, ...] = (32, 256)
    precision_steps: int = 20
    precision_repeats: int = 5
    replay_obs: tuple[str, ...] = ("cartpole", "atari")
    replay_rows: int = 1_000_000
    replay_iters: int = 100
    replay_repeats: int = 5
    l3_preset: str = "cartpole-cleanrl"
    l3_env_steps: int = 50_000
    l3_prefill: int | None = None
    l3_l2_rows: int = 10_000
    l3_only: tuple[str, ...] | None = None  # None: every variant of replay_loop.l3_overhead
    atari_seeds: tuple[int, ...] = (1, 8)
    atari_prefill: int = 2_048
    atari_train: int = 4_096
    atari_replay_rows: int | None = None
    learn_cartpole: tuple[str, int, float] = ("cartpole", 1024, 475.0)  # preset, seeds, score
    learn_pqn: tuple[str, int, float] = ("pqn-minatar-breakout", 4, 20.0)
    learn_evals: int = 32  # evaluation points over the preset's budget
    learn_episodes: int = 8  # greedy episodes per seed and evaluation
    learn_steps: int | None = None  # None: the preset's budget


TINY = Sizes(
    # the suite runs every `gpu` test itself: the rehearsal runs one, through the same path
    tests_files=("tests/test_gpu.py",),
    tests_select="random_bits",
    cartpole_seeds=(2,),
    cartpole_prefill=200,
    cartpole_train=1_000,
    cartpole_compare=(),  # the precision section compiles bf16 already
    reference_seeds=(2,),
    reference_steps=1_200,
    reference_rounds=1,
    minatar_presets=("pqn-minatar-breakout",),
    minatar_seeds=2,
    minatar_prefill=256,
    minatar_train=512,
    precision_model="CartPole MLP",  # the smallest compile
    precision_batches=(8,),
    precision_steps=2,
    precision_repeats=1,
    replay_obs=("cartpole",),
    replay_rows=10_000,
    replay_iters=5,
    replay_repeats=2,
    l3_env_steps=2_400,
    l3_prefill=600,
    l3_l2_rows=1_000,
    l3_only=("L3 host, 4 MB blocks",),
    atari_seeds=(2,),
    atari_prefill=64,
    atari_train=128,
    atari_replay_rows=2_048,
    learn_cartpole=("cartpole", 2, 15.0),  # a score the first evaluation reaches
    learn_pqn=("pqn-cartpole", 2, 500.0),  # out of reach: the run ends at its budget
    learn_evals=2,
    learn_episodes=2,
    learn_steps=4_096,
)


class Skipped(Exception):
    """A section that cannot run here (its reason is recorded)."""


def _left_s() -> float:
    return DEADLINE - time.monotonic()


# ---- imports: every module, the versions, the kit ---------------------------------------------
def _import_all(names) -> dict[str, str]:
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - each failure is reported by name
            failed[name] = f"{type(e).__name__}: {e}"
    return failed


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def imports(z: Sizes) -> dict:
    """Import every module of the package, the benchmark modules the run uses and every module
    the kit's wheels hold; report each failure by name, the versions, the device and the kit."""
    import wheels

    import jaxrl_fast

    names = ["jaxrl_fast"] + sorted(
        m.name
        for m in pkgutil.walk_packages(jaxrl_fast.__path__, "jaxrl_fast.")
        if not m.name.endswith("__main__")  # running it is the CLI
    )
    kit_dir = os.environ.get("KIT_WHEELS", os.path.join(HERE, "wheels"))
    kit = wheels.read_manifest(kit_dir)
    kit_wheels = (
        sorted(f for f in os.listdir(kit_dir) if f.endswith(".whl"))
        if os.path.isdir(kit_dir)
        else []
    )
    kit_modules = sorted(
        {m for f in kit_wheels for m in wheels.wheel_modules(os.path.join(kit_dir, f))}
    )
    failed = _import_all(names) | _import_all(BENCH_MODULES) | _import_all(kit_modules)
    import common

    return {
        "modules": len(names),
        "kit_modules": kit_modules,
        "failed": failed,
        "versions": {p: _version(p) for p in PACKAGES},
        "machine": common.machine(),
        "kit": {
            "wheels": kit_wheels,
            "manifest": kit,
        },
    }


# ---- tests: the `gpu`-marked tests on this device ---------------------------------------------
def gpu_test_files() -> list[str]:
    """The test files holding a `@pytest.mark.gpu` test or a `gpu` module mark."""
    mark = re.compile(r"pytest\.mark\.gpu\b(?!_)")
    out = []
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        for f in files:
            path = os.path.join(folder, f)
            if f.startswith("test_") and f.endswith(".py"):
                with open(path) as fh:
                    if mark.search(fh.read()):
                        out.append(os.path.relpath(path, ROOT))
    return sorted(out)


class _Outcomes:
    """A pytest plugin that keeps each test's outcome (its failure's last line)."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}
        self.failures: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            if report.nodeid in self.outcomes and self.outcomes[report.nodeid] != "passed":
                return  # a setup failure or skip stays what it was
            self.outcomes[report.nodeid] = report.outcome
            if report.outcome == "failed":
                text = str(report.longrepr).strip().splitlines()
                self.failures[report.nodeid] = (text[-1] if text else "")[:500]


def tests(z: Sizes) -> dict:
    import pytest

    files = list(z.tests_files) if z.tests_files is not None else gpu_test_files()
    if not files:
        raise Skipped("no test file holds a `gpu` mark")
    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "-m", "gpu", *files]
    if z.tests_select:
        args += ["-k", z.tests_select]
    os.chdir(ROOT)  # this process is the section's own: pytest runs in it
    outcomes = _Outcomes()
    t = time.perf_counter()
    code = int(pytest.main(args, plugins=[outcomes]))
    counts: dict[str, int] = {}
    for outcome in outcomes.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    if code not in (0, 1):  # 1: some failed (reported); others: pytest itself could not run
        raise RuntimeError(f"pytest exited {code} on {files}")
    return {
        "files": files,
        "select": z.tests_select,
        "returncode": code,
        "counts": counts,
        "failures": outcomes.failures,
        "wall_s": time.perf_counter() - t,
    }


# ---- speed: fused runs ------------------------------------------------------------------------
def short_config(name: str, seeds: int, prefill: int, train_steps: int):
    """`name`'s preset with `seeds` seeds, about `prefill` + `train_steps` env steps per seed
    (rounded to the preset's env batch and blocks) and no final evaluation."""
    from jaxrl_fast import presets

    cfg = presets.get(name)
    e, f = cfg.env.num_envs, cfg.train_frequency
    learning_starts = max(2 * e, prefill // e * e, -(-cfg.replay.batch_size // e) * e)
    if cfg.learning_starts == 0:  # a rollout learner has no prefill
        learning_starts = 0
    return cfg.replace(
        num_seeds=seeds,
        learning_starts=learning_starts,
        total_env_steps=learning_starts + max(1, train_steps // f) * f,
        eval_episodes=0,
        num_chunks=None,
    )


def fused_row(cfg) -> dict:
    """One fused `train` run's figures (no final evaluation in `short_config`'s runs)."""
    import jax

    from jaxrl_fast.run.train import train

    r = train(cfg, progress=False)
    row = {
        "num_seeds": cfg.num_seeds,
        "num_devices": r.num_devices,
        "env_steps_per_seed": r.env_steps,
        "compile_s": r.compile_time_s,
        "run_s": r.run_time_s,
        "env_steps_per_s": r.env_steps_per_s,
        "train_env_steps_per_s": r.train_env_steps_per_s,
        "precision": r.precision,
    }
    del r
    gc.collect()
    jax.clear_caches()
    return row


def cartpole(z: Sizes) -> dict:
    variants = [("auto", {}, s) for s in z.cartpole_seeds]
    top = max(z.cartpole_seeds)
    compare = {
        "fp32 highest": {"compute": "fp32", "matmul_precision": "highest"},
        "bf16": {"compute": "bf16"},
    }
    variants += [(name, compare[name], top) for name in z.cartpole_compare]
    rows = []
    for name, precision, seeds in variants:
        print(f"  cartpole {name}, {seeds} seeds", flush=True)
        cfg = short_config("cartpole", seeds, z.cartpole_prefill, z.cartpole_train)
        rows.append({"variant": name, **fused_row(cfg.replace(precision=precision))})
    return {"preset": "cartpole", "env": "CartPole-v1", "rows": rows}


def minatar(z: Sizes) -> dict:
    rows = []
    for name in z.minatar_presets:
        print(f"  {name}, {z.minatar_seeds} seeds", flush=True)
        cfg = short_config(name, z.minatar_seeds, z.minatar_prefill, z.minatar_train)
        rows.append({"preset": name, "learner": cfg.learner, **fused_row(cfg)})
    return {"env": "Breakout-MinAtar", "rows": rows}


# ---- the PureJaxRL-style reference loop, side by side -----------------------------------------
def _library_program(config):
    import jax

    from jaxrl_fast.loop import make_train
    from jaxrl_fast.parallel.seeds import train_keys
    from jaxrl_fast.run.programs import init_compiler_options

    t = time.perf_counter()
    fns = make_train(config)
    keys = train_keys(config)
    options = init_compiler_options(jax.devices()[0].platform)  # as `train` compiles it
    init = jax.jit(fns.init).lower(keys).compile(compiler_options=options)
    chunk = jax.jit(fns.run_chunk, donate_argnums=0).lower(jax.eval_shape(fns.init, keys)).compile()

    def run():
        runner = init(keys)
        for _ in range(config.chunks):
            runner, metrics = chunk(runner)
        jax.block_until_ready((runner, metrics))

    return run, time.perf_counter() - t


def _reference_program(config):
    import jax
    import reference_loop

    from jaxrl_fast.parallel.seeds import train_keys

    t = time.perf_counter()
    train, _ = reference_loop.make_train(config)
    keys = train_keys(config)
    program = jax.jit(jax.vmap(train)).lower(keys).compile()
    return (lambda: jax.block_until_ready(program(keys))), time.perf_counter() - t


def reference(z: Sizes) -> dict:
    """`cartpole-cleanrl` in this library's loop and in the PureJaxRL-style one
    (`benchmarks/reference_loop.py`): each compiled once, then run in turns, A B B A ..."""
    missing = flashbax_missing()
    if missing:
        raise Skipped(f"the reference loop needs flashbax: {missing}")
    import jax

    from jaxrl_fast import presets

    base = presets.get("cartpole-cleanrl")
    starts = min(base.learning_starts, z.reference_steps // 3 // 10 * 10)
    base = base.replace(total_env_steps=z.reference_steps, learning_starts=starts, eval_episodes=0)
    rows = []
    for s in z.reference_seeds:
        config = base.replace(num_seeds=s)
        print(f"  cartpole-cleanrl, {s} seeds: compiling both loops", flush=True)
        programs = {"jaxrl_fast": _library_program(config), "reference": _reference_program(config)}
        turns: dict[str, list[float]] = {k: [] for k in programs}
        for r in range(z.reference_rounds):
            for side in ["jaxrl_fast", "reference"] if r % 2 == 0 else ["reference", "jaxrl_fast"]:
                t = time.perf_counter()
                programs[side][0]()
                turns[side].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in turns.items()}
        rows.append(
            {
                "num_seeds": s,
                "env_steps_per_seed": config.total_env_steps,
                "compile_s": {k: p[1] for k, p in programs.items()},
                "run_s": turns,
                "env_steps_per_s": {k: s * config.total_env_steps / v for k, v in med.items()},
                "run_ratio_reference_over_jaxrl_fast": med["reference"] / med["jaxrl_fast"],
            }
        )
        del programs
        gc.collect()
        jax.clear_caches()
    return {"preset": "cartpole-cleanrl", "rounds": z.reference_rounds, "rows": rows}


# ---- the Nature-CNN update per precision ------------------------------------------------------
def precision(z: Sizes) -> dict:
    import precision as precision_bench

    model = next(m for m in precision_bench.MODELS if m.startswith(z.precision_model))
    variants = {
        "fp32 (highest)": {"compute": "fp32", "matmul_precision": "highest", "fallback": False},
        "TF32 (fp32, default)": {"compute": "fp32", "fallback": False},
        "bf16": {"compute": "bf16", "fallback": False},
        "fp16": {"compute": "fp16", "fallback": False},
    }
    tables = []
    for b in z.precision_batches:
        print(f"  {model}, batch {b}", flush=True)
        t = precision_bench.update_step(
            model, z.precision_steps, z.precision_repeats, batch=b, variants=variants
        )
        tables.append({**t, "batch": b, "model": model.rsplit(", batch", 1)[0]})
    return {"tables": tables}


# ---- replay: PER against the ring buffer (and flashbax where it is there) ---------------------
def flashbax_missing() -> str | None:
    """Why flashbax cannot be used here (None when it can)."""
    if importlib.util.find_spec("flashbax") is None:
        return "flashbax is not installed (the kit's wheels, or pip install -e '.[bench]')"
    try:
        import flashbax  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"flashbax cannot be imported: {type(e).__name__}: {e}"
    return None


def replay(z: Sizes) -> dict:
    import jax
    import numpy as np
    import replay as replay_bench

    from jaxrl_fast.replay.memory import available_memory

    device = "gpu" if jax.default_backend() == "gpu" else "cpu"
    missing = flashbax_missing()
    cells = []
    for obs_name in z.replay_obs:
        shape, dtype = replay_bench.OBS[obs_name]
        # obs and next obs per row, with room to spare: what a cell must find free
        need = 3 * z.replay_rows * int(np.prod(shape)) * np.dtype(dtype).itemsize
        methods, fill_s, skipped = {}, {}, {}
        for impl in ("ours", "flashbax"):
            if impl == "flashbax" and missing:
                skipped[impl] = missing
                continue
            free, source = available_memory(jax.devices()[0])
            if free < need:
                skipped[impl] = (
                    f"needs about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free ({source})"
                )
                continue
            print(f"  {obs_name} rows, {z.replay_rows:,}: {impl}", flush=True)
            if impl == "ours":
                timers, info = replay_bench.ours_timers(
                    z.replay_rows, shape, dtype, z.replay_iters, uniform=True, host=False
                )
            else:
                timers, info = replay_bench.flashbax_timers(
                    z.replay_rows, shape, dtype, z.replay_iters, device=device
                )
            fill_s[impl] = info[f"{impl}_fill_s"]
            methods.update(replay_bench.measure(timers, z.replay_repeats))
            del timers, info  # this buffer is freed before the next is made
            gc.collect()
            jax.clear_caches()

        def ratio(a, b, methods=methods):
            return (
                replay_bench.ratio(methods[a], methods[b])
                if a in methods and b in methods
                else None
            )

        cells.append(
            {
                "obs": obs_name,
                "capacity": z.replay_rows,
                "batch": replay_bench.BATCH,
                "fill_s": fill_s,
                "skipped": skipped,
                "methods": methods,
                "ours_sum_tree_over_ours_uniform": ratio("ours_sum_tree", "ours_uniform"),
                "flashbax_per_over_ours_sum_tree": ratio("flashbax_per", "ours_sum_tree"),
            }
        )
    return {"flashbax_device": device, "flashbax_missing": missing, "cells": cells}


# ---- the L3 host tier's cost ------------------------------------------------------------------
def l3(z: Sizes) -> dict:
    """`replay_loop.l3_overhead` (L3 off / host / disk; `only` some), with the extra
    milliseconds per L3 read call that each variant's slowdown implies (spills included)."""
    import replay_loop as replay_loop_bench

    with tempfile.TemporaryDirectory(prefix="jaxrl_fast-gpu-spill-") as spill_dir:
        t = replay_loop_bench.l3_overhead(
            z.l3_preset, z.l3_env_steps, 1, spill_dir, capacity=z.l3_l2_rows,
            learning_starts=z.l3_prefill, only=z.l3_only,
        )  # fmt: skip
    train_steps = z.l3_env_steps - t["learning_starts"]
    off = next(r for r in t["rows"] if r["variant"] == "L3 off")
    off_s = train_steps / off["train_env_steps_per_s_median"]
    for row in t["rows"]:
        calls = row["replay_counters"].get("l3_read_calls")
        extra_s = train_steps / row["train_env_steps_per_s_median"] - off_s
        row["extra_ms_per_l3_read_call"] = 1e3 * extra_s / calls if calls else None
    return t


# ---- Atari, where envpool is installed --------------------------------------------------------
def atari(z: Sizes) -> dict:
    if importlib.util.find_spec("envpool") is None:
        import wheels

        kit = wheels.read_manifest(os.environ.get("KIT_WHEELS", os.path.join(HERE, "wheels")))
        why = (kit or {}).get("atari", {}).get("reason") or "envpool is not installed"
        raise Skipped(f"Atari left out: {why}")
    rows = []
    for s in z.atari_seeds:
        print(f"  atari-pong fused, {s} seeds", flush=True)
        cfg = short_config("atari-pong", s, z.atari_prefill, z.atari_train)
        if z.atari_replay_rows is not None:
            cfg = cfg.replace(replay=dict(capacity=z.atari_replay_rows))
        rows.append(fused_row(cfg))
    return {"preset": "atari-pong", "rows": rows}


# ---- learning: wall time to a score -----------------------------------------------------------
class _Stop(Exception):
    """Raised from `time_to_score`'s chunk callback: the score was reached, or time is up."""


def time_to_score(preset: str, seeds: int, score: float, z: Sizes) -> dict:
    """Wall time from `train(config)`'s call (compile included) to the first evaluation whose
    mean greedy return over the seeds reaches `score`; the run stops there, at the end of its
    budget, or when this section's time is nearly up (then it says so)."""
    import jax
    import numpy as np

    from jaxrl_fast import presets
    from jaxrl_fast.run.train import train

    cfg = presets.get(preset)
    if z.learn_steps is not None:
        blocks = max(z.learn_evals, (z.learn_steps - cfg.learning_starts) // cfg.train_frequency)
        cfg = cfg.replace(total_env_steps=cfg.learning_starts + blocks * cfg.train_frequency)
    n = cfg.num_blocks
    chunks = min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - z.learn_evals))
    per_chunk = (cfg.total_env_steps - cfg.learning_starts) // chunks
    cfg = cfg.replace(num_seeds=seeds, num_chunks=chunks, eval_every=per_chunk,
                      eval_episodes=z.learn_episodes)  # fmt: skip
    curve, why = [], {"stopped": "budget"}
    t0 = time.perf_counter()

    def on_chunk(rec: dict) -> None:
        if "eval_return" in rec:
            returns = np.asarray(rec["eval_return"], float)
            curve.append(
                {
                    "env_steps": rec["env_steps"],
                    "wall_s": time.perf_counter() - t0,
                    "mean": float(returns.mean()),
                    "share_of_seeds_at_score": float((returns >= score).mean()),
                }
            )
            if curve[-1]["mean"] >= score:
                why["stopped"] = "reached"
                raise _Stop
        if _left_s() < 15:
            why["stopped"] = "section time"
            raise _Stop

    try:
        train(cfg, progress=False, on_chunk=on_chunk)
    except _Stop:  # the score reached, or the section's time nearly up: `why` says which
        assert why["stopped"] in ("reached", "section time"), why
    wall = time.perf_counter() - t0
    jax.clear_caches()
    reached = why["stopped"] == "reached"
    return {
        "preset": preset,
        "env": cfg.env.name,
        "num_seeds": seeds,
        "score": score,
        "budget_env_steps": cfg.total_env_steps,
        "reached": reached,
        "stopped": why["stopped"],
        "wall_s_to_score": curve[-1]["wall_s"] if reached else None,
        "env_steps_to_score": curve[-1]["env_steps"] if reached else None,
        "wall_s": wall,
        "curve": curve,
    }


def learn_cartpole(z: Sizes) -> dict:
    preset, seeds, score = z.learn_cartpole
    return time_to_score(preset, seeds, score, z)


def learn_pqn(z: Sizes) -> dict:
    preset, seeds, score = z.learn_pqn
    return time_to_score(preset, seeds, score, z)


SECTIONS = {
    "imports": imports,
    "tests": tests,
    "cartpole": cartpole,
    "reference": reference,
    "minatar": minatar,
    "precision": precision,
    "replay": replay,
    "l3": l3,
    "atari": atari,
    "learn_cartpole": learn_cartpole,
    "learn_pqn": learn_pqn,
}


def run_one(name: str, tiny: bool, path: str, deadline: float) -> None:
    """A child's side: run one section; write `{status, result | reason, device}` to `path`."""
    global DEADLINE
    DEADLINE = deadline
    z = TINY if tiny else Sizes()
    try:
        rec = {"status": "ok", "result": SECTIONS[name](z)}
    except Skipped as e:
        rec = {"status": "skipped", "reason": str(e)}
    import jax

    device = jax.devices()[0]
    rec["device"] = {
        "backend": jax.default_backend(),
        "device_kind": device.device_kind,
        "jax": jax.__version__,
    }
    with open(path + ".tmp", "w") as f:
        json.dump(rec, f)
    os.replace(path + ".tmp", path)
