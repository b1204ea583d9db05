"""Command line: `jaxrl-fast train | presets | envs`.

Examples:
  jaxrl-fast train                                  # CartPole-v1, default preset, 1 seed
  jaxrl-fast train --preset cartpole-cleanrl --seeds 8 --out runs/cleanrl
  jaxrl-fast train --env Breakout-MinAtar --preset minatar-breakout --total-env-steps 210000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from jaxrl_fast import presets


def _build_config(args: argparse.Namespace):
    config = presets.get(args.preset)
    changes: dict = {}
    env_changes: dict = {}
    if args.env is not None:
        env_changes["name"] = args.env
    if args.num_envs is not None:
        env_changes["num_envs"] = args.num_envs
    if env_changes:
        changes["env"] = env_changes
    for field in ("total_env_steps", "learning_starts", "seed", "num_chunks", "eval_episodes"):
        value = getattr(args, field)
        if value is not None:
            changes[field] = value
    if args.seeds is not None:
        changes["num_seeds"] = args.seeds
    return config.replace(**changes)


def _train(args: argparse.Namespace) -> int:
    from jaxrl_fast import parallel

    parallel.use_cpu_cores()  # on a CPU, seeds then run on every core
    if not args.no_cache:
        from jaxrl_fast import compile_cache

        compile_cache.enable()
    from jaxrl_fast.envs import make_env
    from jaxrl_fast.train import train

    config = _build_config(args)
    make_env(config.env.name, 1)  # unknown env names fail here, before anything compiles
    if args.out is not None:
        os.makedirs(args.out, exist_ok=True)
        if not os.access(args.out, os.W_OK):
            raise ValueError(f"--out {args.out!r} is not writable")
    print(
        f"jaxrl-fast: training {config.env.name} ({args.preset} preset), {config.num_seeds} "
        f"seed(s) x {config.total_env_steps:,} env steps, {config.env.num_envs} envs per seed",
        flush=True,
    )
    result = train(config, progress=not args.no_progress)
    summary = result.summary()
    print("\nseed  final greedy return  last training return")
    for s in summary["seeds"]:
        fin = "-" if s["final_return"] is None else f"{s['final_return']:.1f}"
        tr = "-" if s["train_return"] is None else f"{s['train_return']:.1f}"
        print(f"{s['seed_index']:>4}  {fin:>19}  {tr:>20}")
    print(
        f"env steps/seed {result.env_steps:,}  wall {result.wall_time_s:.1f}s  "
        f"(compile {result.compile_time_s:.1f}s, run {result.run_time_s:.1f}s, "
        f"eval {result.eval_time_s:.1f}s)  {result.env_steps_per_s:,.0f} env-steps/s over all seeds"
        f" on {result.num_devices} device(s)"
    )
    if args.out is not None:
        path = os.path.join(args.out, "summary.json")
        with open(path, "w") as f:
            json.dump(summary, f, indent=2)
        with open(os.path.join(args.out, "history.json"), "w") as f:
            json.dump(result.history, f)
        print(f"wrote {path}")
    return 0


def _presets(args: argparse.Namespace) -> int:
    for name in presets.names():
        cfg = presets.get(name)
        print(f"{name:20s} {cfg.env.name:18s} {cfg.total_env_steps:>10,} env steps")
    return 0


def _envs(args: argparse.Namespace) -> int:
    from jaxrl_fast.envs import list_envs

    print("\n".join(list_envs()))
    return 0


def make_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the `jaxrl-fast` command."""
    parser = argparse.ArgumentParser(prog="jaxrl-fast", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train DQN agents in one compiled program")
    t.add_argument("--preset", default=presets.DEFAULT, help=f"one of {', '.join(presets.names())}")
    t.add_argument("--env", help="env name (see `jaxrl-fast envs`); overrides the preset's")
    t.add_argument("--seeds", type=int, help="independent seeds trained together (vmapped)")
    t.add_argument("--seed", type=int, help="base random seed")
    t.add_argument("--num-envs", type=int, help="parallel envs per seed")
    t.add_argument("--total-env-steps", type=int, help="env steps per seed, prefill included")
    t.add_argument("--learning-starts", type=int, help="env steps before the first update")
    t.add_argument("--num-chunks", type=int, help="host calls (progress updates) per run")
    t.add_argument("--eval-episodes", type=int, help="greedy evaluation episodes per seed")
    t.add_argument("--out", help="directory for summary.json and history.json")
    t.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    t.add_argument(
        "--no-cache",
        action="store_true",
        help="do not use the on-disk compilation cache ($JAXRL_FAST_CACHE_DIR, "
        "default ~/.cache/jaxrl_fast/xla)",
    )
    t.set_defaults(func=_train)
    p = sub.add_parser("presets", help="list presets")
    p.set_defaults(func=_presets)
    e = sub.add_parser("envs", help="list env names")
    e.set_defaults(func=_envs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"jaxrl-fast: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
