"""Command line of `xla_report`: the `jaxrl-fast xla-report` subcommand and the config its
options name."""

from __future__ import annotations

import argparse
import json
from typing import Any

from jaxrl_fast.config import TrainConfig


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `xla-report` subcommand to an argparse `subparsers` object.

    `args.func(args)` prints the report (text, or JSON with --json) and returns 0; bad input
    raises `ValueError` (and a missing extra `ImportError`) for the caller to report.
    """
    p = subparsers.add_parser(
        "xla-report", help="what JAX and XLA did to the fused loop: DCE, fusion, cost, timing"
    )
    p.add_argument("--preset", help="a preset name (default: the default preset)")
    p.add_argument("--env", help="env name; overrides the preset's")
    p.add_argument("--seeds", type=int, help="seeds in the program (vmapped)")
    p.add_argument("--total-env-steps", type=int, help="env steps per seed")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="any config field")
    p.add_argument("--timing-iterations", type=int, default=2, help="blocks run op by op")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_main)
    return p


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The config the `xla-report` options name: the preset with --env, --seeds,
    --total-env-steps and --set applied together (validated once, so e.g. a shorter run and its
    `learning_starts` can change at once).

    Raises:
      ValueError: unknown preset or field, or a config that does not validate.
    """
    from jaxrl_fast import presets
    from jaxrl_fast.config import options

    config = presets.get(args.preset or presets.DEFAULT)
    short = {"env.name": args.env, "num_seeds": args.seeds, "total_env_steps": args.total_env_steps}
    changes = {k: v for k, v in short.items() if v is not None}
    changes.update(options.parse_set(args.set or []))
    return options.apply(config, changes)


def _main(args: argparse.Namespace) -> int:
    from jaxrl_fast.xla_report.reports import report

    result = report(config_from_args(args), timing_iterations=args.timing_iterations)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.render())
    return 0
