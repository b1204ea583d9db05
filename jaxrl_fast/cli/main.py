"""Command line: `jaxrl-fast train | sweep | launch | plan | plot | xla-report | presets | envs`.

Examples:
  jaxrl-fast train                                  # CartPole-v1, default preset, 1 seed
  jaxrl-fast train --preset cartpole-cleanrl --seeds 8 --out runs/cleanrl
  jaxrl-fast train --env Breakout-MinAtar --preset minatar-breakout --total-env-steps 210000
  jaxrl-fast train --preset minatar-breakout --seeds 8 --run-dir runs/breakout --eval-every 50000
  jaxrl-fast train --resume runs/breakout             # continue it after a restart
  jaxrl-fast train --resume-or-start runs/job         # continue, or start when runs/job is new
  jaxrl-fast train --set dqn.learning_rate=1e-4 --dqn.gamma 0.98 --print-config
  jaxrl-fast sweep --sweep dqn.learning_rate=1e-4,1e-3 --seeds-per-point 4 --out runs/lr
  jaxrl-fast plot runs/breakout runs/other --out curves.png
  jaxrl-fast train --parallel.data 2                  # 2 data replicas per seed (2 devices)
  jaxrl-fast launch --local 2 -- train --parallel.data 2 --out runs/dp   # 2 local processes
  jaxrl-fast plan --preset minatar-breakout --seeds 8 --capacity large --device-memory 16GB
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from jaxrl_fast import presets
from jaxrl_fast.cli.config_args import build_config
from jaxrl_fast.cli.launch import add_launch_parser
from jaxrl_fast.cli.parser import Parser, add_field_args, add_help_all, negative_values
from jaxrl_fast.platform.paths import writable_dir
from jaxrl_fast.presets import dqn_family


def _int_or_text(text: str) -> int | str:
    """An int where `text` is one ("100000", "100_000"), else `text` (a share, a block name)."""
    try:
        return int(text)
    except ValueError:
        return text


def _train(args: argparse.Namespace) -> int:
    from jaxrl_fast import parallel

    resume_mode: bool | str = args.resume is not None
    if args.resume_or_start is not None:
        if args.resume is not None:
            raise ValueError("give --resume DIR or --resume-or-start DIR, not both")
        args.resume, resume_mode = args.resume_or_start, "or_start"

    distributed = args.distributed or args.coordinator is not None or args.num_processes is not None
    if distributed:  # before anything starts JAX's backends; one CPU device per process
        parallel.initialize(args.coordinator, args.num_processes, args.process_id)
    else:
        parallel.use_cpu_cores()  # on a CPU, seeds then run on every core
    main_process = parallel.is_main()
    if not args.no_cache and not distributed:
        from jaxrl_fast.run import compile_cache

        compile_cache.enable()
    from jaxrl_fast.loop.resolve import resolve
    from jaxrl_fast.run.train import train

    config = build_config(args)
    # unknown env names (and a missing `atari` extra) fail here, before anything compiles; the
    # resolved run (env, precision, seed and conv choices, replay rows) is what `train` runs
    run = resolve(config)
    config = run.config
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2))
        return 0
    if args.out is not None and main_process:
        writable_dir(args.out, "--out")
    if args.resume is not None and args.run_dir not in (None, args.resume):
        raise ValueError(f"--resume {args.resume!r} and --run-dir {args.run_dir!r} differ")
    run_files = dict(
        run_dir=args.resume or args.run_dir,
        resume=resume_mode,
        checkpoint_every=args.checkpoint_every,
        keep=args.keep,
        force_config=args.force_config,
    )
    if not main_process:  # process 0 prints and writes; the others compute and checkpoint
        train(run, progress=False, **run_files)
        return 0
    replicas = config.parallel.data
    print(
        f"jaxrl-fast: training {config.env.name} ({_source(args)}), {config.num_seeds} "
        f"seed(s) x {config.total_env_steps:,} env steps, {config.env.num_envs} envs per seed"
        + (f", {replicas} data replicas per seed" if replicas > 1 else "")
        + (f", {parallel.process_count()} processes" if distributed else ""),
        flush=True,
    )
    result = train(run, progress=not args.no_progress, **run_files)
    summary = result.summary()
    print("\nseed   final eval return  last training return")
    for s in summary["seeds"]:
        fin = "-" if s["final_return"] is None else f"{s['final_return']:.1f}"
        tr = "-" if s["train_return"] is None else f"{s['train_return']:.1f}"
        print(f"{s['seed_index']:>4}  {fin:>19}  {tr:>20}")
    print(timings_line(result))
    for v in summary.get("variants", []):
        fin = "-" if v["mean_final_return"] is None else f"{v['mean_final_return']:.1f}"
        params = ", ".join(f"{k}={x:g}" for k, x in v["params"].items())
        print(f"variant {v['variant']} ({params}): seeds {v['seed_indices']}, mean final {fin}")
    if config.eval_episodes == 0:
        print("final evaluation: skipped (eval_episodes=0)")
    print(result.precision)
    if result.fp32_fallback_env_steps is not None:
        print(f"precision: switched to fp32 by env step {result.fp32_fallback_env_steps:,}")
    replay = result.history[-1].get("replay")
    if replay:  # the buffer's own counters, as it names them (last chunk)
        print("replay: " + ", ".join(f"{k} {_fmt_value(v)}" for k, v in replay.items()))
    if args.out is not None:
        path = os.path.join(args.out, "summary.json")
        with open(path, "w") as f:
            json.dump(summary, f, indent=2)
        with open(os.path.join(args.out, "history.json"), "w") as f:
            json.dump(result.history, f)
        print(f"wrote {path}")
    return 0


def _source(args: argparse.Namespace) -> str:
    saved = None if args.resume is None else os.path.join(args.resume, "config.json")
    if args.preset is None and saved is not None and os.path.exists(saved):
        return f"the config of {args.resume}"  # as config_args.base_config reads it
    return f"{args.preset or presets.DEFAULT} preset"


def _fmt_value(value) -> str:
    """A counter for the summary line: numbers with thousands separators, lists per seed."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt_value(v) for v in value) + "]"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return f"{int(value):,}" if isinstance(value, (int, float)) else str(value)


