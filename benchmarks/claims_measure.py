"""`benchmarks/claims.py`'s measuring half: the budgets (`Settings`), the article's figures,
each training run in a fresh process (fused and conventional, timed through the baseline's public
hooks), the energy meter, the layouts, and the committed results it reads (`measure`)."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import common  # noqa: E402
from common import machine  # noqa: E402

RESULTS = common.RESULTS  # the committed results of every script, read by `measure`
VERDICTS = ("holds", "holds in part", "does not hold")

# The article's figures (the seed article of the project; quoted as issue 14 gives them).
ARTICLE = {
    "training_time": {
        "claim": "training time",
        "figure": "72 h -> 26 s (~10,000x)",
        "x": 72 * 3600 / 26,
    },
    "final_score": {"claim": "final score", "figure": "12,345 -> 12,338 (-0.06%)", "pct": -0.06},
    "memory": {"claim": "memory", "figure": "32 GB -> 1.2 GB (26.7x)", "x": 32 / 1.2},
    "energy": {"claim": "energy", "figure": "18.6 kWh -> 0.002 kWh (9,300x)", "x": 9_300},
    "cost": {"claim": "cost", "figure": "under $10 (one case: $3,000 -> $0.28)", "x": 3000 / 0.28},
    "graph": {
        "claim": "graph optimisation",
        "figure": "8.3x (37% of a DQN graph's nodes never used)",
        "x": 8.3,
        "share": 0.37,
    },
    "precision": {"claim": "mixed precision", "figure": "4.1x", "x": 4.1},
    "sampling": {
        "claim": "replay sampling",
        "figure": "~120x (72% of time waiting on I/O; O(n log n) -> O(n))",
        "x": 120.0,
        "share": 0.72,
    },
    "l2_hit_rate": {"claim": "L2 hit rate", "figure": ">= 85%", "rate": 0.85},
}

# Power per vCPU for the energy estimate: AMD EPYC 7763, 280 W maximum cTDP over 64 cores /
# 128 threads (AMD's EPYC 7003 line-up, March 2021). This VM reports only "AMD EPYC"; the
# figure is the CPU package's share per hardware thread at full TDP, without DRAM, board,
# cooling or idle power.
WATTS_PER_VCPU = 280 / 128
WATTS_SOURCE = (
    "AMD EPYC 7763: 280 W max cTDP / 128 threads = 2.19 W per vCPU (AMD EPYC 7003 line-up, "
    "2021); CPU package only, no DRAM, board or cooling"
)
# The hourly price for the cost row: an assumption, not a quote looked up on the day (the
# machine that wrote the results has no network access).
T4_SPOT_USD_PER_H = 0.20
T4_SOURCE = (
    "assumed spot price of one NVIDIA T4 instance (AWS g4dn.xlarge, us-east-1; on-demand list "
    "price $0.526/h), as assumed on 2026-12-04; pass --t4-price to use your own"
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Budgets of one claims run.

    Attributes:
      name: "full", "quick" or a test's name.
      preset: the preset of the time-to-score runs; overrides: `--set`-style changes to it.
      env_steps: env steps per seed of those runs (None: the preset's budget).
      seeds: seeds run with each loop (seed s is `config.replace(seed=s)`, one seed per run).
      threshold: the mean training-episode return (per chunk) counted as "reached".
      pong_train_steps: training env steps of the Pong throughput runs (None: skipped).
      xla_preset, xla_overrides, xla_env_steps: the run `xla_report.report` analyses.
      l3_preset, l3_overrides, l3_env_steps, l3_shares: the L3 runs (one per share).
      subprocess: each training run in a fresh process (peak RSS per run); False runs them in
        this process (tests) and leaves RSS unmeasured.
    """

    name: str
    preset: str = "minatar-breakout"
    overrides: tuple[tuple[str, Any], ...] = ()
    env_steps: int | None = None
    seeds: int = 3
    threshold: float = 4.0
    pong_train_steps: int | None = 2_048
    xla_preset: str = "minatar-breakout"
    xla_overrides: tuple[tuple[str, Any], ...] = ()
    xla_env_steps: int | None = 60_000
    l3_preset: str = "cartpole-cleanrl"
    l3_overrides: tuple[tuple[str, Any], ...] = ()
    l3_env_steps: int = 60_000
    l3_shares: tuple[float, ...] = (0.1, 0.2)
    subprocess: bool = True


