"""How `benchmarks/applications.py`'s results read: `render(result)` writes the Markdown of an
`applications.json`, one section per recipe."""

from __future__ import annotations

import statistics

from common import machine_line

EPISODES = 64  # whole episodes behind each yardstick (applications.policy_return)


def render(res: dict) -> str:
    lines = [
        "# The article's environment-side recipes"
        + (" (quick: budgets / 10, not expected to learn)" if res["quick"] else ""),
        "",
        machine_line(res["machine"]),
        "",
        "## Action discretisation",
        "",
        f"Each preset trained with {res['seeds']} seeds in one program (final greedy return per "
        f"seed; wall time includes compile). Yardsticks: mean return of {EPISODES} whole "
        "episodes. `python benchmarks/applications.py` re-runs it.",
        "",
        "| preset | env | actions | env steps / seed | final greedy return per seed | mean | "
        "random | scripted | scripted on the grid | wall (s) |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in res["discretised"]:
        finals = ", ".join(f"{x:.1f}" for x in r["final_return"])
        lines.append(
            f"| `{r['preset']}` | {r['env']} | {r['discretise']}^{r['action_dims']} = "
            f"{r['num_actions']} | "
            f"{r['env_steps_per_seed']:,} | {finals} | {statistics.fmean(r['final_return']):.1f} "
            f"| {r['random']:.1f} | {r['scripted']:.1f} | {r['scripted_on_grid']:.1f} | "
            f"{r['wall_time_s']:.1f} |"
        )
    shaping = res.get("shaping")
    if shaping:
        lines += [
            "",
            "## Reward shaping",
            "",
            f"`{shaping['preset']}` ({shaping['env']}, {shaping['env_steps_per_seed']:,} env "
            f"steps per seed, {res['seeds']} seeds): the agent learns from rewards shaped by "
            f"`{shaping['shaping']}`; the returns below are the env's own (-1 per step until "
            "the flag, -200 when the episode times out; solved at -110).",
            "",
            "| rewards learned from | final greedy return per seed | mean | wall (s) |",
            "|---|---|---:|---:|",
        ]
        for label in ("unshaped", "shaped"):
            r = shaping[label]
            finals = ", ".join(f"{x:.1f}" for x in r["final_return"])
            lines.append(
                f"| {label} | {finals} | {statistics.fmean(r['final_return']):.1f} | "
                f"{r['wall_time_s']:.1f} |"
            )
    lines += _render_curriculum(res.get("curriculum"), res["seeds"])
    lines += _render_variants(res.get("variants"))
    lines += _render_compress(res.get("compress"))
    lines += _render_recurrent(res.get("recurrent"), res["seeds"])
    lines += _render_demos(res.get("demos"), res["seeds"])
    return "\n".join(lines) + "\n"


def _render_demos(d: dict | None, seeds: int) -> list[str]:
    if not d:
        return []
    lines = [
        "",
        "## Learning from demonstrations",
        "",
        f"Each preset ({seeds} seeds, one program per arm) trained for a short budget without "
        "and with demonstrations (DQfD: a share of every batch from the demonstrations, a "
        "large-margin loss on them, its weight decaying to 0 over the first half of the "
        "updates). Cells: the greedy return during training (mean over seeds, 10 episodes "
        "each) at each evaluation; `mean` is their mean (the area under the early curve). "
        "`python benchmarks/applications.py --only demos` re-runs it.",
        "",
    ]
    for r in d["runs"]:
        source = r["demo"]["source"]
        head = (
            f"**`{r['preset']}`** ({r['env']}; demonstrations: {source}, "
            f"{r['demo']['share']:.0%} of each batch)"
        )
        if "teacher" in r:
            t = r["teacher"]
            finals = ", ".join(f"{x:.1f}" for x in t["final_return"])
            head += (
                f". The recorded teacher: the `{t['preset']}` preset ({t['env_steps']:,} env "
                f"steps, final greedy {finals}); seed {t['seed_recorded']} played "
                f"{t['steps_recorded']:,} steps (epsilon 0.01, about "
                f"{t['recorded_return_per_episode']:.1f} per episode)."
            )
        lines.append(head)
        steps = r["without"]["eval_steps"]
        lines += [
            "",
            "| demonstrations | "
            + " | ".join(f"{s // 1000}k" for s in steps)
            + " | mean | final per seed | wall (s) |",
            "|---|" + "---:|" * len(steps) + "---:|---|---:|",
        ]
        for label in ("without", "with"):
            arm = r[label]
            means = [statistics.fmean(x) for x in arm["eval_return"]]
            finals = ", ".join(f"{x:.1f}" for x in arm["final_return"])
            lines.append(
                f"| {label} | "
                + " | ".join(f"{m:.1f}" for m in means)
                + f" | {statistics.fmean(means) if means else float('nan'):.1f} | {finals} | "
                f"{arm['wall_time_s']:.1f} |"
            )
        lines.append("")
    return lines


def _render_recurrent(rows: list | None, seeds: int) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "## Recurrent Q: tasks that need memory",
        "",
        f"Each recurrent preset ({seeds} seeds, one program) against the same run with an MLP on "
        "transitions (the LSTM removed, each batch the same number of trained positions), and, "
        "where the preset hides part of the observation, the MLP that sees all of it and the "
        "`cartpole` preset's MLP (its own settings, the same budget) on the hidden task. Final "
        "greedy return per seed; wall time includes compile. "
        "`python benchmarks/applications.py --only recurrent` re-runs it.",
        "",
        "| preset | env (observed) | network | env steps / seed | final greedy return per seed "
        "| mean | run (s) | wall (s) |",
        "|---|---|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        seen = f"entries {r['observe']}" if r["observe"] else "all"
        for label in ("lstm", "mlp", "mlp, whole observation", "mlp, cartpole preset settings"):
            if label not in r:
                continue
            arm = r[label]
            what = (
                f"LSTM {r['lstm_width']}, sequences {r['burn_in']} + {r['sequence_length']}"
                if label == "lstm"
                else label.replace("mlp", "MLP")
            )
            env = f"{r['env']} ({'all' if label.endswith('observation') else seen})"
            what = what.replace("MLP, cartpole preset settings", "MLP, the `cartpole` preset")
            finals = ", ".join(f"{x:.2f}" for x in arm["final_return"])
            lines.append(
                f"| `{r['preset']}` | {env} | {what} | {r['env_steps_per_seed']:,} | {finals} | "
                f"{statistics.fmean(arm['final_return']):.2f} | {arm['run_time_s']:.1f} | "
                f"{arm['wall_time_s']:.1f} |"
            )
    return lines


def _steps(xs: list) -> str:
    return ", ".join("never" if x is None else f"{x / 1000:.0f}k" for x in xs)


def _render_curriculum(cur: dict | None, seeds: int) -> list[str]:
    if not cur:
        return []
    c = cur["curriculum"]
    lines = [
        "",
        "## Curriculum",
        "",
        f"{cur['env']} without shaping, its own engine {c['param']} {c['end']} (the car must "
        f"swing to reach the flag), {cur['env_steps_per_seed']:,} env steps per seed, {seeds} "
        f"seeds, `cartpole` settings. `direct` trains on {c['param']} {c['end']} throughout; the "
        f"curricula move it from {c['start']} (enough to drive straight up) to {c['end']} in "
        f"{c['stages']} stages, by training progress or, per seed, after a block whose episodes "
        f"average -150 or better. Every evaluation (20 per run) uses {c['end']}; 'first "
        f"solved': the first evaluation with a mean return >= {cur['threshold']:g}; 'first at "
        "the flag': the first above -199; 'ended at': each seed's curriculum value at the end.",
        "",
        "| training | final greedy return per seed | mean | first solved (env steps) | "
        "first at the flag | ended at | wall (s) |",
        "|---|---|---:|---|---|---|---:|",
    ]
    for label, r in cur["arms"].items():
        finals = ", ".join(f"{x:.1f}" for x in r["final_return"])
        ended = ", ".join(f"{x:g}" for x in r.get("final_value", [])) or "-"
        lines.append(
            f"| {label} | {finals} | {statistics.fmean(r['final_return']):.1f} | "
            f"{_steps(r['first_solved'])} | {_steps(r['first_flag'])} | {ended} | "
            f"{r['wall_time_s']:.1f} |"
        )
    return lines


def _render_compress(c: dict | None) -> list[str]:
    if not c:
        return []
    p, b, t = c["params"], c["npz_bytes"], c["forward_us_batch_4096"]
    cols = [
        ("teacher", "teacher"),
        (f"pruned {c['fraction']:.0%}, global", "pruned_global"),
        (f"pruned {c['fraction']:.0%}, per layer", "pruned_layer"),
        (f"pruned {c['fraction']:.0%} global, fine-tuned", "pruned_tuned"),
        (f"student {'-'.join(map(str, c['student_hidden']))}, distilled", "student"),
        (f"student {'-'.join(map(str, c['student_hidden']))}, Q-value loss", "student_q_loss"),
    ]
    lines = [
        "",
        "## A smaller agent: pruning and distillation",
        "",
        f"The `cartpole` preset's agents ({c['env']}, MLP "
        f"{'-'.join(map(str, c['teacher_hidden']))}, {c['env_steps_per_seed']:,} env steps, "
        f"{len(c['seeds'])} seeds). Pruning zeroes the {c['fraction']:.0%} smallest weights "
        "(over all kernels, or per kernel); fine-tuning distils the unpruned agent into the "
        "pruned one with its zeros held (3,000 Adam steps); the student is trained by "
        "distillation on 32,000 states the agent visits (10,000 Adam steps). Greedy returns, "
        "64 episodes each (500 is the most).",
        "",
        "| network | " + " | ".join(f"seed {i}" for i in range(len(c["seeds"]))) + " | mean |",
        "|---|" + "---:|" * (len(c["seeds"]) + 1),
    ]
    for label, key in cols:
        vals = [r[key] for r in c["seeds"]]
        lines.append(
            f"| {label} | " + " | ".join(f"{v:.1f}" for v in vals)
            + f" | {statistics.fmean(vals):.1f} |"
        )  # fmt: skip
    lines += [
        "",
        f"Size: the agent has {p['teacher']:,} parameters ({b['teacher']:,} bytes as a "
        f"compressed .npz); pruned, {p['pruned_nonzero']:,} are non-zero ({b['pruned']:,} "
        f"bytes compressed; the same shapes, so no faster); the student has {p['student']:,} "
        f"({p['teacher'] / p['student']:.1f}x fewer, {b['student']:,} bytes). Forward pass of "
        f"4,096 observations (jitted, medians of 3 alternating rounds): agent "
        f"{t['teacher']:.0f} us, student {t['student']:.0f} us "
        f"({t['teacher'] / t['student']:.1f}x).",
    ]
    return lines


def _render_variants(var: dict | None) -> list[str]:
    if not var:
        return []
    together, apart = var["together"], var["apart"]
    lines = [
        "",
        "## Many task variants in one program",
        "",
        f"{var['env']}, {len(apart)} pole lengths x {var['seeds_per_variant']} seeds, "
        f"{var['env_steps_per_seed']:,} env steps per seed: one program for all "
        f"({together['wall_time_s']:.1f} s, compile included) against one program per variant "
        f"({sum(a['wall_time_s'] for a in apart):.1f} s in all).",
        "",
        "| variant | one program: final greedy per seed | mean | apart: final greedy per seed "
        "| mean |",
        "|---|---|---:|---|---:|",
    ]
    for v, a in zip(together["variants"], apart, strict=True):
        params = ", ".join(f"{k}={x:g}" for k, x in v["params"].items())
        lines.append(
            f"| {params} | {', '.join(f'{x:.1f}' for x in v['final_return'])} | "
            f"{v['mean_final_return']:.1f} | {', '.join(f'{x:.1f}' for x in a['final_return'])} "
            f"| {statistics.fmean(a['final_return']):.1f} |"
        )
    return lines