def _plan(args: argparse.Namespace) -> int:
    from jaxrl_fast.replay import sizing
    from jaxrl_fast.replay.memory import parse_bytes

    memory = None
    if args.device_memory is not None:
        try:
            memory = parse_bytes(args.device_memory)
        except ValueError as err:
            raise ValueError(f"--device-memory: {err}") from None
    config = build_config(args)
    if config.learner != "replay":
        raise ValueError(
            f"plan sizes the replay learner's buffer; TrainConfig.learner={config.learner!r} "
            f"keeps no replay (the rollout learner stores one rollout: train_frequency="
            f"{config.train_frequency} rows a seed)."
        )
    result = sizing.plan(config, device_memory=memory)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.render())
    return 0


def timings_line(result) -> str:
    """The run's figures in one line, each over what this call did (a resumed run: since its
    checkpoint)."""
    ran = result.env_steps_run
    steps = f"env steps/seed {result.env_steps:,}"
    if result.resumed_env_steps:
        steps += f" ({ran:,} in this run, resumed after {result.resumed_env_steps:,})"
    evals = result.evaluations
    where = " (those during training inside run)" if evals > 1 else ""
    timing = (
        f"wall {result.wall_time_s:.1f}s  (compile {result.compile_time_s:.1f}s, run "
        f"{result.run_time_s:.1f}s, final eval wait {result.eval_time_s:.1f}s; {evals} "
        f"evaluation(s){where})"
    )
    rate = (
        f"{result.env_steps_per_s:,.0f} env-steps/s over all seeds"
        if ran
        else "no env steps run (the run had finished)"
    )
    return f"{steps}  {timing}  {rate} on {result.num_devices} device(s)"


def _presets(args: argparse.Namespace) -> int:
    for name in presets.names():
        cfg = presets.get(name)
        print(f"{name:20s} {cfg.env.name:18s} {cfg.total_env_steps:>10,} env steps")
    return 0


