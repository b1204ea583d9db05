"""Markdown for `benchmarks/gpu_check.py`'s results: the plan, then one table per section."""

from __future__ import annotations

import math

from common import machine_line


def _n(x, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:,.{digits}f}"


def _render_sweep(r: dict) -> list[str]:
    lines = [
        f"`{r['preset']}` ({r['env']}), {r['rows'][0]['env_steps_per_seed']:,} env steps per seed",
        "",
        "| precision | seeds | devices | compile s | env-steps/s (all seeds) "
        "| training-phase env-steps/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        lines.append(
            f"| {row.get('variant', 'auto')} | {row['num_seeds']:,} | {row['num_devices']} | "
            f"{row['compile_s']:.1f} | {_n(row['env_steps_per_s'])} | "
            f"{_n(row['train_env_steps_per_s'])} |"
        )
    return lines


def _render_envpool(r: dict) -> list[str]:
    counts = ", ".join(f"{n} {w}" for w, n in r["counts"].items()) or "-"
    return [f"`tests/envs/test_envpool.py`: {counts} in {r['wall_s']:.1f} s (pytest exit "
            f"{r['returncode']})"]  # fmt: skip


def _render_pong(r: dict) -> list[str]:
    lines = [
        f"`atari-pong`, {r['rows'][0]['env_steps_per_seed']:,} env steps per seed; the "
        "conventional loop's S seeds are S one-seed runs in a row: one run measured, counted S "
        "times (compile s: per run)",
        "",
        "| loop | seeds | compile s | env-steps/s (all seeds) | training-phase env-steps/s "
        "| fused / conventional |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        lines.append(
            f"| {row['loop']} | {row['num_seeds']} | {row['compile_s']:.1f} | "
            f"{_n(row['env_steps_per_s'])} | {_n(row['train_env_steps_per_s'])} | "
            f"{row['train_speed_vs_conventional']:.2f}x |"
        )
    return lines


def _render_precision(r: dict) -> list[str]:
    lines = [
        f"{r['tables'][0]['model']}, one DQN update (fwd + bwd + Adam) inside a jitted scan",
        "",
        "| batch | compute | ms / update | time vs fp32 | compile s | skipped updates |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for t in r["tables"]:
        for row in t["rows"]:
            lines.append(
                f"| {t['batch']} | {row['compute']} | {row['ms_per_update_median']:.3f} | "
                f"{row['time_vs_fp32']:.2f}x | {row['compile_s']:.1f} | {row['skipped_updates']} |"
            )
    return lines


def _render_per(r: dict) -> list[str]:
    lines = [
        f"µs per iteration (sample a batch of {r['cells'][0]['batch']} + write its priorities); "
        + (
            f"flashbax left out: {r['flashbax_missing']}"
            if r.get("flashbax_missing")
            else f"flashbax device kernel `{r['flashbax_device']}`"
        ),
        "",
        "| rows | obs | ours sum tree | ours cumsum | flashbax PER | flashbax uniform "
        "| flashbax PER / ours sum tree |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for c in r["cells"]:
        m = c["methods"]
        us = [
            _n(m[k]["us_per_iter"], 1) if k in m else "n/a"
            for k in ("ours_sum_tree", "ours_cumsum", "flashbax_per", "flashbax_uniform")
        ]
        ratio = c["flashbax_per_over_ours_sum_tree"]
        lines.append(
            f"| {c['capacity']:,} | {c['obs']} | {' | '.join(us)} | "
            + ("n/a |" if ratio is None else f"{_n(ratio, 1)}x |")
        )
    return lines


def _render_l3(r: dict) -> list[str]:
    lines = [
        f"`{r['preset']}`, 1 seed, {r['env_steps']:,} env steps, L2 {r['l2_rows']:,} rows, "
        f"L3 {r['l3_rows']:,} rows, {100 * r['l3_share']:.0f}% of each batch from L3",
        "",
        "| variant | training env-steps/s | slower than L3 off | L3 read calls "
        "| extra ms per read call |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        c = row["replay_counters"]
        lines.append(
            f"| {row['variant']} | {_n(row['train_env_steps_per_s_median'])} | "
            f"{100 * row['slowdown_vs_off']:+.1f}% | {c.get('l3_read_calls', '-')} | "
            f"{_n(row['extra_ms_per_l3_read_call'], 2)} |"
        )
    return lines


RENDER = {
    "envpool": _render_envpool,
    "cartpole": _render_sweep,
    "pong": _render_pong,
    "precision": _render_precision,
    "per": _render_per,
    "l3": _render_l3,
}


def render_check(r: dict) -> str:
    """`benchmarks/gpu_check.py`'s report: the plan, then each section finished so far."""
    m = r["machine"]
    tiny = " --tiny" if r["tiny"] else ""
    lines = [
        f"# GPU check{' (tiny: smoke sizes, not results)' if r['tiny'] else ''}",
        "",
        f"{machine_line(m)} ({r['backend']}: {r['device_kind']}; jax {r['jax']}). Produced by "
        f"`python benchmarks/gpu_check.py{tiny}` in {r.get('benchmark_time_s', 0):.0f} s of a "
        f"{r['budget_s']:.0f} s budget.",
        "",
        "| section | status | s | limit s |",
        "|---|---|---:|---:|",
    ]
    for name, limit in r["limits_s"].items():
        rec = r["sections"].get(name)
        if rec is None:
            lines.append(f"| {name} | not reached | - | {limit:.0f} |")
        else:
            lines.append(
                f"| {name} | {rec['status']} | {rec['wall_s']:.0f} | {rec['limit_s']:.0f} |"
            )
    lines.append("")
    for name, rec in r["sections"].items():
        lines += [f"## {name} ({rec['status']}, {rec['wall_s']:.0f} s)", ""]
        if rec["status"] == "ok":
            lines += RENDER[name](rec["result"])
            skipped = [
                f"{c['obs']} {impl}: {why}"
                for c in rec["result"].get("cells", [])
                for impl, why in c.get("skipped", {}).items()
            ]
            if skipped:
                lines += ["", "Cells left out: " + "; ".join(skipped)]
        elif rec["status"] == "skipped":
            lines.append(f"Skipped: {rec['reason']}")
        else:
            lines.append(f"{rec['status'].capitalize()}: `{rec['error']}`")
        lines.append("")
    return "\n".join(lines)
