"""The seed article's training recipe against our presets, each comparison one sweep program.

For each env (CartPole, MinAtar-Breakout, SpaceInvaders-MinAtar) one `train(sweep=...)` runs
three points with the same seeds (seed k of every point starts from the same key):

* `preset`: the env's preset (`cartpole`, `minatar-breakout`, `minatar-space-invaders`);
* `recipe`: `presets.article_recipe(preset)`: lr 3e-4 with cosine restarts every tenth of the
  run, gamma 0.99 -> 0.95 -> 0.9 at 30% / 70%, epsilon 1.0 x 0.995 every 1,000 env steps down
  to 0.01, clip norm 1.0;
* `recipe, gamma 0.99`: the recipe with a constant gamma of 0.99, to separate what the gamma
  phases do from the rest of the recipe.

The points differ only in traced hyperparameters, so the three are one zipped sweep axis and
one compile. Reported per point: the final greedy return (mean, 95% CI over seeds, per seed)
and the mean greedy return over the evaluations during training (every tenth of the run: a
speed-of-learning measure). Final returns are scored with the env's own reward (undiscounted),
so a gamma that ends at 0.9 is judged on the task, not on its own objective.

    python benchmarks/article_recipe.py                 # 8 seeds per point, preset budgets
    python benchmarks/article_recipe.py --quick         # 2 seeds, short runs (a smoke test)
"""

from __future__ import annotations

import time

import common  # noqa: E402
from common import machine, machine_line, write_results  # noqa: E402

ENVS = {
    "CartPole-v1": "cartpole",
    "Breakout-MinAtar": "minatar-breakout",
    "SpaceInvaders-MinAtar": "minatar-space-invaders",
}
POINTS = ("preset", "recipe", "recipe, gamma 0.99")


def comparison_spec(base, recipe) -> dict:
    """The zipped sweep axis of the three points: every field the recipe changes."""
    from jaxrl_fast.config import options

    names = tuple(options.differences(base, recipe))
    gamma_const = recipe.replace(schedule={"gamma_schedule": "constant"}, dqn={"gamma": 0.99})
    rows = []
    for cfg in (base, recipe, gamma_const):
        flat = options.flatten(cfg.to_dict())
        rows.append(tuple(flat[n] for n in names))
    return {names: rows}


def run_env(env: str, preset: str, seeds: int, quick: bool) -> dict:
    from jaxrl_fast import presets
    from jaxrl_fast.run.train import train

    base = presets.get(preset)
    if quick:  # a few thousand updates: checks the program, not the verdict
        steps = base.learning_starts + 40 * base.train_frequency * 10
        base = base.replace(total_env_steps=steps, num_chunks=10)
    evals = (base.total_env_steps - base.learning_starts) // 10
    base = base.replace(eval_every=evals, eval_episodes=10)
    recipe = presets.article_recipe(base)
    spec = comparison_spec(base, recipe)
    t = time.perf_counter()
    swept = train(base, sweep=spec, seeds_per_point=seeds, progress=False)
    wall = time.perf_counter() - t
    history = swept.result.history
    out = []
    for name, point in zip(POINTS, swept.points, strict=True):
        curve = []  # mean greedy return of the point's seeds at each evaluation
        for rec in history:
            if rec.get("eval_return") is None:
                continue
            values = [rec["eval_return"][s] for s in point.seed_indices]
            curve.append((rec["env_steps"], sum(values) / len(values)))
        out.append(
            {
                "point": name,
                "final_mean": point.mean,
                "final_ci95": point.ci95,
                "final_per_seed": point.final_returns,
                "eval_curve": curve,
                "eval_mean_during_training": sum(v for _, v in curve) / max(len(curve), 1),
            }
        )
    return {
        "env": env,
        "preset": preset,
        "env_steps_per_seed": swept.result.env_steps,
        "seeds_per_point": seeds,
        "fields": list(swept.plan.fields),
        "points": out,
        "compile_time_s": swept.result.compile_time_s,
        "run_time_s": swept.result.run_time_s,
        "wall_time_s": wall,
    }


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def verdict(r: dict) -> str:
    """One plain sentence per env: recipe vs preset, and what the gamma phases did."""
    p, rec, g = r["points"]
    lines = []

    def cmp(a, b, what):
        if a["final_ci95"] is None or b["final_ci95"] is None:
            return f"{what}: not enough seeds for an interval"
        lo_a, hi_a = a["final_ci95"]
        lo_b, hi_b = b["final_ci95"]
        if lo_a > hi_b:
            return f"{what}: higher ({_fmt(a['final_mean'])} vs {_fmt(b['final_mean'])}, intervals apart)"
        if hi_a < lo_b:
            return f"{what}: lower ({_fmt(a['final_mean'])} vs {_fmt(b['final_mean'])}, intervals apart)"
        return f"{what}: no clear difference ({_fmt(a['final_mean'])} vs {_fmt(b['final_mean'])}, intervals overlap)"

    lines.append(cmp(rec, p, "recipe vs preset, final return"))
    lines.append(cmp(rec, g, "gamma phases (ending at 0.9) vs constant 0.99 within the recipe"))
    speed = (rec["eval_mean_during_training"], p["eval_mean_during_training"])
    lines.append(
        f"mean greedy return during training: recipe {_fmt(speed[0])}, preset {_fmt(speed[1])}"
    )
    return "; ".join(lines) + "."


def render(result: dict) -> str:
    lines = [
        "# The article's training recipe vs our presets",
        "",
        machine_line(result["machine"]),
        "",
        "Re-run: `python benchmarks/article_recipe.py"
        + (" --quick" if result["quick"] else "")
        + "`. Each env is one sweep program (one compile): three points with the same "
        f"{result['seeds']} seeds. Final return: greedy, 10 episodes per seed, env reward. "
        "'During training': the mean of the greedy evaluations at every tenth of the run.",
        "",
    ]
    for r in result["envs"]:
        lines += [
            f"## {r['env']} (`{r['preset']}`, {r['env_steps_per_seed']:,} env steps per seed)",
            "",
            "| point | final return (mean) | 95% CI | during training | per seed |",
            "|---|---:|---|---:|---|",
        ]
        for p in r["points"]:
            ci = (
                "-"
                if p["final_ci95"] is None
                else f"{p['final_ci95'][0]:.1f} .. {p['final_ci95'][1]:.1f}"
            )
            seeds = ", ".join(_fmt(x) for x in p["final_per_seed"])
            lines.append(
                f"| {p['point']} | {_fmt(p['final_mean'])} | {ci} | "
                f"{_fmt(p['eval_mean_during_training'])} | {seeds} |"
            )
        lines += [
            "",
            f"Compile {r['compile_time_s']:.1f} s (once, all points), run {r['run_time_s']:.1f} s.",
            "",
            "Verdict: " + verdict(r),
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="short runs, 2 seeds: a smoke test")
    parser.add_argument("--seeds", type=int, default=8, help="seeds per point (default 8)")
    parser.add_argument("--envs", nargs="*", default=list(ENVS), help="env names to run")
    args = parser.parse_args()
    from jaxrl_fast import parallel

    parallel.use_cpu_cores()
    seeds = 2 if args.quick and args.seeds == 8 else args.seeds
    envs = [run_env(e, ENVS[e], seeds, args.quick) for e in args.envs]
    result = {"machine": machine(), "quick": args.quick, "seeds": seeds, "envs": envs}
    write_results(common.stem(args, "article_recipe"), result, render)


if __name__ == "__main__":
    main()