def _add_run_args(parser: argparse.ArgumentParser) -> None:
    """Add the options `train` and `plan` share: preset, env, seeds, envs per seed."""
    parser.add_argument(
        "--preset",
        help=f"one of {', '.join(presets.names())} (default {presets.DEFAULT}; with --resume, the "
        "resumed run's config)",
    )
    parser.add_argument(
        "--algo",
        metavar="NAME",
        choices=list(dqn_family.ALGORITHMS),
        help=f"put a DQN-family member on the preset: {', '.join(dqn_family.ALGORITHMS)}",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="JSON of config fields (nested, any subset; or a run directory's config.json), "
        "applied over the preset",
    )
    parser.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="set any config field by its dotted name, e.g. --set dqn.learning_rate=1e-4 "
        "(repeatable; applied last)",
    )
    parser.add_argument(
        "--env",
        help="env name (see `jaxrl-fast envs`) or one's own gymnax env as an import path "
        "'module:factory'; overrides the preset's",
    )
    parser.add_argument("--seeds", type=int, help="independent seeds trained together (vmapped)")
    parser.add_argument("--num-envs", type=int, help="parallel envs per seed")


def _add_replay_args(parser: argparse.ArgumentParser) -> None:
    """Add the replay options `train` and `plan` share (they override the preset's)."""
    parser.add_argument(
        "--capacity",
        type=_int_or_text,
        help='L2 rows per seed, or a share of free device memory: "auto:0.3", small, medium, large',
    )
    parser.add_argument("--batch-size", type=int, help="transitions per gradient step")
    parser.add_argument("--n-step", type=int, help="steps summed into each target")
    parser.add_argument(
        "--prioritised", action="store_true", default=None, help="prioritised replay (PER)"
    )
    parser.add_argument("--sampler", help="PER sampler: auto, sum_tree or cumsum")
    parser.add_argument("--l3", help="third tier: off, host (RAM) or disk (memory-mapped files)")
    parser.add_argument("--l3-capacity", type=int, help="L3 rows per seed")
    parser.add_argument("--l3-share", type=float, help="share of each batch drawn from L3")
    parser.add_argument("--spill-dir", help="directory for --l3 disk (default: the temp directory)")
    parser.add_argument(
        "--spill-block", type=_int_or_text, help="bytes per spill: 4MB, 8MB or 16MB"
    )