FULL = Settings(name="full")
QUICK = Settings(
    name="quick",
    env_steps=42_000,
    seeds=1,
    threshold=1.0,
    pong_train_steps=None,
    xla_preset="cartpole-cleanrl",
    xla_env_steps=30_000,
    l3_env_steps=30_000,
    l3_shares=(0.1,),
)


def preset_config(preset: str, overrides, env_steps: int | None):
    from jaxrl_fast import presets
    from jaxrl_fast.config import options

    changes = dict(overrides)
    if env_steps is not None:
        changes["total_env_steps"] = env_steps
    return options.apply(presets.get(preset), changes)


def _preset_steps(preset: str, overrides) -> int:
    """The budget of `preset` with `overrides` (before any shortening)."""
    from jaxrl_fast import presets

    return dict(overrides).get("total_env_steps", presets.get(preset).total_env_steps)


# -- one training run (in a child process) ------------------------------------------------------


def _num(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def chunk_ends(config) -> list[int]:
    """Env steps per seed at the end of each of the fused run's chunks (the curve's windows)."""
    per = config.blocks_per_chunk * config.train_frequency
    return [config.learning_starts + (k + 1) * per for k in range(config.chunks)]


def run_fused(config) -> dict:
    """One fused run (`train`, 1 seed): timings, its chunk curve and final return."""
    from jaxrl_fast.run.train import train

    r = train(config.replace(num_seeds=1), progress=False)
    curve = [
        {
            "env_steps": h["env_steps"],
            "t_s": h["elapsed_s"],  # since the start of init, compile excluded
            "return": _num(h["episode_return"][0]),
            "episodes": int(h["episodes"][0]),
        }
        for h in r.history
    ]
    return {
        "loop": "fused",
        "env_steps": r.env_steps,
        "compile_s": r.compile_time_s,
        "run_s": r.run_time_s,
        "eval_s": r.eval_time_s,
        "train_env_steps_per_s": r.train_env_steps_per_s,
        "final_return": _num(r.final_return[0]),
        "curve": curve,
    }


def run_conventional(config) -> dict:
    """One conventional run (`baseline.train_unfused`), timed through its public hooks: each
    collect step's start time and the episodes ended by then (for the same chunk curve as the
    fused run's), and the time spent in its host replay (`BaselineResult.replay_time_s`)."""
    from jaxrl_fast import baseline

    starts: list[float] = []
    episodes: list[int] = []

    def on_collect(index: int, started_s: float, done: int) -> None:
        starts.append(started_s)
        episodes.append(done)

    r = baseline.train_unfused(config, on_collect=on_collect)
    e = config.env.num_envs
    curve, done = [], 0
    for end in chunk_ends(config):
        last = end // e - 1  # the window's last collect step
        if last >= len(episodes):
            break
        n = episodes[last]
        rets = r.episode_returns[done:n]
        curve.append(
            {
                "env_steps": end,
                # the next collect step starts after this window's last updates
                "t_s": starts[last + 1] if last + 1 < len(starts) else r.run_time_s,
                "return": statistics.fmean(rets) if rets else None,
                "episodes": n - done,
            }
        )
        done = n
    rep = r.replay
    return {
        "loop": "conventional",
        "env_steps": r.env_steps,
        "compile_s": r.compile_time_s,
        "run_s": r.run_time_s,
        "eval_s": r.eval_time_s,
        "train_env_steps_per_s": r.train_env_steps_per_s,
        "final_return": _num(r.final_return),
        "curve": curve,
        "host_replay_s": r.replay_time_s,
        "host_replay_share": r.replay_time_s / max(r.run_time_s, 1e-9),
        "host_replay_allocated_bytes": sum(
            a.nbytes for a in (rep.obs, rep.next_obs, rep.action, rep.reward, rep.terminated)
        ),
    }


def _run_here(loop: str, config) -> dict:
    import jax

    t = time.perf_counter()
    out = (run_fused if loop == "fused" else run_conventional)(config)
    out["process_wall_s"] = time.perf_counter() - t
    stats = jax.local_devices()[0].memory_stats()
    out["device_peak_bytes"] = None if not stats else stats.get("peak_bytes_in_use")
    return out


def child(spec_path: str, out_path: str) -> None:
    """The child process: run one loop on one config and write what it measured."""
    t = time.perf_counter()
    with open(spec_path) as f:
        spec = json.load(f)
    from jaxrl_fast.config import options

    out = _run_here(spec["loop"], options.from_dict(spec["config"]))
    use = resource.getrusage(resource.RUSAGE_SELF)
    out["peak_rss_bytes"] = use.ru_maxrss * 1024  # KiB on Linux
    out["cpu_s"] = use.ru_utime + use.ru_stime  # the whole process: import, compile, run
    out["process_wall_s"] = time.perf_counter() - t  # from the child's own start
    with open(out_path, "w") as f:
        json.dump(out, f)


def run_loop(loop: str, config, settings: Settings) -> dict:
    """Run `loop` ("fused" or "conventional") on `config`, in a fresh process when
    `settings.subprocess`; adds measured energy where the machine exposes it."""
    meter = EnergyMeter()
    if not settings.subprocess:
        cpu = time.process_time()
        with meter:
            out = _run_here(loop, config)
        out.update(peak_rss_bytes=None, cpu_s=time.process_time() - cpu)  # this process's
    else:
        with tempfile.TemporaryDirectory(prefix="claims-") as d:
            spec, res = os.path.join(d, "spec.json"), os.path.join(d, "out.json")
            with open(spec, "w") as f:
                json.dump({"loop": loop, "config": config.to_dict()}, f)
            cmd = [sys.executable, os.path.join(common.HERE, "claims.py"), "--child", spec, res]
            t = time.perf_counter()
            with meter:
                subprocess.run(cmd, check=True, timeout=1800)
            with open(res) as f:
                out = json.load(f)
            out["spawn_wall_s"] = time.perf_counter() - t  # python start + import included
    out["energy"] = meter.result()
    return out


# -- energy ---------------------------------------------------------------------------------------


class EnergyMeter:
    """Joules from RAPL package counters (powercap) and `nvidia-smi` power samples, where the
    machine exposes them; `result()` says what was readable."""

    def __init__(self) -> None:
        self.zones = [
            z for z in sorted(glob.glob("/sys/class/powercap/intel-rapl:*")) if z.count(":") == 1
        ]
        self.smi = shutil.which("nvidia-smi")
        self._rapl0: list[int] | None = None
        self.rapl_j: float | None = None
        self.gpu_j: float | None = None
        self._samples: list[float] = []
        self._proc = None

    def _rapl(self) -> list[int] | None:
        try:
            return [int(open(os.path.join(z, "energy_uj")).read()) for z in self.zones] or None
        except (OSError, ValueError):  # present but not readable (root only on most kernels)
            return None

    def __enter__(self) -> "EnergyMeter":
        self._rapl0 = self._rapl()
        if self.smi:
            self._proc = subprocess.Popen(
                [
                    self.smi,
                    "--query-gpu=power.draw",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "200",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
        self._t = time.perf_counter()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            with contextlib.suppress(ValueError):
                self._samples.append(sum(float(x) for x in line.split(",")))

    def __exit__(self, *exc) -> None:
        dt = time.perf_counter() - self._t
        end = self._rapl()
        if self._rapl0 is not None and end is not None:
            total = 0
            for z, a, b in zip(self.zones, self._rapl0, end, strict=True):
                if b < a:  # the counter wrapped
                    b += int(open(os.path.join(z, "max_energy_range_uj")).read())
                total += b - a
            self.rapl_j = total / 1e6
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait()
            self._reader.join(timeout=2)
            if self._samples:
                self.gpu_j = statistics.fmean(self._samples) * dt

    def result(self) -> dict:
        return {"rapl_j": self.rapl_j, "gpu_j": self.gpu_j}


def energy_probe() -> dict:
    """What this machine exposes for energy measurement."""
    m = EnergyMeter()
    return {
        "rapl_zones": m.zones,
        "rapl_readable": m._rapl() is not None,
        "nvidia_smi": m.smi,
    }


def joules(run: dict) -> tuple[float | None, str]:
    """A run's energy: RAPL (+ GPU) if measured, else its CPU-seconds x WATTS_PER_VCPU."""
    e = run.get("energy") or {}
    if e.get("rapl_j") is not None:
        return e["rapl_j"] + (e.get("gpu_j") or 0.0), "measured (RAPL" + (
            " + nvidia-smi)" if e.get("gpu_j") is not None else ")"
        )
    if run.get("cpu_s") is None:
        return None, "not measured (in-process run)"
    return run["cpu_s"] * WATTS_PER_VCPU + (e.get("gpu_j") or 0.0), "estimate: CPU-s x W per vCPU"


# -- measurements ---------------------------------------------------------------------------------


def time_to(run: dict, threshold: float) -> dict | None:
    """The first chunk whose mean training-episode return reaches `threshold`: its env steps,
    run time since init (compile excluded) and wall time with the compile; None if none."""
    for c in run["curve"]:
        if c["return"] is not None and c["return"] >= threshold:
            return {
                "env_steps": c["env_steps"],
                "run_s": c["t_s"],
                "wall_s": c["t_s"] + run["compile_s"],
            }
    return None


def measure_training(settings: Settings) -> dict:
    """Fused vs conventional, seed by seed, on the settings' preset (each run a fresh process)."""
    base = preset_config(settings.preset, settings.overrides, settings.env_steps)
    seeds = []
    for s in range(settings.seeds):
        cfg = base.replace(seed=s, num_seeds=1)
        row = {"seed": s}
        for loop in ("fused", "conventional"):
            print(f"  {settings.preset} seed {s}: {loop}", flush=True)
            row[loop] = run_loop(loop, cfg, settings)
            row[loop]["to_threshold"] = time_to(row[loop], settings.threshold)
        seeds.append(row)
    return {
        "preset": settings.preset,
        "overrides": dict(settings.overrides),
        "env_steps": base.total_env_steps,
        "preset_env_steps": _preset_steps(settings.preset, settings.overrides),
        "threshold": settings.threshold,
        "chunk_env_steps": base.blocks_per_chunk * base.train_frequency,
        "seeds": seeds,
    }


def measure_pong(settings: Settings) -> dict:
    """`atari-pong` fused vs conventional throughput at a short budget (1 seed each)."""
    if settings.pong_train_steps is None:
        return {"skipped": f"not run in the {settings.name} settings"}
    try:
        import envpool  # noqa: F401
    except ImportError as e:
        return {"skipped": f"envpool not importable ({e})"}
    import atari as atari_bench

    cfg = atari_bench._short(settings.pong_train_steps, 1)
    out = {
        "preset": "atari-pong",
        "train_env_steps": settings.pong_train_steps,
        "learning_starts": cfg.learning_starts,
    }
    for loop in ("fused", "conventional"):
        print(f"  atari-pong: {loop}", flush=True)
        out[loop] = run_loop(loop, cfg, settings)
    return out


def measure_xla(settings: Settings) -> dict:
    """`xla_report.report` on the settings' run: (a) and (d), and the run_chunk's memory."""
    from jaxrl_fast import xla_report

    cfg = preset_config(settings.xla_preset, settings.xla_overrides, settings.xla_env_steps)
    rep = xla_report.report(cfg.replace(num_seeds=1)).to_dict()
    chunk = rep["programs"]["run_chunk"]
    per = rep["timing"]["per_iteration_s"]
    return {
        "preset": settings.xla_preset,
        "env_steps": cfg.total_env_steps,
        "run": rep["run"],
        "jaxpr": {
            k: chunk["jaxpr"][k]
            for k in (
                "traced",
                "after_jax_dce",
                "reaching_no_output",
                "no_output_share",
                "no_output_by_primitive",
                "removed_by_jax_dce",
            )
        },
        "fusions": chunk["hlo_optimised"]["fusions"],
        "fusions_lowest": (chunk["hlo_optimised_lowest"] or {}).get("fusions"),
        "hlo_lowered": chunk["hlo_lowered"]["instructions"],
        "hlo_optimised": chunk["hlo_optimised"]["instructions"],
        "per_iteration_s": per,
        "op_by_op_over_jit": per["op_by_op"] / per["jit_default"],
        "lowest_over_default": per["jit_lowest"] / per["jit_default"],
        "compile_s": rep["timing"]["compile_s"],
        "run_chunk_peak_bytes": chunk["cost"]["peak_bytes"],
        "unfused_per_env_step": rep["unfused"]["per_env_step"],
    }


def measure_l3(settings: Settings) -> list[dict]:
    """Short fused runs with the L3 tier on (host RAM, L3 10x L2): the L2 hit rate."""
    from jaxrl_fast.run.train import train

    base = preset_config(settings.l3_preset, settings.l3_overrides, settings.l3_env_steps)
    cap = base.replay.capacity
    out = []
    for share in settings.l3_shares:
        cfg = base.replace(
            num_seeds=1, replay=dict(l3="host", l3_capacity=10 * cap, l3_share=share)
        )
        print(f"  {settings.l3_preset} L3 host, l3_share {share}", flush=True)
        r = train(cfg, progress=False)
        rec = r.history[-1].get("replay", {})
        out.append(
            {
                "preset": settings.l3_preset,
                "env_steps": cfg.total_env_steps,
                "l2_rows": cap,
                "l3_rows": 10 * cap,
                "l3_share": share,
                "l3_rows_per_batch": cfg.replay.l3_rows_per_batch,
                "batch_size": cfg.replay.batch_size,
                "l2_hit_rate_last_chunk": rec.get("l2_hit_rate", [None])[0],
                "counters_last_chunk": rec,
            }
        )
    return out


def layout_bytes(preset: str, overrides=(), env_steps: int | None = None) -> dict:
    """Bytes per stored transition: ours (`replay.layout`) vs the conventional obs + next_obs."""
    from jaxrl_fast.replay import layout, sizing

    cfg = preset_config(preset, overrides, env_steps)
    shape, dtype, stack = sizing.obs_spec(cfg, None)
    ours = layout.row_bytes(shape, dtype, stack)
    naive = layout.naive_row_bytes(shape, dtype)
    return {
        "preset": preset,
        "obs": f"{'x'.join(map(str, shape))} {dtype}",
        "ours": ours,
        "conventional": naive,
        "ratio": naive / ours,
        "capacity": cfg.replay.capacity,
        "million_rows_gb": {"ours": ours * 1e6 / 1e9, "conventional": naive * 1e6 / 1e9},
    }


def atari_layout() -> dict:
    """The Atari bytes per transition (84x84x4 uint8, 4-frame dedup), from `replay.layout`."""
    from jaxrl_fast.replay import layout

    shape = (84, 84, 4)
    ours, naive = layout.row_bytes(shape, "uint8", 4), layout.naive_row_bytes(shape, "uint8")
    stack = layout.row_bytes(shape, "uint8")
    return {
        "obs": "84x84x4 uint8",
        "ours": ours,
        "whole_stack": stack,
        "conventional": naive,
        "ratio": naive / ours,
        "million_rows_gb": {
            "ours": ours / 1e3,
            "whole_stack": stack / 1e3,
            "conventional": naive / 1e3,
        },
    }


def read_precision(results: str) -> dict:
    """The CPU update-step rows of precision.json, and whether the GPU kit's gpu_run.json (a
    GPU's precision rows) is present."""
    with open(os.path.join(results, "precision", "precision.json")) as f:
        p = json.load(f)
    rows = []
    for u in p["update_step"]:
        fp32 = next(r for r in u["rows"] if r["compute"] == "fp32")["ms_per_update_median"]
        for r in u["rows"]:
            if r["compute"] != "fp32":
                rows.append(
                    {
                        "model": u["model"],
                        "compute": r["compute"],
                        "fp32_ms": fp32,
                        "ms": r["ms_per_update_median"],
                        "speedup": fp32 / r["ms_per_update_median"],
                    }
                )
    e2e = {k: v["speed_vs_fp32"] for k, v in p["end_to_end"]["runs"].items() if k != "fp32"}
    gpu_path = os.path.join(results, "gpu", "gpu_run.json")
    return {
        "machine": p["machine"],
        "rows": rows,
        "end_to_end_speed_vs_fp32": e2e,
        "end_to_end_preset": p["end_to_end"]["preset"],
        "gpu_results": os.path.exists(gpu_path),
    }


def read_replay(results: str) -> dict:
    """replay.json's ratios: ours (sum tree, PER sample + priority update) vs the others."""
    with open(os.path.join(results, "replay", "replay.json")) as f:
        r = json.load(f)
    cells = [{"obs": c["obs"], "capacity": c["capacity"], **c["ratios"]} for c in r["cells"]]
    keys = (
        "numpy_python_over_ours_sum_tree",
        "numpy_vectorised_over_ours_sum_tree",
        "flashbax_per_over_ours_sum_tree",
        "ours_cumsum_over_ours_sum_tree",
    )
    return {
        "machine": r["machine"],
        "batch_size": r["batch_size"],
        "cells": cells,
        "range": {k: [min(c[k] for c in cells), max(c[k] for c in cells)] for k in keys},
    }


def measure(settings: Settings, results: str = RESULTS) -> dict:
    """Run or read every measurement the claim rows need."""
    t0 = time.perf_counter()
    out: dict = {"settings": dataclasses.asdict(settings), "machine": machine()}
    out["energy_probe"] = energy_probe()
    print(f"[1/5] time to score: {settings.preset}, {settings.seeds} seed(s) per loop", flush=True)
    out["training"] = measure_training(settings)
    print("[2/5] Pong throughput", flush=True)
    out["pong"] = measure_pong(settings)
    print(f"[3/5] xla_report: {settings.xla_preset}", flush=True)
    out["xla"] = measure_xla(settings)
    print("[4/5] L3 on: L2 hit rate", flush=True)
    out["l3"] = measure_l3(settings)
    print("[5/5] layouts and committed results", flush=True)
    out["layout"] = {
        "minatar": layout_bytes(settings.preset, settings.overrides, settings.env_steps),
        "atari": atari_layout(),
    }
    out["precision"] = read_precision(results)
    out["replay"] = read_replay(results)
    with open(os.path.join(results, "speedup", "speedup.json")) as f:
        sp = json.load(f)
    out["cartpole_speedup"] = {"train_throughput": sp["speedup_1_seed"], "machine": sp["machine"]}
    out["benchmark_time_s"] = time.perf_counter() - t0
    return out


# -- verdicts -------------------------------------------------------------------------------------
