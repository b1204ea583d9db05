"""`jaxrl-fast sweep`: a hyperparameter sweep as one compiled program (`jaxrl_fast.run.sweep`).

  jaxrl-fast sweep --preset cartpole --sweep dqn.learning_rate=1e-4,3e-4,1e-3 \\
      --sweep dqn.gamma=0.95,0.99 --seeds-per-point 4 --out runs/lr-gamma
  jaxrl-fast sweep --zip dqn.learning_rate=1e-4,3e-4 --zip dqn.tau=1.0,0.5 --out runs/zipped

`--sweep FIELD=V1,V2,...` adds a grid axis; every `--zip FIELD=...` field joins one zipped axis
(equal lengths). Values are parsed as `--set` parses them; separate them with `;` instead of
`,` when a value holds commas (`--sweep "schedule.gamma_schedule=constant;0.99:0.3,0.9"`).
"""

from __future__ import annotations

import argparse
from typing import Any


def parse_axes(sweep: list[str], zipped: list[str]) -> dict[Any, list]:
    """The `train(sweep=...)` spec of the `--sweep` and `--zip` options.

    >>> parse_axes(["dqn.gamma=0.9,0.99"], ["dqn.tau=1,0.5", "dqn.learning_rate=1e-3,1e-4"])
    {'dqn.gamma': [0.9, 0.99], ('dqn.tau', 'dqn.learning_rate'): [(1.0, 0.001), (0.5, 0.0001)]}
    """
    from jaxrl_fast.config import options

    def values(item: str, flag: str) -> tuple[str, list]:
        name, eq, text = item.partition("=")
        if not eq or not text.strip():
            raise ValueError(f"{flag} {item!r}: expected FIELD=V1,V2,..., e.g. dqn.gamma=0.9,0.99")
        f = options.field(name.strip())
        parts = text.split(";") if ";" in text else text.split(",")
        return f.name, [options.parse_value(p, f) for p in parts]

    spec: dict[Any, list] = {}
    for item in sweep:
        name, vals = values(item, "--sweep")
        if name in spec:
            raise ValueError(f"--sweep: {name} given twice; list all its values in one option")
        spec[name] = vals
    if zipped:
        cols = [values(item, "--zip") for item in zipped]
        lengths = {len(v) for _, v in cols}
        if len(lengths) != 1:
            raise ValueError(
                "--zip: every zipped field needs as many values; got "
                + ", ".join(f"{n}: {len(v)}" for n, v in cols)
            )
        names = tuple(n for n, _ in cols)
        spec[names] = list(zip(*(v for _, v in cols), strict=True))
    if not spec:
        raise ValueError("jaxrl-fast sweep: give at least one --sweep or --zip FIELD=V1,V2,...")
    return spec


def _run(args: argparse.Namespace) -> int:
    from jaxrl_fast import parallel
    from jaxrl_fast.cli.config_args import build_config

    parallel.use_cpu_cores()
    if not args.no_cache:
        from jaxrl_fast.run import compile_cache

        compile_cache.enable()
    from jaxrl_fast.loop.resolve import resolve
    from jaxrl_fast.platform.paths import writable_dir
    from jaxrl_fast.run.sweep import plan
    from jaxrl_fast.run.train import train

    spec = parse_axes(args.sweep or [], args.zip or [])
    config = build_config(args)
    laid_out = plan(config, spec, args.seeds_per_point)  # every point checked before compiling
    resolve(laid_out.config)  # unknown envs and missing extras fail before compiling too
    if args.out is not None:
        writable_dir(args.out, "--out")
    print(
        f"jaxrl-fast: sweep of {len(laid_out.points)} point(s) x {args.seeds_per_point} seed(s) "
        f"on {config.env.name} ({config.total_env_steps:,} env steps per seed), one program",
        flush=True,
    )
    result = train(
        config,
        sweep=spec,
        seeds_per_point=args.seeds_per_point,
        progress=not args.no_progress,
        run_dir=args.run_dir,
    )
    print(result.table())
    r = result.result
    print(
        f"compile {r.compile_time_s:.1f}s (once for all points), run {r.run_time_s:.1f}s, "
        f"{r.env_steps_per_s:,.0f} env-steps/s over all seeds"
    )
    if args.out is not None:
        for path in result.write(args.out):
            print(f"wrote {path}")
    return 0


def add_parser(sub: Any, add_common) -> argparse.ArgumentParser:
    """Add the `sweep` command; `add_common(parser)` adds the options it shares with `train`."""
    s = sub.add_parser(
        "sweep",
        help="train a hyperparameter sweep in one compiled program",
        description=__doc__.split("\n")[0],
    )
    s.add_argument(
        "--sweep",
        action="append",
        metavar="FIELD=V1,V2",
        help="a grid axis: a sweepable field (jaxrl_fast.config.hparams.SWEEPABLE) and its values",
    )
    s.add_argument(
        "--zip",
        action="append",
        metavar="FIELD=V1,V2",
        help="a field of the one zipped axis (all --zip fields step together)",
    )
    s.add_argument("--seeds-per-point", type=int, default=4, help="seeds per point (default 4)")
    s.add_argument("--out", help="directory for sweep.json, sweep.md and sweep.png")
    s.add_argument("--run-dir", help="new directory for the run's files (metrics, checkpoints)")
    s.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    s.add_argument("--no-cache", action="store_true", help="do not use the compilation cache")
    add_common(s)
    s.set_defaults(func=_run)
    return s