def make_parser(full_help: bool = False) -> argparse.ArgumentParser:
    """Return the argument parser of the `jaxrl-fast` command (`full_help`: every config
    field's help line, `--help-all`)."""
    parser = Parser(prog="jaxrl-fast", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--plugin",
        metavar="MODULE",
        action="append",
        help="import MODULE first (repeatable, anywhere on the line): a module that registers "
        "its own algorithm (a loss, head or learner, its config section and presets), so that "
        "its presets and --algo.NAME.FIELD options exist",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train DQN agents in one compiled program")
    _add_run_args(t)
    t.add_argument("--out", help="directory for summary.json and history.json")
    t.add_argument(
        "--run-dir",
        help="new directory for the run's files: config.json (with library versions), "
        "metrics.jsonl and metrics.csv (a row per chunk per seed), summary.json (with each "
        "seed's params_sha256), checkpoints/ (orbax, the whole train state)",
    )
    t.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the run in DIR from its newest checkpoint (same config; the parameters "
        "end bitwise as if it never stopped); DIR must exist, and stderr says which step the run "
        "goes on from (or that DIR has no checkpoint yet and the run starts from step 0)",
    )
    t.add_argument(
        "--resume-or-start",
        metavar="DIR",
        help="as --resume DIR, but a DIR that does not exist starts a new run there (one "
        "command for a job that may be requeued)",
    )
    t.add_argument(
        "--checkpoint-every",
        type=int,
        help="env steps per seed between checkpoints (default: about 10%% of the run)",
    )
    t.add_argument("--keep", type=int, default=3, help="checkpoints kept (default 3)")
    t.add_argument(
        "--force-config",
        action="store_true",
        help="with --resume: accept a config that differs in fields that change no array "
        "shape (learning rate, gamma, schedules, evaluation; config.RESUME_OVERRIDABLE); the "
        "resumed run is then no longer bitwise the uninterrupted one",
    )
    t.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        help="multi-process run: process 0's address (with --num-processes, --process-id)",
    )
    t.add_argument("--num-processes", type=int, help="multi-process run: processes in all")
    t.add_argument("--process-id", type=int, help="multi-process run: this process's index")
    t.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process run that JAX detects by itself (SLURM, Open MPI, Cloud TPU)",
    )
    t.add_argument(
        "--print-config", action="store_true", help="print the resolved config as JSON and exit"
    )
    t.add_argument(
        "--precision",
        help="network compute dtype: auto (fp32, except the Nature CNN on tensor-core GPUs and "
        "TPUs), fp32, bf16 or fp16",
    )
    t.add_argument("--loss-scale", help="auto, dynamic, none or static:<value>")
    t.add_argument("--matmul-precision", help="default, high or highest")
    t.add_argument(
        "--fallback",
        action="store_true",
        help="let low-precision compute switch to fp32 after repeated overflows (compiles an "
        "fp32 network and a branch into every step)",
    )
    t.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    t.add_argument(
        "--no-cache",
        action="store_true",
        help="do not use the on-disk compilation cache ($JAXRL_FAST_CACHE_DIR, "
        "default ~/.cache/jaxrl_fast/xla)",
    )
    _add_replay_args(t)
    add_field_args(t, full_help)
    add_help_all(t)
    t.set_defaults(func=_train)
    add_launch_parser(sub)
    m = sub.add_parser(
        "plan",
        help="show replay memory per tier (L1/L2/L3) and whether it fits; compiles nothing",
    )
    _add_run_args(m)
    _add_replay_args(m)
    m.add_argument(
        "--device-memory",
        help="free device memory to plan for, e.g. 16GB, 16GiB, 512MB, 1e9 (default: ask the "
        "first JAX device; host RAM on a CPU)",
    )
    m.add_argument("--json", action="store_true", help="print the plan as JSON")
    m.set_defaults(func=_plan)
    from jaxrl_fast import xla_report
    from jaxrl_fast.cli import envs as cli_envs
    from jaxrl_fast.cli import policy as cli_policy
    from jaxrl_fast.cli import sweep as cli_sweep
    from jaxrl_fast.run import plot

    def _sweep_options(parser: argparse.ArgumentParser) -> None:
        _add_run_args(parser)
        _add_replay_args(parser)
        add_field_args(parser, full_help)
        add_help_all(parser)

    cli_sweep.add_parser(sub, _sweep_options)
    plot.add_parser(sub)
    xla_report.add_parser(sub)
    cli_policy.add_parsers(sub)
    p = sub.add_parser("presets", help="list presets")
    p.set_defaults(func=_presets)
    cli_envs.add_parser(sub)
    return parser


def import_plugins(argv: Sequence[str]) -> list[str]:
    """Import the modules `--plugin MODULE` (or `--plugin=MODULE`) names, wherever they are on
    the line, before the parser is built from the registered sections and presets; returns the
    rest of `argv`.

    Raises:
      ImportError: a module that cannot be imported (the message names it).
    """
    import importlib

    rest, modules, it = [], [], iter(argv)
    for token in it:
        if token == "--plugin":
            modules.append(next(it, ""))
        elif token.startswith("--plugin="):
            modules.append(token.split("=", 1)[1])
        else:
            rest.append(token)
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ImportError(f"--plugin {module!r} cannot be imported: {err}") from err
    return rest


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    if argv is None and "" not in sys.path and os.getcwd() not in sys.path:
        # the `jaxrl-fast` command, as `python -m` does: an env's import path
        # ("--env my_envs:make_env") may name a module in the current directory
        sys.path.insert(0, os.getcwd())
    argv = negative_values(sys.argv[1:] if argv is None else argv)
    try:
        argv = import_plugins(argv)
    except ImportError as err:
        print(f"jaxrl-fast: error: {err}", file=sys.stderr)
        return 2
    full_help = "--help-all" in argv
    parser = make_parser(full_help)
    args = parser.parse_args([("--help" if a == "--help-all" else a) for a in argv])
    try:
        return args.func(args)
    except (ValueError, ImportError, OSError) as err:  # bad input, a missing extra, full disk
        print(f"jaxrl-fast: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, and how to go on
        run_dir = getattr(args, "resume", None) or getattr(args, "run_dir", None)
        hint = (
            f"`jaxrl-fast train --resume {run_dir}` continues from its last checkpoint"
            if run_dir
            else "nothing was kept (with --run-dir DIR, checkpoints let --resume DIR continue)"
        )
        print(f"\njaxrl-fast: interrupted; {hint}", file=sys.stderr)
        return 130
