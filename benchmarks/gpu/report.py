"""Markdown for the GPU kit's run (`run.py`): the plan and its outcome, then one part per section."""

from __future__ import annotations

import math


def _n(x, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:,.{digits}f}"


def _imports(r: dict) -> list[str]:
    v = ", ".join(f"{k} {x}" for k, x in r["versions"].items() if x)
    absent = ", ".join(k for k, x in r["versions"].items() if not x) or "none"
    lines = [f"{r['modules']} modules of `jaxrl_fast`, the benchmark modules and the kit's "
             f"({', '.join(r['kit_modules']) or 'no wheels'}) imported; "
             f"{len(r['failed'])} failed.", "", f"Versions: {v}. Not installed: {absent}."]  # fmt: skip
    kit = r["kit"]["manifest"]
    if kit:
        lines.append(
            f"Kit: {len(kit['wheels'])} wheels, {kit['wheels_bytes'] / 2**20:.2f} MiB; "
            f"Atari {'in' if kit['atari']['included'] else 'left out'}: {kit['atari']['reason']}."
        )
    lines += ["", *(f"- `{name}`: {why}" for name, why in r["failed"].items())]
    return lines


def _tests(r: dict) -> list[str]:
    counts = ", ".join(f"{n} {w}" for w, n in sorted(r["counts"].items())) or "none"
    lines = [f"`pytest -m gpu` over {len(r['files'])} file(s): {counts} in {r['wall_s']:.1f} s"]
    lines += [f"- `{node}`: {why}" for node, why in r["failures"].items()]
    return lines


def _speed(rows, first: str, key) -> list[str]:
    lines = [
        f"| {first} | seeds | devices | env steps / seed | compile s | env-steps/s (all seeds) "
        "| training-phase env-steps/s | precision |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {key(row)} | {row['num_seeds']:,} | {row['num_devices']} | "
            f"{row['env_steps_per_seed']:,} | {row['compile_s']:.1f} | {_n(row['env_steps_per_s'])} | "
            f"{_n(row['train_env_steps_per_s'])} | {row.get('precision', '-')} |"
        )
    return lines


def _cartpole(r: dict) -> list[str]:
    return [
        f"`{r['preset']}` ({r['env']}), DQN",
        "",
        *_speed(r["rows"], "variant", lambda x: x["variant"]),
    ]


def _minatar(r: dict) -> list[str]:
    return [
        r["env"],
        "",
        *_speed(r["rows"], "preset", lambda x: f"`{x['preset']}` ({x['learner']})"),
    ]


def _atari(r: dict) -> list[str]:
    return [f"`{r['preset']}`, fused", "", *_speed(r["rows"], "loop", lambda x: "fused")]


def _reference(r: dict) -> list[str]:
    lines = [
        f"`{r['preset']}`, each loop compiled once, then run in turns ({r['rounds']} each, "
        "A B B A ...); medians",
        "",
        "| seeds | env steps / seed | compile s (ours / reference) | env-steps/s ours "
        "| env-steps/s reference | reference time / ours |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        c, s = row["compile_s"], row["env_steps_per_s"]
        lines.append(
            f"| {row['num_seeds']:,} | {row['env_steps_per_seed']:,} | {c['jaxrl_fast']:.1f} / "
            f"{c['reference']:.1f} | {_n(s['jaxrl_fast'])} | {_n(s['reference'])} | "
            f"{row['run_ratio_reference_over_jaxrl_fast']:.2f}x |"
        )
    return lines


def _precision(r: dict) -> list[str]:
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


def _replay(r: dict) -> list[str]:
    lines = [
        f"µs per iteration (sample a batch of {r['cells'][0]['batch']} + write its priorities); "
        + (
            f"flashbax left out: {r['flashbax_missing']}"
            if r.get("flashbax_missing")
            else f"flashbax's kernel for `{r['flashbax_device']}`"
        ),  # fmt: skip
        "",
        "| rows | obs | ours uniform (ring) | ours PER sum tree | ours PER cumsum | flashbax PER "
        "| PER / uniform | flashbax PER / ours PER |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in r["cells"]:
        m = c["methods"]
        us = [_n(m[k]["us_per_iter"], 1) if k in m else "n/a"
              for k in ("ours_uniform", "ours_sum_tree", "ours_cumsum", "flashbax_per")]  # fmt: skip
        a, b = c["ours_sum_tree_over_ours_uniform"], c["flashbax_per_over_ours_sum_tree"]
        lines.append(
            f"| {c['capacity']:,} | {c['obs']} | {' | '.join(us)} | "
            f"{'n/a' if a is None else f'{a:.2f}x'} | {'n/a' if b is None else f'{b:.2f}x'} |"
        )
    skipped = [
        f"{c['obs']} {impl}: {why}" for c in r["cells"] for impl, why in c["skipped"].items()
    ]
    if skipped:
        lines += ["", "Left out: " + "; ".join(skipped)]
    return lines


def _l3(r: dict) -> list[str]:
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


def _learn(r: dict) -> list[str]:
    head = (
        f"`{r['preset']}` ({r['env']}), {r['num_seeds']:,} seeds, to a mean greedy return of "
        f"{r['score']:g}: "
    )
    if r["reached"]:
        head += (f"**{r['wall_s_to_score']:.1f} s** wall (compile included), at "
                 f"{r['env_steps_to_score']:,} env steps per seed")  # fmt: skip
    else:
        best = max((p["mean"] for p in r["curve"]), default=None)
        head += (f"not reached ({'its budget of ' + format(r['budget_env_steps'], ',') + ' env steps ended' if r['stopped'] == 'budget' else 'the section ran out of time'}"
                 f" after {r['wall_s']:.1f} s; best mean {_n(best, 1)})")  # fmt: skip
    lines = [head, "", "| env steps / seed | wall s | mean return | seeds at the score |",
             "|---:|---:|---:|---:|"]  # fmt: skip
    for p in r["curve"]:
        lines.append(f"| {p['env_steps']:,} | {p['wall_s']:.1f} | {p['mean']:.1f} | "
                     f"{100 * p['share_of_seeds_at_score']:.0f}% |")  # fmt: skip
    return lines


RENDER = {
    "imports": _imports,
    "tests": _tests,
    "cartpole": _cartpole,
    "reference": _reference,
    "minatar": _minatar,
    "precision": _precision,
    "replay": _replay,
    "l3": _l3,
    "atari": _atari,
    "learn_cartpole": _learn,
    "learn_pqn": _learn,
}


def render(r: dict) -> str:
    """The run's report: the plan, each section's outcome, then each finished section."""
    m = r["machine"]
    lines = [
        f"# GPU kit run{' (tiny: smoke sizes, not results)' if r['tiny'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}, Python {m['python']}; "
        f"jax {m['jax']} on {m['backend']} ({r['device_kind']}). Produced by `{r['command']}` "
        f"in {r.get('benchmark_time_s', 0):.0f} s of a {r['budget_s']:.0f} s budget.",
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
        if rec.get("result") is not None:
            lines += RENDER[name](rec["result"])
        elif rec["status"] == "skipped":
            lines.append(f"Skipped: {rec['reason']}")
        else:
            lines.append(f"{rec['status'].capitalize()}: `{rec['error']}`")
        lines.append("")
    return "\n".join(lines)
