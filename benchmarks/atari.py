"""Atari in the fused loop: speed vs the conventional loop, replay memory, a Pong learning run.

One command, one process, one machine (needs the `atari` extra: `pip install -e ".[atari]"`):

    python benchmarks/atari.py                  # speed + memory (~18 min on a 2-core CPU),
                                                # keeping the last learning run's results
    python benchmarks/atari.py --learn          # + the Pong learning run (~45 min more)
    python benchmarks/atari.py --quick          # smoke run, ~3 min

Writes `benchmarks/results/atari/atari[-quick].json` and `.md`. What it measures:

1. **Speed.** Training-phase env-steps/s of the fused loop (`train`) vs the conventional loop
   (`baseline.train_unfused`: a Python loop over envpool's own `step`, a host numpy replay
   holding obs and next_obs, one jitted update per gradient step) with the same config
   (`atari-pong` shrunk to a short run), at 1 seed; the fused loop also at 4 seeds over one
   pool. The conventional loop trains one seed; 4 seeds there are 4 runs in a row.
2. **Memory.** Bytes per stored transition and the replay bytes of 1M transitions: ours (one
   84x84 frame per row, stacks rebuilt at sample time) vs whole stacks once per row vs obs and
   next_obs stacks per row (the naive layout), from `replay.sizing`/`ring.row_bytes`.
3. **Learning** (`--learn`): `atari-pong` with 1 seed at the preset's budget; the final
   evaluation return (epsilon 0.05, whole games) and the training-episode returns over time, and the wall time.
"""

from __future__ import annotations

import json
import os
import time

import common
from common import machine, write_results  # noqa: E402

from jaxrl_fast import presets  # noqa: E402
from jaxrl_fast.baseline import train_unfused  # noqa: E402
from jaxrl_fast.replay import row_bytes  # noqa: E402
from jaxrl_fast.run.train import train  # noqa: E402

ATARI_OBS = (84, 84, 4)
MILLION = 1_000_000
PREFILL = 4_096  # env steps before the first update in the speed runs


def _short(steps: int, seeds: int):
    base = presets.get("atari-pong").replace(learning_starts=PREFILL)
    return base.replace(
        total_env_steps=base.learning_starts + steps,
        num_seeds=seeds,
        eval_episodes=1,
        num_chunks=None,
    )


