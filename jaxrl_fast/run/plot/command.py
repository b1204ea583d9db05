"""The `jaxrl-fast plot DIR [DIR ...]` command."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from jaxrl_fast.run.plot.figures import default_out, plot_runs
from jaxrl_fast.run.plot.runs import DEFAULT_METRICS

__all__ = ["add_parser", "main"]

_DESCRIPTION = "Learning curves from run directories (mean and min..max over seeds)."


def _plot_command(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else default_out(args.dirs)
    metrics = DEFAULT_METRICS
    if args.metrics is not None:
        metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    plot_runs(args.dirs, out=out, metrics=metrics)
    print(out)
    return 0


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="run directories (--run-dir)")
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="figure file; the extension picks the format: .png, .pdf, .svg (default with one "
        "DIR: DIR/curves.png; required with several)",
    )
    parser.add_argument(
        "--metrics",
        help=f"comma-separated metrics.jsonl columns, a panel each (default: "
        f"{','.join(DEFAULT_METRICS)})",
    )
    parser.set_defaults(func=_plot_command)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `plot` subcommand to an argparse `subparsers` object.

    `args.func(args)` then draws the figure, prints the file written and returns 0; it raises
    `ValueError` (bad directory, several directories without --out, unknown metric or format)
    and `ImportError` (no matplotlib), for the caller to report.

    Args:
      subparsers: what `ArgumentParser.add_subparsers()` returned.

    Returns:
      The `plot` parser.
    """
    parser = subparsers.add_parser(
        "plot",
        help="draw learning curves (mean and min..max over seeds) of run directories",
        description=_DESCRIPTION,
    )
    _add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `plot DIR [DIR ...] [--out FILE] [--metrics a,b]`; returns the exit code.

    Prints the file written. Errors (bad input, no matplotlib) are one line on stderr and exit
    code 2.
    """
    parser = argparse.ArgumentParser(prog="jaxrl-fast plot", description=_DESCRIPTION)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, ImportError) as err:
        print(f"jaxrl-fast plot: error: {err}", file=sys.stderr)
        return 2