def speed(steps: int, repeats: int) -> dict:
    rows = []
    for rep in range(repeats):
        cfg1 = _short(steps, 1)
        print(f"  repeat {rep + 1}/{repeats}: conventional, 1 seed", flush=True)
        b = train_unfused(cfg1, progress=False)
        print(f"  repeat {rep + 1}/{repeats}: fused, 1 seed", flush=True)
        f1 = train(cfg1, progress=False)
        print(f"  repeat {rep + 1}/{repeats}: fused, 4 seeds", flush=True)
        f4 = train(_short(steps, 4), progress=False)
        rows.append(
            {
                "conventional_1_seed": b.train_env_steps_per_s,
                "fused_1_seed": f1.train_env_steps_per_s,
                "fused_4_seeds": f4.train_env_steps_per_s,
                "compile_s": {
                    "conventional": b.compile_time_s,
                    "fused_1_seed": f1.compile_time_s,
                    "fused_4_seeds": f4.compile_time_s,
                },
            }
        )
    med = lambda k: sorted(r[k] for r in rows)[len(rows) // 2]  # noqa: E731
    cfg = _short(steps, 1)
    return {
        "config": "atari-pong",
        "train_env_steps": steps,
        "learning_starts": cfg.learning_starts,
        "num_envs_per_seed": cfg.env.num_envs,
        "updates_per_env_step": cfg.updates_per_block / cfg.train_frequency,
        "batch_size": cfg.replay.batch_size,
        "repeats": rows,
        "median": {k: med(k) for k in ("conventional_1_seed", "fused_1_seed", "fused_4_seeds")},
    }


def memory() -> dict:
    ours = row_bytes(ATARI_OBS, "uint8", 4)
    stack = row_bytes(ATARI_OBS, "uint8")
    naive = 2 * 84 * 84 * 4 + 14
    return {
        "bytes_per_transition": {
            "one frame per row (ours)": ours,
            "whole stack once per row": stack,
            "obs + next_obs stacks per row (naive)": naive,
        },
        "bytes_for_1M_transitions": {
            "one frame per row (ours)": ours * MILLION,
            "whole stack once per row": stack * MILLION,
            "obs + next_obs stacks per row (naive)": naive * MILLION,
        },
    }


def learn(steps: int | None, note: str | None = None) -> dict:
    cfg = presets.get("atari-pong")
    if steps is not None:  # a shorter run than the preset's budget (same schedule fractions)
        blocks = (steps - cfg.learning_starts) // cfg.train_frequency // 20 * 20
        cfg = cfg.replace(total_env_steps=cfg.learning_starts + blocks * cfg.train_frequency)
    # num_chunks stays automatic: a divisor of the number of blocks near 20 (curve points)
    t = time.perf_counter()
    r = train(cfg, progress=True)
    return {
        "machine": machine(),
        "note": note,
        "config": "atari-pong",
        "preset_env_steps": presets.get("atari-pong").total_env_steps,
        "env_steps": r.env_steps,
        "final_return": [float(x) for x in r.final_return],
        "eval_episodes": cfg.eval_episodes,
        "eval_epsilon": cfg.eval_epsilon,
        "eval_time_s": r.eval_time_s,
        "wall_time_s": time.perf_counter() - t,
        "train_env_steps_per_s": r.train_env_steps_per_s,
        "curve": [
            {"env_steps": h["env_steps"], "episode_return": h["episode_return"]} for h in r.history
        ],
    }


def _machine_line(m: dict) -> str:
    return f"{m['cpu']}, {m['cores']} cores, {m['platform']}; jax {m['jax']} on {m['backend']}"


def _final(learn_result: dict) -> float:
    returns = learn_result.get("final_return", learn_result.get("final_greedy_return"))
    return sum(returns) / len(returns)


def render(r: dict) -> str:
    m = r["machine"]
    q = " --quick" if r["quick"] else ""
    s = r["speed"]
    med = s["median"]
    lines = [
        f"# Atari in the fused loop{' (quick)' if r['quick'] else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; jax {m['jax']} on "
        f"{m['backend']}. Speed and memory by `python benchmarks/atari.py{q}` in "
        f"{r.get('speed_time_s', r['benchmark_time_s']):.0f} s"
        + (
            "; the learning run by `python benchmarks/atari.py --learn-only"
            + (
                ""
                if r["learn"]["env_steps"] == r["learn"]["preset_env_steps"]
                else f" --learn-steps {r['learn']['env_steps']}"
            )
            + f"` in {r['learn']['wall_time_s'] / 60:.0f} min"
            if r.get("learn")
            else ""
        )
        + ". CPU timings on a shared VM are noisy: compare the rows of one table.",
        "",
        f"## Speed: `atari-pong`, {s['train_env_steps']:,} training env steps after "
        f"{s['learning_starts']:,} prefill steps, {s['num_envs_per_seed']} envs per seed, "
        f"{s['updates_per_env_step']:.3f} updates per env step (batch {s['batch_size']})",
        "",
        "| loop | seeds | training env-steps/s (all seeds), median | vs conventional |",
        "|---|---:|---:|---:|",
        f"| conventional (Python loop over envpool `step`, host replay) | 1 | "
        f"{med['conventional_1_seed']:,.0f} | 1.00x |",
        f"| fused | 1 | {med['fused_1_seed']:,.0f} | "
        f"{med['fused_1_seed'] / med['conventional_1_seed']:.2f}x |",
        f"| fused, one pool of 4 x {s['num_envs_per_seed']} envs | 4 | "
        f"{med['fused_4_seeds']:,.0f} | {med['fused_4_seeds'] / med['conventional_1_seed']:.2f}x |",
        "",
        f"Runs: {', '.join(f'{x:,.0f}' for x in (v['conventional_1_seed'] for v in s['repeats']))}"
        " (conventional); "
        f"{', '.join(f'{x:,.0f}' for x in (v['fused_1_seed'] for v in s['repeats']))} (fused, 1); "
        f"{', '.join(f'{x:,.0f}' for x in (v['fused_4_seeds'] for v in s['repeats']))} (fused, 4).",
        "",
        "## Replay memory, 84x84x4 uint8 observations",
        "",
        "| layout | bytes per transition | 1M transitions |",
        "|---|---:|---:|",
    ]
    mem = r["memory"]
    for k, v in mem["bytes_per_transition"].items():
        total = mem["bytes_for_1M_transitions"][k]
        lines.append(f"| {k} | {v:,} | {total / 1e9:.2f} GB |")
    lines += [
        "",
        "Per transition: the frame, plus action (4 B), n-step return (4 B), discount (4 B), "
        "bootstrap offset (1 B), valid and fresh-stack flags (1 B each). PER adds its priorities "
        "(4-8 B per row).",
        "",
    ]
    if r.get("learn"):
        L = r["learn"]
        lines += [
            f"## Learning: `atari-pong`, 1 seed, {L['env_steps']:,} env steps",
            "",
            f"The preset's budget is {L['preset_env_steps']:,} env steps; this run "
            + (
                "used it."
                if L["env_steps"] == L["preset_env_steps"]
                else "was shortened to fit the session (epsilon decays over the first 25% of "
                "the shorter run; everything else as in the preset)."
            ),
            "",
            f"Wall time {L['wall_time_s'] / 60:.1f} min ({L['train_env_steps_per_s']:,.0f} "
            f"training env-steps/s); final evaluation return {_final(L):.1f}, the mean of "
            f"{L.get('eval_episodes', 1)} whole games played "
            + (
                f"epsilon-greedily (epsilon {L['eval_epsilon']}, as Nature DQN evaluates)."
                if L.get("eval_epsilon")
                else "greedily. A game that reaches 21 points for neither side within the step "
                "limit is cut there and counts its score so far, so a greedy policy stuck in a "
                "rally can score near 0: the training-episode returns below are the learning "
                "signal."
            ),
            "",
            *(
                [f"Learning-run machine: {_machine_line(L['machine'])}.", ""]
                if L.get("machine") and L["machine"] != r["machine"]
                else []
            ),
            *([f"Note: {L['note']}", ""] if L.get("note") else []),
            "| env steps | mean training-episode return in the chunk |",
            "|---:|---:|",
        ]
        for c in L["curve"]:
            ret = c["episode_return"][0]
            lines.append(f"| {c['env_steps']:,} | {'-' if ret is None else f'{ret:.1f}'} |")
        lines.append("")
    else:
        lines += ["## Learning", "", "Not run (`--learn`).", ""]
    lines += [
        "## GPU",
        "",
        "Not measured: no GPU was lent to the session that produced this file.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = common.parser(__doc__, __file__, quick="smoke run (~3 min)")
    parser.add_argument("--learn", action="store_true", help="also run the Pong learning run")
    parser.add_argument(
        "--learn-steps", type=int, help="env steps of the learning run (default: the preset's)"
    )
    parser.add_argument(
        "--learn-only",
        action="store_true",
        help="run only the learning run; keep speed and memory from the results JSON",
    )
    parser.add_argument("--note", help="a remark stored with the learning run (e.g. load)")
    parser.add_argument(
        "--render", metavar="JSON", help="only rewrite the Markdown from a results JSON file"
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
    stem = os.path.join(args.out, "atari" + ("-quick" if q else ""))
    if args.learn_only:
        with open(stem + ".json") as f:
            kept = json.load(f)
        out.update(machine=kept["machine"], speed=kept["speed"], memory=kept["memory"])
        out["speed_time_s"] = kept.get("speed_time_s", kept["benchmark_time_s"])
    else:
        print("[1/3] speed", flush=True)
        out["speed"] = speed(2_048 if q else 8_192, 1 if q else 2)
        print("[2/3] memory", flush=True)
        out["memory"] = memory()
        out["speed_time_s"] = time.perf_counter() - t0
    if args.learn or args.learn_only:
        print("[3/3] Pong learning run", flush=True)
        out["learn"] = learn(args.learn_steps, args.note)
    elif os.path.exists(stem + ".json"):  # keep the last learning run next to new speed rows
        with open(stem + ".json") as f:
            kept = json.load(f).get("learn")
        if kept is not None:
            out["learn"] = kept
    out["benchmark_time_s"] = time.perf_counter() - t0
    write_results(stem, out, render)


if __name__ == "__main__":
    main()
